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
  Error e;
  e.kind = ErrorKind::kSystem;
  e.errnum = err;
  e.code = ErrnoName(err);
  e.op = op;
  e.message = op + ": " + ErrnoText(err);
  if (err == EPERM || err == EACCES) e.message += " (CAP_NET_ADMIN required)";
  throw Exception(std::move(e));
}

void ThrowDecode(const std::string& op, const std::string& why) {
  Error e;
  e.kind = ErrorKind::kDecode;
  e.errnum = EPROTO;
  e.code = "EPROTO";
  e.op = op;
  e.message = op + ": malformed reply: " + why;
  throw Exception(std::move(e));
}

void ThrowInvalid(const std::string& op, const std::string& why, int64_t index, int64_t member) {
  Error e;
  e.index = index;
  e.member = member;
  e.kind = ErrorKind::kInvalid;
  e.errnum = EINVAL;
  e.code = "EINVAL";
  e.op = op;
  e.message = op + ": " + why;
  throw Exception(std::move(e));
}

}  // namespace nl
