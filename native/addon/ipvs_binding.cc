// JS surface of the IPVS family: class IpvsHandle.
#include <linux/ip_vs.h>
#include <linux/netlink.h>

#include <memory>

#include "addon/async.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "ipvs/codec.h"
#include "netlink/genl.h"

namespace addon {

namespace {

const nl::GenlFamily& IpvsFamily(Channel& ch) {
  return ch.genl.Resolve(ch.Sock(), IPVS_GENL_NAME, "ip_vs");
}

class IpvsHandle : public Napi::ObjectWrap<IpvsHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    exports.Set("IpvsHandle", DefineClass(env, "IpvsHandle",
                                          {
                                              InstanceMethod<&IpvsHandle::Info>("info"),
                                              InstanceMethod<&IpvsHandle::Stats>("stats"),
                                          }));
  }

  explicit IpvsHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<IpvsHandle>(info) {
    ch_ = std::make_shared<Channel>(NETLINK_GENERIC, NetnsOption(info, 0));
  }

 private:
  Napi::Value Info(const Napi::CallbackInfo& info) {
    auto ch = ch_;
    return PromiseWorker<ipvs::Info>::Run(
        info.Env(),
        [ch]() {
          std::lock_guard<std::mutex> lock(ch->mu);
          const nl::GenlFamily& fam = IpvsFamily(*ch);
          nl::Batch b;
          ipvs::EncodeGetInfo(b, fam.id);
          nl::TransactResult res = ch->Sock().Transact(b, nl::TransactOptions{});
          if (res.results[0].outcome != nl::Outcome::kOk)
            throw nl::Exception(KernelError("IPVS_CMD_GET_INFO", 0, res.results[0].status));
          if (res.data.empty()) nl::ThrowDecode("IPVS_CMD_GET_INFO", "no reply message");
          ipvs::Info out;
          std::string why;
          if (!ipvs::DecodeInfo(reinterpret_cast<const nlmsghdr*>(res.data[0].bytes.data()), &out, &why))
            nl::ThrowDecode("IPVS_CMD_GET_INFO", why);
          return out;
        },
        [](Napi::Env env, ipvs::Info& r) -> Napi::Value {
          Napi::Object o = Napi::Object::New(env);
          o.Set("version", ipvs::FormatVersion(r.version));
          o.Set("versionCode", r.version);
          o.Set("connTableSize", r.conn_table_size);
          return o;
        });
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) { return SocketStats(info.Env(), *ch_); }

  std::shared_ptr<Channel> ch_;
};

// A message as a request batch would send it (seq and pid zero): the golden-byte form.
Napi::Value EncodeGetInfo(const Napi::CallbackInfo& info) {
  nl::Batch b;
  ipvs::EncodeGetInfo(b, static_cast<uint16_t>(info[0].As<Napi::Number>().Uint32Value()));
  b.Seal();
  return ToBuffer(info.Env(), b.buffer());
}

Napi::Value DecodeInfo(const Napi::CallbackInfo& info) {
  std::vector<uint8_t> storage;
  const nlmsghdr* h = MessageArg(info, 0, &storage, "decodeInfo");
  ipvs::Info out;
  std::string why;
  if (!ipvs::DecodeInfo(h, &out, &why)) ThrowInvalid(info.Env(), "decodeInfo", why);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("version", ipvs::FormatVersion(out.version));
  o.Set("connTableSize", out.conn_table_size);
  return o;
}

}  // namespace

void InitIpvs(Napi::Env env, Napi::Object exports) {
  IpvsHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "ipvs");
  codec.Set("encodeGetInfo", Napi::Function::New(env, EncodeGetInfo));
  codec.Set("decodeInfo", Napi::Function::New(env, DecodeInfo));
}

}  // namespace addon
