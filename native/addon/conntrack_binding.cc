// JS surface of conntrack (nfnetlink subsystem CTNETLINK): class ConntrackHandle + codec hooks.
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <memory>
#include <vector>

#include "addon/batch.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "conntrack/codec.h"

namespace addon {

namespace {

uint8_t ProtoArg(Napi::Env env, const Napi::Value& v, const std::string& op) {
  if (v.IsNumber()) {
    const double d = v.As<Napi::Number>().DoubleValue();
    if (!(d >= 1) || d > 255 || d != std::floor(d)) ThrowInvalid(env, op, "proto must be 1-255");
    return static_cast<uint8_t>(d);
  }
  if (!v.IsString()) ThrowInvalid(env, op, "proto must be a name or a number");
  const std::string s = v.As<Napi::String>().Utf8Value();
  if (s == "tcp") return IPPROTO_TCP;
  if (s == "udp") return IPPROTO_UDP;
  if (s == "sctp") return IPPROTO_SCTP;
  if (s == "udplite") return IPPROTO_UDPLITE;
  if (s == "dccp") return IPPROTO_DCCP;
  if (s == "icmp") return IPPROTO_ICMP;
  if (s == "icmpv6") return IPPROTO_ICMPV6;
  ThrowInvalid(env, op, "unknown proto '" + s + "'");
}

const char* ProtoName(uint8_t p) {
  switch (p) {
    case IPPROTO_TCP: return "tcp";
    case IPPROTO_UDP: return "udp";
    case IPPROTO_SCTP: return "sctp";
    case IPPROTO_UDPLITE: return "udplite";
    case IPPROTO_DCCP: return "dccp";
    case IPPROTO_ICMP: return "icmp";
    case IPPROTO_ICMPV6: return "icmpv6";
    default: return nullptr;
  }
}

void AddrField(Napi::Env env, Napi::Object o, const char* key, bool* has, inet::Addr* out, uint8_t* family,
               const std::string& op) {
  const Napi::Value v = o.Get(key);
  if (!IsSet(v)) return;
  if (!v.IsString()) ThrowInvalid(env, op, std::string(key) + " must be an address string");
  const std::string s = v.As<Napi::String>().Utf8Value();
  if (!inet::Parse(s, out)) ThrowInvalid(env, op, std::string(key) + " '" + s + "' is not an IPv4 or IPv6 address");
  if (*family && *family != out->family)
    ThrowInvalid(env, op, std::string(key) + " '" + s + "' does not match the filter's family");
  *family = static_cast<uint8_t>(out->family);
  *has = true;
}

int32_t PortField(Napi::Env env, Napi::Object o, const char* key, const std::string& op) {
  const Napi::Value v = o.Get(key);
  return IsSet(v) ? static_cast<int32_t>(UIntArg(env, v, 65535, op, key)) : -1;
}

ct::Filter FilterArg(Napi::Env env, const Napi::Value& v, const std::string& op) {
  ct::Filter f;
  if (!IsSet(v)) return f;
  if (!v.IsObject()) ThrowInvalid(env, op, "filter must be an object");
  Napi::Object o = v.As<Napi::Object>();
  const Napi::Value fam = o.Get("family");
  if (IsSet(fam)) f.family = InetFamilyArg(env, fam, op);
  if (IsSet(o.Get("proto"))) f.proto = ProtoArg(env, o.Get("proto"), op);
  AddrField(env, o, "origSrc", &f.has_orig_src, &f.orig_src, &f.family, op);
  AddrField(env, o, "origDst", &f.has_orig_dst, &f.orig_dst, &f.family, op);
  AddrField(env, o, "replySrc", &f.has_reply_src, &f.reply_src, &f.family, op);
  f.orig_dport = PortField(env, o, "origDport", op);
  f.reply_sport = PortField(env, o, "replySport", op);
  if ((f.orig_dport >= 0 || f.reply_sport >= 0) && !f.proto)
    ThrowInvalid(env, op, "a port filter needs proto (tcp, udp, sctp …)");
  return f;
}

Napi::Object TupleToJs(Napi::Env env, const ct::Tuple& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("src", inet::Format(t.src));
  o.Set("dst", inet::Format(t.dst));
  if (t.has_ports) {
    o.Set("sport", t.sport);
    o.Set("dport", t.dport);
  }
  if (t.has_icmp) {
    o.Set("icmpId", t.icmp_id);
    o.Set("icmpType", t.icmp_type);
    o.Set("icmpCode", t.icmp_code);
  }
  return o;
}

Napi::Object FlowToJs(Napi::Env env, const ct::Flow& f) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", f.family == AF_INET6 ? "inet6" : "inet");
  o.Set("proto", NameOr(env, ProtoName(f.orig.proto), f.orig.proto));
  o.Set("orig", TupleToJs(env, f.orig));
  o.Set("reply", TupleToJs(env, f.reply));
  o.Set("status", f.status);
  o.Set("timeout", f.timeout);
  o.Set("mark", f.mark);
  o.Set("id", f.id);
  o.Set("use", f.use);
  if (f.zone) o.Set("zone", f.zone);
  if (f.has_tcp_state) o.Set("tcpState", ct::TcpStateName(f.tcp_state));
  if (f.has_counters) {
    Napi::Object c = Napi::Object::New(env);
    c.Set("origPackets", Napi::BigInt::New(env, f.orig_packets));
    c.Set("origBytes", Napi::BigInt::New(env, f.orig_bytes));
    c.Set("replyPackets", Napi::BigInt::New(env, f.reply_packets));
    c.Set("replyBytes", Napi::BigInt::New(env, f.reply_bytes));
    o.Set("counters", c);
  }
  return o;
}

std::vector<ct::Flow> DumpMatching(nl::Socket& sock, const ct::Filter& f) {
  nl::Batch b;
  ct::EncodeDump(b, f.family);
  std::vector<ct::Flow> out;
  DumpDecoded(sock, b, "IPCTNL_MSG_CT_GET", ct::DecodeFlow, [&](ct::Flow&& flow) {
    if (ct::Matches(flow, f)) out.push_back(std::move(flow));
  });
  return out;
}

struct DeleteResult {
  std::vector<ct::Flow> matched;
  nl::TransactResult res;
};

class ConntrackHandle : public ChannelHandle<ConntrackHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "ConntrackHandle",
           {Method<&ConntrackHandle::List>("list"), Method<&ConntrackHandle::Count>("count"),
            Method<&ConntrackHandle::Delete>("delete")});
  }

  explicit ConntrackHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_NETFILTER) {}

 private:
  Napi::Value List(const Napi::CallbackInfo& info) {
    const ct::Filter f = FilterArg(info.Env(), info[0], "IPCTNL_MSG_CT_GET");
    return OnChannel<std::vector<ct::Flow>>(info.Env(), [f](Channel& ch) { return DumpMatching(ch.Sock(), f); },
        [](Napi::Env env, std::vector<ct::Flow>& flows) -> Napi::Value {
          return ArrayOf(env, flows, [&](const ct::Flow& flow) { return FlowToJs(env, flow); });
        });
  }

  Napi::Value Count(const Napi::CallbackInfo& info) {
    const ct::Filter f = FilterArg(info.Env(), info[0], "IPCTNL_MSG_CT_GET");
    return OnChannel<size_t>(info.Env(), [f](Channel& ch) { return DumpMatching(ch.Sock(), f).size(); },
        [](Napi::Env env, size_t& n) -> Napi::Value { return Napi::Number::New(env, static_cast<double>(n)); });
  }

  // delete(filter) -> { matched, deleted, gone, errors, sendmsgCalls }: one dump, then the
  // matching flows deleted by tuple+id in one batch. A flow that expired in between (ENOENT)
  // counts as gone, not as an error.
  Napi::Value Delete(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    // A delete names what it deletes: a missing filter is refused ({} deletes every flow).
    if (!info[0].IsObject()) ThrowInvalid(env, "IPCTNL_MSG_CT_DELETE", "filter must be an object ({} matches every flow)");
    const ct::Filter f = FilterArg(env, info[0], "IPCTNL_MSG_CT_DELETE");
    nl::TransactOptions opts = BatchOptions(info[1]);
    opts.stop_on_error = false;
    return OnChannel<std::shared_ptr<DeleteResult>>(env, [f, opts](Channel& ch) {
          auto r = std::make_shared<DeleteResult>();
          r->matched = DumpMatching(ch.Sock(), f);
          nl::Batch b;
          for (const ct::Flow& flow : r->matched) ct::EncodeDelete(b, flow);
          r->res = ch.Sock().Transact(b, opts);
          return r;
        },
        [](Napi::Env env, std::shared_ptr<DeleteResult>& r) -> Napi::Value {
          uint32_t deleted = 0, gone = 0, ne = 0;
          Napi::Array errors = Napi::Array::New(env);
          for (size_t i = 0; i < r->res.results.size(); i++) {
            const nl::RequestResult& rr = r->res.results[i];
            if (rr.outcome == nl::Outcome::kOk) {
              deleted++;
            } else if (rr.outcome == nl::Outcome::kError && rr.status.error == ENOENT) {
              gone++;
            } else if (rr.outcome == nl::Outcome::kError || rr.status.error) {
              const ct::Flow& f = r->matched[i];
              const std::string op = std::string("IPCTNL_MSG_CT_DELETE ") + (ProtoName(f.orig.proto) ? ProtoName(f.orig.proto) : "proto") +
                                     " " + inet::Format(f.orig.src) + ":" + std::to_string(f.orig.sport) + " -> " +
                                     inet::Format(f.orig.dst) + ":" + std::to_string(f.orig.dport);
              errors.Set(ne++, MakeError(env, KernelError(op, static_cast<int64_t>(i), rr.status)));
            }
          }
          Napi::Object o = Napi::Object::New(env);
          o.Set("matched", static_cast<double>(r->matched.size()));
          o.Set("deleted", deleted);
          o.Set("gone", gone);
          o.Set("errors", errors);
          o.Set("sendmsgCalls", static_cast<double>(r->res.sendmsg_calls));
          return o;
        });
  }
};

