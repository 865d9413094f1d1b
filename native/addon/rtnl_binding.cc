// JS surface of rtnetlink: class RtnlHandle.
#include <linux/netlink.h>

#include <memory>
#include <vector>

#include "addon/async.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "rtnl/link.h"

namespace addon {

Napi::Value LinkToJs(Napi::Env env, const rtnl::Link& l) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("index", l.index);
  o.Set("name", l.name);
  o.Set("flags", l.flags);
  o.Set("up", (l.flags & 1u) != 0);  // IFF_UP
  o.Set("type", l.type);
  o.Set("mtu", l.mtu);
  if (!l.kind.empty()) o.Set("kind", l.kind);
  o.Set("operstate", l.operstate);
  if (!l.address.empty()) o.Set("address", l.address);
  return o;
}

namespace {

class RtnlHandle : public Napi::ObjectWrap<RtnlHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    exports.Set("RtnlHandle", DefineClass(env, "RtnlHandle",
                                          {
                                              InstanceMethod<&RtnlHandle::Links>("links"),
                                              InstanceMethod<&RtnlHandle::Stats>("stats"),
                                          }));
  }

  explicit RtnlHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RtnlHandle>(info) {
    ch_ = std::make_shared<Channel>(NETLINK_ROUTE, NetnsOption(info, 0));
  }

 private:
  Napi::Value Links(const Napi::CallbackInfo& info) {
    auto ch = ch_;
    return PromiseWorker<std::vector<rtnl::Link>>::Run(
        info.Env(),
        [ch]() {
          std::lock_guard<std::mutex> lock(ch->mu);
          nl::Batch b;
          rtnl::EncodeDumpLinks(b);
          std::vector<rtnl::Link> links;
          ch->Sock().Dump(b, "RTM_GETLINK", [&](const nlmsghdr* h) {
            rtnl::Link l;
            std::string why;
            if (!rtnl::DecodeLink(h, &l, &why)) nl::ThrowDecode("RTM_GETLINK", why);
            links.push_back(std::move(l));
          });
          return links;
        },
        [](Napi::Env env, std::vector<rtnl::Link>& links) -> Napi::Value {
          Napi::Array a = Napi::Array::New(env, links.size());
          for (size_t i = 0; i < links.size(); i++) a.Set(i, LinkToJs(env, links[i]));
          return a;
        });
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) { return SocketStats(info.Env(), *ch_); }

  std::shared_ptr<Channel> ch_;
};

Napi::Value DecodeLink(const Napi::CallbackInfo& info) {
  std::vector<uint8_t> storage;
  const nlmsghdr* h = MessageArg(info, 0, &storage, "decodeLink");
  rtnl::Link l;
  std::string why;
  if (!rtnl::DecodeLink(h, &l, &why)) ThrowInvalid(info.Env(), "decodeLink", why);
  return LinkToJs(info.Env(), l);
}

}  // namespace

void InitRtnl(Napi::Env env, Napi::Object exports) {
  RtnlHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "rtnl");
  codec.Set("decodeLink", Napi::Function::New(env, DecodeLink));
}

}  // namespace addon
