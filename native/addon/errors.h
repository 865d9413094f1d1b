// nl::Error -> JS. The TypeScript layer registers a factory (NetlinkError's constructor) at
// load time, so every error the addon produces is a real NetlinkError instance.
#pragma once

#include <napi.h>

#include "netlink/error.h"
#include "netlink/socket.h"

namespace addon {

void InitErrors(Napi::Env env, Napi::Object exports);
Napi::Value MakeError(Napi::Env env, const nl::Error& e);
// Throws a kInvalid error synchronously (input rejected before anything was sent); with `index`,
// the error of op `index` of a batch ("op 3 (<op>): <why>").
[[noreturn]] void ThrowInvalid(Napi::Env env, const std::string& op, const std::string& why, int64_t index = -1);
// Runs f(), which reads op `index` of a batch (its member `member` when >= 0): the error it
// throws leaves with `index` (and `member`) set, and a JS error that is not a NetlinkError (a
// value N-API could not read as the expected type, a throwing getter) becomes a kInvalid one
// naming the op, so no raw JS error leaves a batch call. RethrowAtOp with index -1 is the same
// for a call's arguments outside any op (method.h applies it to every binding call).
[[noreturn]] void RethrowAtOp(Napi::Env env, const Napi::Error& e, int64_t index, int64_t member);
template <class F>
auto AtOp(Napi::Env env, int64_t index, int64_t member, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Napi::Error& e) {
    RethrowAtOp(env, e, index, member);
  }
}
// The error for one failed request of a batch.
nl::Error KernelError(const std::string& op, int64_t index, const nl::Status& st);

}  // namespace addon