Napi::Value DecodeFlowHook(const Napi::CallbackInfo& info) {
  return FlowToJs(info.Env(), DecodedArg(info, "decodeFlow", ct::DecodeFlow));
}

// matches(flowMessage, filter) -> boolean: the C++ filter on a decoded reply.
Napi::Value MatchesHook(const Napi::CallbackInfo& info) {
  const ct::Flow f = DecodedArg(info, "matches", ct::DecodeFlow);
  return Napi::Boolean::New(info.Env(), ct::Matches(f, FilterArg(info.Env(), info[1], "matches")));
}

// encodeDelete(flowMessage) -> the DELETE request for that flow (golden form).
Napi::Value EncodeDeleteHook(const Napi::CallbackInfo& info) {
  const ct::Flow f = DecodedArg(info, "encodeDelete", ct::DecodeFlow);
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { ct::EncodeDelete(b, f); });
}

Napi::Value EncodeDumpHook(const Napi::CallbackInfo& info) {
  const auto family = static_cast<uint8_t>(NumberOr(info[0], 0));
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { ct::EncodeDump(b, family); });
}

}  // namespace

void InitConntrack(Napi::Env env, Napi::Object exports) {
  ConntrackHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "conntrack");
  codec.Set("decodeFlow", Function<DecodeFlowHook>(env, "decodeFlow"));
  codec.Set("matches", Function<MatchesHook>(env, "matches"));
  codec.Set("encodeDelete", Function<EncodeDeleteHook>(env, "encodeDelete"));
  codec.Set("encodeDump", Function<EncodeDumpHook>(env, "encodeDump"));
}

}  // namespace addon
