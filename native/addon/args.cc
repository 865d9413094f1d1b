#include "addon/args.h"

#include <sys/socket.h>

#include <cmath>

#include "addon/errors.h"

namespace addon {

bool IsSet(const Napi::Value& v) { return !v.IsUndefined() && !v.IsNull(); }

Napi::Value Opt(const Napi::Value& opts, const char* key) {
  if (!opts.IsObject()) return opts.Env().Undefined();
  return opts.As<Napi::Object>().Get(key);
}

uint64_t UIntArg(Napi::Env env, const Napi::Value& v, uint64_t max, const std::string& op, const std::string& what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    const uint64_t x = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless || x > max) ThrowInvalid(env, op, what + " is out of range 0-" + std::to_string(max));
    return x;
  }
  if (!v.IsNumber()) ThrowInvalid(env, op, what + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d != std::floor(d) || d > static_cast<double>(max) || d > 9007199254740991.0)
    ThrowInvalid(env, op,
                 what + " is out of range 0-" + std::to_string(max) + " (got " + v.ToString().Utf8Value() + ")");
  return static_cast<uint64_t>(d);
}

uint64_t UIntOpt(Napi::Env env, const Napi::Value& opts, const char* key, uint64_t max, uint64_t dflt,
                 const std::string& op) {
  const Napi::Value v = Opt(opts, key);
  return IsSet(v) ? UIntArg(env, v, max, op, key) : dflt;
}

std::string StrArg(Napi::Env env, const Napi::Value& v, const std::string& op, const std::string& what) {
  if (!v.IsString()) ThrowInvalid(env, op, what + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

std::string NameOpt(Napi::Env env, const Napi::Value& opts, const char* key, size_t max, const std::string& op) {
  const Napi::Value v = Opt(opts, key);
  if (!IsSet(v)) return "";
  std::string s = StrArg(env, v, op, key);
  if (s.size() > max) ThrowInvalid(env, op, std::string(key) + " is longer than " + std::to_string(max) + " bytes");
  if (s.find('\0') != std::string::npos) ThrowInvalid(env, op, std::string(key) + " contains a NUL byte");
  return s;
}

bool BoolOpt(const Napi::Value& opts, const char* key, bool dflt) {
  const Napi::Value v = Opt(opts, key);
  return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : dflt;
}

bool BoolArg(Napi::Env env, const Napi::Value& v, bool dflt, const std::string& op, const std::string& what) {
  if (!IsSet(v)) return dflt;
  if (!v.IsBoolean()) ThrowInvalid(env, op, what + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

uint8_t InetFamilyArg(Napi::Env env, const Napi::Value& v, const std::string& op) {
  const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
  if (s == "inet") return AF_INET;
  if (s == "inet6") return AF_INET6;
  ThrowInvalid(env, op, "family must be 'inet' or 'inet6'");
}

Napi::Array ArrayArg(Napi::Env env, const Napi::Value& v, const std::string& op, const char* why) {
  if (!v.IsArray()) ThrowInvalid(env, op, why);
  return v.As<Napi::Array>();
}

uint32_t NumberOr(const Napi::Value& v, uint32_t dflt) {
  return v.IsNumber() ? v.As<Napi::Number>().Uint32Value() : dflt;
}

std::string NetnsOption(const Napi::CallbackInfo& info, size_t arg) {
  if (info.Length() <= arg || !IsSet(info[arg])) return "";
  if (!info[arg].IsObject()) ThrowInvalid(info.Env(), "open", "options must be an object");
  const Napi::Value ns = Opt(info[arg], "netns");
  if (!IsSet(ns)) return "";
  if (!ns.IsString()) ThrowInvalid(info.Env(), "open", "netns must be a path string");
  return ns.As<Napi::String>().Utf8Value();
}

nl::TransactOptions BatchOptions(const Napi::Value& opts) {
  nl::TransactOptions o;
  o.stop_on_error = BoolOpt(opts, "stopOnError", o.stop_on_error);
  const Napi::Value m = Opt(opts, "maxBatchMessages");
  if (m.IsNumber() && m.As<Napi::Number>().Uint32Value() > 0) o.max_chunk_messages = m.As<Napi::Number>().Uint32Value();
  return o;
}

std::vector<uint8_t> BufferArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsBuffer()) ThrowInvalid(info.Env(), "codec", "expected a Buffer");
  auto b = info[i].As<Napi::Buffer<uint8_t>>();
  return std::vector<uint8_t>(b.Data(), b.Data() + b.Length());
}

const nlmsghdr* MessageArg(const Napi::CallbackInfo& info, size_t i, std::vector<uint8_t>* storage,
                           const char* op) {
  *storage = BufferArg(info, i);
  if (storage->size() < NLMSG_HDRLEN) ThrowInvalid(info.Env(), op, "shorter than a netlink header");
  const auto* h = reinterpret_cast<const nlmsghdr*>(storage->data());
  if (h->nlmsg_len > storage->size() || h->nlmsg_len < NLMSG_HDRLEN) ThrowInvalid(info.Env(), op, "bad nlmsg_len");
  return h;
}

}  // namespace addon
