// Errors of the netlink layer. Thrown on worker threads only; the addon turns them into JS
// NetlinkError objects with the same fields.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

namespace nl {

enum class ErrorKind {
  kKernel,           // the kernel rejected a request (errno + extended ack)
  kNoBuffers,        // ENOBUFS: replies were dropped, the outcome of some requests is unknown
  kDumpInterrupted,  // NLM_F_DUMP_INTR: the object set changed during the dump, redo it
  kDecode,           // a reply did not parse
  kSystem,           // a socket syscall failed (socket, bind, setns, sendmsg ...)
  kInvalid,          // input rejected before anything was sent
  kUnsupported,      // the kernel lacks a feature (missing module / family)
};

const char* KindName(ErrorKind k);
// "EEXIST" for EEXIST, "E4103"-style fallback for unknown numbers.
std::string ErrnoName(int e);
std::string ErrnoText(int e);

struct Error {
  Error() = default;
  // What every error says; extack, index and member are set where they apply.
  Error(ErrorKind kind, int errnum, std::string code, std::string op, std::string message)
      : kind(kind), errnum(errnum), code(std::move(code)), op(std::move(op)), message(std::move(message)) {}

  ErrorKind kind = ErrorKind::kKernel;
  int errnum = 0;        // positive errno, or a family-specific code (ipset >= 4096)
  std::string code;      // "EEXIST", "IPSET_ERR_EXIST", "DUMP_INTR" ...
  std::string op;        // what was being done: "IPVS_CMD_NEW_SERVICE", "socket", ...
  std::string message;   // human readable, complete sentence
  std::string extack;    // the kernel's extended-ack text, if any
  int64_t extack_offset = -1;
  int64_t index = -1;    // index of the failing request in its batch
  int64_t member = -1;   // within a multi-element op (ipset ADT): the element that failed
};

class Exception : public std::exception {
 public:
  explicit Exception(Error e) : err_(std::move(e)) {}
  const Error& error() const { return err_; }
  const char* what() const noexcept override { return err_.message.c_str(); }

 private:
  Error err_;
};

// Builds and throws a kSystem error for a failed syscall, reading errno.
[[noreturn]] void ThrowSystem(const std::string& op, int err);
[[noreturn]] void ThrowDecode(const std::string& op, const std::string& why);
// `index`/`member` (when >= 0): the op of a batch, and the element within it, the input was read from.
[[noreturn]] void ThrowInvalid(const std::string& op, const std::string& why, int64_t index = -1, int64_t member = -1);

}  // namespace nl
