#include "addon/errors.h"
#include "addon/method.h"

#include "addon/instance.h"

namespace addon {

namespace {

Napi::Value SetErrorFactory(const Napi::CallbackInfo& info) {
  if (!info[0].IsFunction()) throw Napi::TypeError::New(info.Env(), "setErrorFactory(fn)");
  Instance::Get(info.Env()).error_factory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

}  // namespace

void InitErrors(Napi::Env env, Napi::Object exports) {
  exports.Set("setErrorFactory", Function<SetErrorFactory>(env, "setErrorFactory"));
}

Napi::Value MakeError(Napi::Env env, const nl::Error& e) {
  Napi::Object fields = Napi::Object::New(env);
  fields.Set("message", e.message);
  fields.Set("code", e.code);
  fields.Set("errno", e.errnum);
  fields.Set("kind", nl::KindName(e.kind));
  fields.Set("op", e.op);
  if (!e.extack.empty()) fields.Set("extack", e.extack);
  if (e.extack_offset >= 0) fields.Set("extackOffset", static_cast<double>(e.extack_offset));
  if (e.index >= 0) fields.Set("index", static_cast<double>(e.index));
  if (e.member >= 0) fields.Set("member", static_cast<double>(e.member));
  Instance& inst = Instance::Get(env);
  if (!inst.error_factory.IsEmpty()) return inst.error_factory.Call({fields});
  Napi::Error err = Napi::Error::New(env, e.message);
  Napi::Object o = err.Value();
  for (const auto& key : {"code", "errno", "kind", "op", "extack", "extackOffset", "index", "member"})
    if (fields.Has(key)) o.Set(key, fields.Get(key));
  return o;
}

void ThrowInvalid(Napi::Env env, const std::string& op, const std::string& why, int64_t index) {
  nl::Error e(nl::ErrorKind::kInvalid, EINVAL, "EINVAL", op,
              (index >= 0 ? "op " + std::to_string(index) + " (" + op + "): " : op + ": ") + why);
  e.index = index;
  throw Napi::Error(env, MakeError(env, e));
}

void RethrowAtOp(Napi::Env env, const Napi::Error& e, int64_t index, int64_t member) {
  Napi::Value v = e.Value();
  if (v.IsObject() && v.As<Napi::Object>().Get("kind").IsString()) {
    Napi::Object o = v.As<Napi::Object>();
    // NetlinkError declares index/member as class fields: unset, they are own properties
    // holding undefined.
    if (index >= 0 && o.Get("index").IsUndefined()) o.Set("index", static_cast<double>(index));
    if (member >= 0 && o.Get("member").IsUndefined()) o.Set("member", static_cast<double>(member));
    throw Napi::Error(env, v);
  }
  const std::string op =
      index < 0 ? "arguments" : "op " + std::to_string(index) + (member >= 0 ? " member " + std::to_string(member) : "");
  nl::Error err(nl::ErrorKind::kInvalid, EINVAL, "EINVAL", op, op + ": malformed (" + e.Message() + ")");
  err.index = index;
  err.member = member;
  throw Napi::Error(env, MakeError(env, err));
}

nl::Error KernelError(const std::string& op, int64_t index, const nl::Status& st) {
  const std::string code = nl::ErrnoName(st.error);
  nl::Error e(st.error == ENOBUFS ? nl::ErrorKind::kNoBuffers : nl::ErrorKind::kKernel, st.error, code, op,
              op + ": " + code + " (" + nl::ErrnoText(st.error) + ")");
  e.index = index;
  e.extack = st.extack;
  e.extack_offset = st.extack_offset;
  if (!st.extack.empty()) e.message += ": " + st.extack;
  if (st.error == EPERM) e.message += " (CAP_NET_ADMIN required)";
  return e;
}

}  // namespace addon
