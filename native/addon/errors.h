// nl::Error -> JS. The TypeScript layer registers a factory (NetlinkError's constructor) at
// load time, so every error the addon produces is a real NetlinkError instance.
#pragma once

#include <napi.h>

#include "netlink/error.h"
#include "netlink/socket.h"

namespace addon {

void InitErrors(Napi::Env env, Napi::Object exports);
Napi::Value MakeError(Napi::Env env, const nl::Error& e);
// Throws a kInvalid error synchronously (input rejected before anything was sent).
[[noreturn]] void ThrowInvalid(Napi::Env env, const std::string& op, const std::string& why);
// The error for one failed request of a batch.
nl::Error KernelError(const std::string& op, int64_t index, const nl::Status& st);

}  // namespace addon
