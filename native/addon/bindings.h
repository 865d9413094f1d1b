// Every family's Init, called once by addon.cc, plus helpers shared by the family bindings
// (with args.h, how they read their arguments, and method.h, how they define their methods).
#pragma once

#include <linux/netlink.h>
#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "addon/args.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "addon/method.h"
#include "netlink/message.h"

namespace addon {

void InitCodec(Napi::Env env, Napi::Object exports);
void InitGenl(Napi::Env env, Napi::Object exports);
void InitIpvs(Napi::Env env, Napi::Object exports);
void InitNftables(Napi::Env env, Napi::Object exports);
void InitRtnl(Napi::Env env, Napi::Object exports);
void InitIpset(Napi::Env env, Napi::Object exports);
void InitConntrack(Napi::Env env, Napi::Object exports);
void InitMemory(Napi::Env env, Napi::Object exports);
void InitCpu(Napi::Env env, Napi::Object exports);

// Codec hooks for tests: every family adds its pure encoders/decoders under
// exports.codec.<family> from its own binding file (CodecNamespace creates that object).
Napi::Object CodecNamespace(Napi::Env env, Napi::Object exports, const char* family);
Napi::Buffer<uint8_t> ToBuffer(Napi::Env env, const std::vector<uint8_t>& v);

// A name where there is one, else the number (a protocol, scope or type no table names).
inline Napi::Value NameOr(Napi::Env env, const char* name, double number) {
  return name ? Napi::Value(Napi::String::New(env, name)) : Napi::Number::New(env, number);
}

// to_js(item) for every item of `items`, as an array.
template <class Items, class ToJs>
Napi::Array ArrayOf(Napi::Env env, Items& items, ToJs&& to_js) {
  Napi::Array a = Napi::Array::New(env, items.size());
  for (size_t i = 0; i < items.size(); i++) a.Set(i, to_js(items[i]));
  return a;
}

// Argument `v` as an array of ops, each read by read(value, i) inside AtOp (an error it throws
// names op i).
template <class Read>
auto OpsArg(Napi::Env env, const Napi::Value& v, const char* op, Read&& read) {
  Napi::Array arr = ArrayArg(env, v, op, "expected an array of ops");
  std::vector<decltype(read(arr.Get(0u), 0u))> out;
  out.reserve(arr.Length());
  for (uint32_t i = 0; i < arr.Length(); i++) out.push_back(AtOp(env, i, -1, [&] { return read(arr.Get(i), i); }));
  return out;
}

// A reply's bytes as the message they hold.
inline const nlmsghdr* Msg(const std::vector<uint8_t>& bytes) { return reinterpret_cast<const nlmsghdr*>(bytes.data()); }

// A reply message as a pure decoder `decode(h, out..., &why)` reads it; one it rejects is a
// decode error of `op` (a string made only then: this runs once per message of a dump).
template <class Op, class Decode, class... Out>
void DecodeReply(const nlmsghdr* h, const Op& op, Decode&& decode, Out*... out) {
  std::string why;
  if (!decode(h, out..., &why)) nl::ThrowDecode(op, why);
}

// The same for a decoder of one object: that object.
template <class T, class Op>
T Decoded(const nlmsghdr* h, bool (*decode)(const nlmsghdr*, T*, std::string*), const Op& op) {
  T out;
  DecodeReply(h, op, decode, &out);
  return out;
}

// A dump of `request` whose every message is read by Decoded, each handed to keep(T&&).
template <class T, class Keep>
void DumpDecoded(nl::Socket& sock, nl::Batch& request, const std::string& op,
                 bool (*decode)(const nlmsghdr*, T*, std::string*), Keep&& keep) {
  sock.Dump(request, op, [&](const nlmsghdr* h) { keep(Decoded(h, decode, op)); });
}

// The same, every object kept.
template <class T>
std::vector<T> DumpAll(nl::Socket& sock, nl::Batch& request, const std::string& op,
                       bool (*decode)(const nlmsghdr*, T*, std::string*)) {
  std::vector<T> out;
  DumpDecoded(sock, request, op, decode, [&](T&& x) { out.push_back(std::move(x)); });
  return out;
}

// A decode hook's input: argument 0 as one netlink message (MessageArg), read by a pure decoder
// `decode(h, out..., &why)`; a message it rejects throws the kInvalid error named after the
// hook (`op`) with the decoder's reason.
template <class Decode, class... Out>
void DecodeMessageArg(const Napi::CallbackInfo& info, const char* op, Decode&& decode, Out*... out) {
  std::vector<uint8_t> storage;
  const nlmsghdr* h = MessageArg(info, 0, &storage, op);
  std::string why;
  if (!decode(h, out..., &why)) ThrowInvalid(info.Env(), op, why);
}

// The same for a decoder of one object: that object.
template <class T>
T DecodedArg(const Napi::CallbackInfo& info, const char* op, bool (*decode)(const nlmsghdr*, T*, std::string*)) {
  T out{};
  DecodeMessageArg(info, op, decode, &out);
  return out;
}

// An encode hook's output: what `encode(batch)` appends, sealed (sequence numbers and port id
// zero, the golden-byte form), with `first_flags` added to the first message's flags
// (NLM_F_DUMP for a dump request, as nl::Socket::Dump sends it).
template <class Encode>
Napi::Value EncodedBytes(Napi::Env env, Encode&& encode, uint16_t first_flags = 0) {
  nl::Batch b;
  encode(b);
  b.Seal();
  if (first_flags) b.header(0)->nlmsg_flags |= first_flags;
  return ToBuffer(env, b.buffer());
}

// { sendmsgCalls, recvmsgCalls, messagesSent } of a handle's socket (zeros before first use).
// Read on the main thread while no work is queued; the counters are plain integers.
Napi::Value SocketStats(Napi::Env env, Channel& ch);

// The calls every handle has besides its family's: ready() -> Promise<void> opens the socket
// now (in the handle's namespace), so that a bad netns or a missing capability fails at open
// rather than at first use; close() -> Promise<void> closes it once the requests made before it
// are done, after which every call rejects with a kInvalid EBADF NetlinkError.
Napi::Value ReadyChannel(Napi::Env env, const std::shared_ptr<Channel>& ch);
Napi::Value CloseChannel(Napi::Env env, const std::shared_ptr<Channel>& ch);

// The base of every handle class (class T : public ChannelHandle<T>): its channel, opened in the
// namespace of the constructor's { netns } option, and stats(), ready() and close(), registered
// after T's own methods by Define. A T that reports more defines its own Stats (and befriends
// ChannelHandle<T>, which registers it).
template <class T>
class ChannelHandle : public Wrapped<T> {
 protected:
  ChannelHandle(const Napi::CallbackInfo& info, int protocol)
      : Wrapped<T>(info), ch_(std::make_shared<Channel>(protocol, NetnsOption(info, 0))) {}

  static void Define(Napi::Env env, Napi::Object exports, const char* name,
                     std::vector<Napi::ClassPropertyDescriptor<T>> methods) {
    methods.push_back(Wrapped<T>::template Method<&T::Stats>("stats"));
    methods.push_back(Wrapped<T>::template Method<&ChannelHandle::Ready>("ready"));
    methods.push_back(Wrapped<T>::template Method<&ChannelHandle::Close>("close"));
    exports.Set(name, Wrapped<T>::DefineClass(env, name, methods));
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) { return SocketStats(info.Env(), *ch_); }

  // OnChannel (channel.h) on this handle's channel.
  template <class Result, class Work>
  Napi::Promise OnChannel(Napi::Env env, Work work, typename PromiseWorker<Result>::Done done) {
    return addon::OnChannel<Result>(env, ch_, std::move(work), std::move(done));
  }

  std::shared_ptr<Channel> ch_;

 private:
  Napi::Value Ready(const Napi::CallbackInfo& info) { return ReadyChannel(info.Env(), ch_); }
  Napi::Value Close(const Napi::CallbackInfo& info) { return CloseChannel(info.Env(), ch_); }
};

}  // namespace addon
