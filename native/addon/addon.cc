// The addon's entry point: registers every family's bindings.
#include <napi.h>

#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "addon/instance.h"

namespace addon {

Napi::Value SocketStats(Napi::Env env, Channel& ch) {
  Napi::Object o = Napi::Object::New(env);
  const nl::Socket* sock = ch.opened.load();
  auto get = [&](const std::atomic<uint64_t> nl::SocketStats::*f) {
    return sock ? static_cast<double>((sock->stats().*f).load()) : 0.0;
  };
  o.Set("sendmsgCalls", get(&nl::SocketStats::sendmsg_calls));
  o.Set("recvmsgCalls", get(&nl::SocketStats::recvmsg_calls));
  o.Set("messagesSent", get(&nl::SocketStats::messages_sent));
  return o;
}

Napi::Value ReadyChannel(Napi::Env env, const std::shared_ptr<Channel>& ch) {
  return OnChannel<bool>(
      env, ch,
      [](Channel& ch) {
        ch.Sock();
        return true;
      },
      [](Napi::Env env, bool&) -> Napi::Value { return env.Undefined(); });
}

Napi::Value CloseChannel(Napi::Env env, const std::shared_ptr<Channel>& ch) {
  return OnChannel<std::shared_ptr<Channel::Sockets>>(
      env, ch,
      [](Channel& ch) { return ch.CloseLocked(); },
      [ch](Napi::Env env, std::shared_ptr<Channel::Sockets>& s) -> Napi::Value {
        ch->Retire(*s);
        return env.Undefined();
      });
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData(new Instance());
  InitErrors(env, exports);
  InitCodec(env, exports);
  InitGenl(env, exports);
  InitIpvs(env, exports);
  InitNftables(env, exports);
  InitRtnl(env, exports);
  InitIpset(env, exports);
  InitConntrack(env, exports);
  InitMemory(env, exports);
  InitCpu(env, exports);
  return exports;
}

}  // namespace addon

namespace {
Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return addon::Init(env, exports); }
}  // namespace

NODE_API_MODULE(ipvsync, InitModule)
