#include "addon/channel.h"

#include "addon/errors.h"

namespace addon {

std::string NetnsOption(const Napi::CallbackInfo& info, size_t arg) {
  if (info.Length() <= arg || info[arg].IsUndefined() || info[arg].IsNull()) return "";
  if (!info[arg].IsObject()) ThrowInvalid(info.Env(), "open", "options must be an object");
  Napi::Value ns = info[arg].As<Napi::Object>().Get("netns");
  if (ns.IsUndefined() || ns.IsNull()) return "";
  if (!ns.IsString()) ThrowInvalid(info.Env(), "open", "netns must be a path string");
  return ns.As<Napi::String>().Utf8Value();
}

}  // namespace addon
