#include "netlink/error.h"

#include <cstring>
#include <string>

namespace nl {

const char* KindName(ErrorKind k) {
  switch (k) {
    case ErrorKind::kKernel: return "kernel";
    case ErrorKind::kNoBuffers: return "nobufs";
    case ErrorKind::kDumpInterrupted: return "dump-interrupted";
    case ErrorKind::kDecode: return "decode";
    case ErrorKind::kSystem: return "system";
    case ErrorKind::kInvalid: return "invalid";
    case ErrorKind::kUnsupported: return "unsupported";
  }
  return "unknown";
}

std::string ErrnoName(int e) {
  const char* n = strerrorname_np(e);
  if (n) return n;
  return "E" + std::to_string(e);
}

std::string ErrnoText(int e) {
  const char* d = strerrordesc_np(e);
  if (d) return d;
  return "error " + std::to_string(e);
}

void ThrowSystem(const std::string& op, int err) {
  Error e(ErrorKind::kSystem, err, ErrnoName(err), op, op + ": " + ErrnoText(err));
  if (err == EPERM || err == EACCES) e.message += " (CAP_NET_ADMIN required)";
  throw Exception(std::move(e));
}

void ThrowDecode(const std::string& op, const std::string& why) {
  throw Exception(Error(ErrorKind::kDecode, EPROTO, "EPROTO", op, op + ": malformed reply: " + why));
}

void ThrowInvalid(const std::string& op, const std::string& why, int64_t index, int64_t member) {
  Error e(ErrorKind::kInvalid, EINVAL, "EINVAL", op, op + ": " + why);
  e.index = index;
  e.member = member;
  throw Exception(std::move(e));
}

}  // namespace nl
