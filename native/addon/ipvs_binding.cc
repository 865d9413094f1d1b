// JS surface of the IPVS family: class IpvsHandle, plus codec hooks under codec.ipvs.
// JS ops, in their packed form (ipvs/packed.h), are converted to ipvs::Op structs and
// validated on the main thread (a bad op throws a kInvalid NetlinkError naming its index,
// and nothing is sent); a whole batch or a whole listing then costs one worker job.
#include <linux/ip_vs.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "addon/async.h"
#include "addon/batch.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "common/inet.h"
#include "ipvs/codec.h"
#include "ipvs/op_parse.h"
#include "ipvs/packed.h"
#include "netlink/genl.h"

namespace addon {

namespace {

const nl::GenlFamily& IpvsFamily(Channel& ch) {
  return ch.genl.Resolve(ch.Sock(), IPVS_GENL_NAME, "ip_vs");
}

// ---- JS -> structs ---------------------------------------------------------------------------

// A JS value as ipvs::ParseOp's helpers read it (op_parse.h): a service key argument.
class JsValue {
 public:
  JsValue() = default;
  explicit JsValue(Napi::Value v) : v_(v) {}
  bool IsUndefined() const { return v_.IsUndefined(); }
  bool IsNull() const { return v_.IsNull(); }
  bool IsString() const { return v_.IsString(); }
  bool IsNumber() const { return v_.IsNumber(); }
  bool IsArray() const { return v_.IsArray(); }
  bool IsObject() const { return v_.IsObject(); }
  std::string Text() const { return v_.As<Napi::String>().Utf8Value(); }
  double Num() const { return v_.As<Napi::Number>().DoubleValue(); }
  std::string Shown() const { return v_.ToString().Utf8Value(); }
  uint32_t Length() const { return v_.As<Napi::Array>().Length(); }
  JsValue At(uint32_t i) const { return JsValue(v_.As<Napi::Array>().Get(i)); }
  JsValue Get(ipvs::K key) const { return JsValue(v_.As<Napi::Object>().Get(ipvs::Name(key))); }
  bool Same(const JsValue& o) const { return v_.StrictEquals(o.v_); }

 private:
  Napi::Value v_;
};

using ipvs::Problem;

// What an op's error names it: the command and its service / destination.
std::string OpName(const ipvs::Op& op) {
  std::string d = ipvs::CommandName(op.kind);
  switch (op.kind) {
    case ipvs::OpKind::kAddDest:
    case ipvs::OpKind::kUpdateDest:
    case ipvs::OpKind::kDeleteDest: d += " " + ipvs::DescribeDest(op.svc.key, op.dest); break;
    case ipvs::OpKind::kAddService:
    case ipvs::OpKind::kUpdateService:
    case ipvs::OpKind::kDeleteService: d += " " + ipvs::DescribeService(op.svc.key); break;
    case ipvs::OpKind::kZero:
      if (op.has_service) d += " " + ipvs::DescribeService(op.svc.key);
      break;
    default: break;
  }
  if (op.kind == ipvs::OpKind::kAddService || op.kind == ipvs::OpKind::kUpdateService)
    d += " scheduler " + op.svc.sched;
  return d;
}

// A destination op's request is ~164 bytes (IPv4), a service's ~100.
constexpr size_t kBytesPerOp = 176;

// Converts and validates every op of a packed batch (a Uint8Array from src/kernel/ipvs-pack.ts);
// builds the batch. Throws a kInvalid NetlinkError (with the op's index) on the first bad op.
// `ops` (optional) keeps the parsed ops, so that the worker can name the failed ones (OpName)
// without describing every op on the main thread.
void BuildBatch(Napi::Env env, const Napi::Value& v, uint16_t family_id, nl::Batch* b,
                std::vector<ipvs::Op>* ops) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
    ThrowInvalid(env, "apply", "expected packed ops (a Uint8Array from packIpvsOps)");
  Napi::Uint8Array u = v.As<Napi::Uint8Array>();
  ipvs::PackedOps packed;
  std::string why;
  if (!packed.Decode(u.Data(), u.ByteLength(), &why)) ThrowInvalid(env, "apply", why);
  const size_t n = packed.size();
  b->Reserve(n * kBytesPerOp, n);
  if (ops) ops->reserve(n);
  ipvs::ServiceMemo<ipvs::PackedValue> memo;
  for (size_t i = 0; i < n; i++) {
    ipvs::Op op;
    try {
      op = ipvs::ParseOp(packed.op(i), &memo);
    } catch (const Problem& p) {
      ThrowInvalid(env, ipvs::OpNameOf(packed.op(i)), p.why, static_cast<int64_t>(i));
    }
    try {
      ipvs::EncodeOp(*b, family_id, op);
    } catch (const nl::Exception& e) {  // an attribute too long for netlink (AttrWriter)
      ThrowInvalid(env, ipvs::OpNameOf(packed.op(i)), e.error().message, static_cast<int64_t>(i));
    }
    if (ops) ops->push_back(std::move(op));
  }
}

// { ack: 'each' | 'errors' } (default 'errors'). IPVS handles generic netlink requests
// synchronously inside sendmsg, so a request without NLM_F_ACK that drew no error by the time
// the chunk's replies are drained has succeeded: asking the kernel to answer only failures
// saves one recvmsg per op (the dominant cost of a large batch). 'each' sends exactly what
// ipvsadm sends.
bool AckEach(const Napi::Value& v) {
  const Napi::Value a = Opt(v, "ack");
  if (a.IsUndefined()) return false;
  if (!a.IsString()) ThrowInvalid(v.Env(), "apply", "ack must be 'each' or 'errors'");
  const std::string s = a.As<Napi::String>().Utf8Value();
  if (s != "each" && s != "errors") ThrowInvalid(v.Env(), "apply", "ack must be 'each' or 'errors'");
  return s == "each";
}

ipvs::ServiceKey KeyArg(Napi::Env env, const Napi::Value& v, const char* op) {
  ipvs::ServiceKey k;
  try {
    ipvs::parse::ServiceKeyOf(ipvs::parse::Obj(JsValue(v), "service"), &k);
  } catch (const Problem& p) {
    ThrowInvalid(env, op, p.why);
  }
  return k;
}

// ---- structs -> JS ---------------------------------------------------------------------------

std::string FormatAddr(uint16_t af, const uint8_t* bytes) {
  return inet::Format(af == ipvs::kAfInet ? inet::kV4 : inet::kV6, bytes);
}

// Property names and constant values of listing objects, created once per conversion: a
// listing of 100k destinations sets ~1.5M properties, and a napi string made from a C string
// for every key and constant (what Set("name", …) does) cost more than the stores themselves.
struct Names {
  explicit Names(Napi::Env e) : env(e) {}
  Napi::Env env;
  Napi::String k(const char* s) { return Napi::String::New(env, s); }
  // keys
  Napi::String family = k("family"), fwmark = k("fwmark"), protocol = k("protocol"), address = k("address"),
               port = k("port"), scheduler = k("scheduler"), flags = k("flags"), timeout = k("timeout"),
               netmask = k("netmask"), pe = k("pe"), stats = k("stats"), destinations = k("destinations"),
               forward = k("forward"), weight = k("weight"), upperThreshold = k("upperThreshold"),
               lowerThreshold = k("lowerThreshold"), tunnel = k("tunnel"), type = k("type"), checksum = k("checksum"),
               activeConns = k("activeConns"), inactiveConns = k("inactiveConns"), persistentConns = k("persistentConns");
  Napi::String statKeys[10] = {k("conns"), k("inPackets"), k("outPackets"), k("inBytes"), k("outBytes"),
                               k("cps"),   k("inPps"),     k("outPps"),     k("inBps"),   k("outBps")};
  // values
  Napi::String inet = k("inet"), inet6 = k("inet6"), tcp = k("tcp"), udp = k("udp"), sctp = k("sctp"),
               unknown = k("unknown");
  Napi::String fwd[4] = {k("masq"), k("local"), k("tunnel"), k("droute")};
  Napi::String tun[3] = {k("ipip"), k("gue"), k("gre")};

  Napi::String Family(uint16_t af) const { return af == ipvs::kAfInet ? inet : inet6; }
  Napi::Number Num(double v) const { return Napi::Number::New(env, v); }
  Napi::String Str(const std::string& v) const { return Napi::String::New(env, v); }
};

Napi::Object StatsToJs(Names& n, const ipvs::Stats& s) {
  Napi::Object o = Napi::Object::New(n.env);
  const uint64_t v[10] = {s.conns, s.inpkts, s.outpkts, s.inbytes, s.outbytes, s.cps, s.inpps, s.outpps, s.inbps, s.outbps};
  for (int i = 0; i < 10; i++) o.Set(n.statKeys[i], n.Num(static_cast<double>(v[i])));
  return o;
}

Napi::Array FlagsToJs(Napi::Env env, const ipvs::Service& s) {
  Napi::Array a = Napi::Array::New(env);
  uint32_t n = 0;
  if (s.flags & ipvs::kFlagPersistent) a.Set(n++, "persistent");
  if (s.flags & ipvs::kFlagOnePacket) a.Set(n++, "one-packet");
  const bool sh = s.sched == "sh", mh = s.sched == "mh";
  if (s.flags & ipvs::kFlagSched1) a.Set(n++, sh ? "sh-fallback" : mh ? "mh-fallback" : "flag-1");
  if (s.flags & ipvs::kFlagSched2) a.Set(n++, sh ? "sh-port" : mh ? "mh-port" : "flag-2");
  if (s.flags & ipvs::kFlagSched3) a.Set(n++, "flag-3");
  return a;
}

void KeyToJs(Names& n, Napi::Object o, const ipvs::ServiceKey& k) {
  o.Set(n.family, n.Family(k.af));
  if (k.fwmark) {
    o.Set(n.fwmark, n.Num(k.fwmark));
    return;
  }
  o.Set(n.protocol, k.protocol == IPPROTO_TCP ? n.tcp : k.protocol == IPPROTO_UDP ? n.udp : k.protocol == IPPROTO_SCTP ? n.sctp : n.unknown);
  o.Set(n.address, n.Str(FormatAddr(k.af, k.addr)));
  o.Set(n.port, n.Num(k.port));
}

Napi::Object ServiceToJs(Names& n, const ipvs::Service& s, bool stats) {
  Napi::Object o = Napi::Object::New(n.env);
  KeyToJs(n, o, s.key);
  o.Set(n.scheduler, n.Str(s.sched));
  o.Set(n.flags, FlagsToJs(n.env, s));
  o.Set(n.timeout, n.Num(s.timeout));
  if (s.key.af == ipvs::kAfInet) o.Set(n.netmask, n.Str(FormatAddr(ipvs::kAfInet, reinterpret_cast<const uint8_t*>(&s.netmask))));
  else o.Set(n.netmask, n.Num(s.netmask));
  if (!s.pe.empty()) o.Set(n.pe, n.Str(s.pe));
  if (stats && s.have_stats) o.Set(n.stats, StatsToJs(n, s.stats));
  return o;
}

Napi::Object DestToJs(Names& n, const ipvs::ServiceKey& k, const ipvs::Dest& d, bool stats) {
  Napi::Object o = Napi::Object::New(n.env);
  const uint16_t af = d.af ? d.af : k.af;
  o.Set(n.family, n.Family(af));
  o.Set(n.address, n.Str(FormatAddr(af, d.addr)));
  o.Set(n.port, n.Num(d.port));
  o.Set(n.forward, d.fwd <= 3 ? n.fwd[d.fwd] : n.unknown);
  o.Set(n.weight, n.Num(static_cast<double>(d.weight)));
  o.Set(n.upperThreshold, n.Num(d.u_thresh));
  o.Set(n.lowerThreshold, n.Num(d.l_thresh));
  if (d.fwd == ipvs::kTunnel && d.have_tun) {
    Napi::Object t = Napi::Object::New(n.env);
    t.Set(n.type, d.tun_type <= 2 ? n.tun[d.tun_type] : n.unknown);
    if (d.tun_type == ipvs::kGue) t.Set(n.port, n.Num(d.tun_port));
    if (d.tun_type != ipvs::kIpip)
      t.Set(n.checksum, n.k(d.tun_flags & ipvs::kTunRemCsum ? "remcsum" : d.tun_flags & ipvs::kTunCsum ? "csum" : "none"));
    o.Set(n.tunnel, t);
  }
  o.Set(n.activeConns, n.Num(d.active_conns));
  o.Set(n.inactiveConns, n.Num(d.inact_conns));
  o.Set(n.persistentConns, n.Num(d.persist_conns));
  if (stats && d.have_stats) o.Set(n.stats, StatsToJs(n, d.stats));
  return o;
}

Napi::Object DaemonToJs(Napi::Env env, const ipvs::Daemon& d) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("state", d.state == ipvs::kStateBackup ? "backup" : "master");
  o.Set("interface", d.mcast_ifn);
  o.Set("syncId", d.sync_id);
  o.Set("syncMaxLen", d.sync_maxlen);
  if (d.mcast_af) o.Set("mcastGroup", FormatAddr(d.mcast_af, d.mcast_group));
  o.Set("mcastPort", d.mcast_port);
  o.Set("mcastTtl", d.mcast_ttl);
  return o;
}

Napi::Object TimeoutsToJs(Napi::Env env, const ipvs::Timeouts& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("tcp", t.tcp);
  o.Set("tcpFin", t.tcp_fin);
  o.Set("udp", t.udp);
  return o;
}

struct ListOptions {
  bool with_dests = false;
  bool stats = false;
};

ListOptions ListOpts(const Napi::Value& v) {
  ListOptions o;
  o.with_dests = Opt(v, "withDestinations").ToBoolean().Value();
  o.stats = Opt(v, "stats").ToBoolean().Value();
  return o;
}

struct Listing {
  std::vector<ipvs::Service> services;
  // Parallel to services when with_dests: dests[i] belongs to services[i]. A reused listing
  // (ListingPool) may hold more entries than services, left empty; services.size() counts.
  std::vector<std::vector<ipvs::Dest>> dests;
  bool found = true;  // for service(): false on ESRCH
};

// Empties l->dests[0..n) (and sizes it to at least n) keeping every vector's capacity.
void ResetDests(Listing* l, size_t n) {
  if (l->dests.size() < n) l->dests.resize(n);
  for (size_t i = 0; i < n; i++) l->dests[i].clear();
}

// One spare listing per handle, reused by the next services() call. A full listing is a lot of
// fresh memory (10k services x 10 destinations: ~5k pages of structs and vectors) that the
// allocator hands back to the kernel when it is freed, so every call paid a page fault per
// page again: cheap on bare metal, but ~100-300 us each under user-mode Linux, growing with the
// process size, and the main reason a 10k listing took 10x+ longer per service than a 1k one
// there. Reusing the storage (cleared, capacities kept) makes repeated listings touch no new
// memory; the cost is that a handle keeps its largest listing's storage.
class ListingPool : public std::enable_shared_from_this<ListingPool> {
 public:
  std::shared_ptr<Listing> Take() {
    std::unique_ptr<Listing> l;
    {
      std::lock_guard<std::mutex> lock(mu_);
      l = std::move(spare_);
    }
    if (!l) l = std::make_unique<Listing>();
    std::weak_ptr<ListingPool> pool = weak_from_this();
    return std::shared_ptr<Listing>(l.release(), [pool](Listing* p) {
      std::unique_ptr<Listing> owned(p);
      if (auto self = pool.lock()) self->Give(std::move(owned));
    });
  }

 private:
  void Give(std::unique_ptr<Listing> l) {
    l->services.clear();
    ResetDests(l.get(), l->dests.size());
    l->found = true;
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_) spare_ = std::move(l);
  }
  std::mutex mu_;
  std::unique_ptr<Listing> spare_;
};

// The reply to the one request of `b`, a GET answered by one data message, decoded; nothing
// when the kernel answered `absent` (ESRCH: no such service). Another failure throws its
// KernelError (with `index`).
template <class T>
std::optional<T> Get(Channel& ch, nl::Batch& b, const std::string& op, int64_t index,
                     bool (*decode)(const nlmsghdr*, T*, std::string*), int absent = 0) {
  nl::TransactResult res = ch.Sock().Transact(b, nl::TransactOptions{});
  const nl::RequestResult& rr = res.results[0];
  if (absent && rr.outcome == nl::Outcome::kError && rr.status.error == absent) return std::nullopt;
  if (rr.outcome != nl::Outcome::kOk) throw nl::Exception(KernelError(op, index, rr.status));
  if (res.data.empty()) nl::ThrowDecode(op, "no reply message");
  return Decoded(Msg(res.data[0].bytes), decode, op);
}

void DumpDests(Channel& ch, uint16_t fam, const ipvs::ServiceKey& k, std::vector<ipvs::Dest>* out) {
  nl::Batch req;
  ipvs::EncodeGetDests(req, fam, k);
  DumpDecoded(ch.Sock(), req, "IPVS_CMD_GET_DEST", ipvs::DecodeDest, [&](ipvs::Dest&& d) { out->push_back(d); });
}

// Every listed service's destinations. With io_uring, many GET_DEST dumps run at once over a
// pool of sockets, a few io_uring_enter calls for the whole table (netlink/multidump.h);
// without it (or with the handle's ioUring option off) one dump per service on the handle's
// socket. Both read replies with the same nl::DumpReader and throw the same error: the one of
// the first service (in listing order) whose dump failed. A service deleted after the service
// dump has no destinations: the kernel answers its GET_DEST with an empty dump, on both paths.
void DumpAllDests(Channel& ch, uint16_t fam, Listing* l) {
  static const std::string kOp = "IPVS_CMD_GET_DEST";
  const size_t n = l->services.size();
  ResetDests(l, n);
  if (nl::MultiDump* m = ch.Multi()) {
    try {
      m->Run(
          n, kOp, [&](size_t i, nl::Batch& b) { ipvs::EncodeGetDests(b, fam, l->services[i].key); },
          [&](size_t i, const nlmsghdr* h) { l->dests[i].push_back(Decoded(h, ipvs::DecodeDest, kOp)); });
      return;
    } catch (const nl::Exception& e) {
      if (m->healthy()) throw;
      ch.DropMulti(e.error().message);  // io_uring itself failed: redo it one dump at a time
      ResetDests(l, n);
    }
  }
  for (size_t i = 0; i < n; i++) DumpDests(ch, fam, l->services[i].key, &l->dests[i]);
}

// One service's destinations as an array; a handle scope per destination (see ListingToJs).
Napi::Array DestsToJs(Names& names, const ipvs::ServiceKey& k, const std::vector<ipvs::Dest>& ds, bool stats) {
  Napi::Array da = Napi::Array::New(names.env, ds.size());
  for (size_t j = 0; j < ds.size(); j++) {
    Napi::HandleScope scope(names.env);
    da.Set(j, DestToJs(names, k, ds[j], stats));
  }
  return da;
}

Napi::Array ListingToJs(Napi::Env env, const Listing& l, const ListOptions& o) {
  Names names(env);
  Napi::Array arr = Napi::Array::New(env, l.services.size());
  for (size_t i = 0; i < l.services.size(); i++) {
    // One handle scope per service: every napi value made here (objects, numbers, strings) is a
    // handle until its scope closes, and live handles are GC roots that every scavenge walks.
    // One scope for the whole listing would hold ~1.5M of them at 10k services x 10 while the
    // scavenges that building 110k objects triggers run. The service stays reachable from `arr`.
    Napi::HandleScope scope(env);
    Napi::Object so = ServiceToJs(names, l.services[i], o.stats);
    if (o.with_dests) so.Set(names.destinations, DestsToJs(names, l.services[i].key, l.dests[i], o.stats));
    arr.Set(i, so);
  }
  return arr;
}

class IpvsHandle : public ChannelHandle<IpvsHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "IpvsHandle",
           {Method<&IpvsHandle::Info>("info"), Method<&IpvsHandle::Apply>("apply"),
            Method<&IpvsHandle::Services>("services"), Method<&IpvsHandle::Service>("service"),
            Method<&IpvsHandle::Destinations>("destinations"),
            Method<&IpvsHandle::DestinationsMany>("destinationsMany"), Method<&IpvsHandle::Timeouts>("timeouts"),
            Method<&IpvsHandle::Daemons>("daemons")});
  }

  explicit IpvsHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_GENERIC) {
    ch_->rcvbuf_bytes = static_cast<int>(UIntOpt(info.Env(), info[0], "rcvbufBytes", INT32_MAX, 0, "open"));
    // dumpSockets: sockets for parallel destination dumps over io_uring (0 = one dump at a
    // time on the handle's socket, as without io_uring).
    ch_->multi_sockets = UIntOpt(info.Env(), info[0], "dumpSockets", 1024, ch_->multi_sockets, "open");
  }

 private:
  friend class ChannelHandle<IpvsHandle>;  // registers Stats

  Napi::Value Info(const Napi::CallbackInfo& info) {
    return OnChannel<ipvs::Info>(info.Env(), [](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          nl::Batch b;
          ipvs::EncodeGetInfo(b, fam.id);
          return *Get(ch, b, "IPVS_CMD_GET_INFO", 0, ipvs::DecodeInfo);
        },
        [](Napi::Env env, ipvs::Info& r) -> Napi::Value {
          Napi::Object o = Napi::Object::New(env);
          o.Set("version", ipvs::FormatVersion(r.version));
          o.Set("versionCode", r.version);
          o.Set("connTableSize", r.conn_table_size);
          return o;
        });
  }

  // apply(ops, { stopOnError?, maxBatchMessages?, ack? }) -> { statuses, errors, sendmsgCalls }
  Napi::Value Apply(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    // The family id is only known after the first worker job resolved it; encode with a
    // placeholder and patch the message types on the worker (the id is the nlmsg_type).
    auto batch = std::make_shared<nl::Batch>();
    auto ops = std::make_shared<std::vector<ipvs::Op>>();
    BuildBatch(env, info[0], 0, batch.get(), ops.get());
    nl::TransactOptions opts = BatchOptions(info[1]);
    const bool ack_each = AckEach(info[1]);
    auto ch = ch_;
    // Batches reach the kernel in the order apply() was called, however many are in flight (the
    // engine converts the next batch while the kernel takes this one). Hence its own job, not
    // OnChannel's: it waits for its turn on the channel's lock (a unique_lock) before its work.
    const uint64_t ticket = ch->TakeTicket();
    try {
      return PromiseWorker<BatchOutcome>::Run(
          env,
          [ch, batch, ops, opts, ack_each, ticket]() {
            std::unique_lock<std::mutex> lock(ch->mu);
            ch->WaitTurn(lock, ticket);
            struct PassTurn {
              Channel* c;
              ~PassTurn() { c->EndTurn(); }
            } pass{ch.get()};
            const nl::GenlFamily& fam = IpvsFamily(*ch);
            batch->Seal();
            for (size_t i = 0; i < batch->size(); i++) {
              nlmsghdr* h = batch->header(i);
              h->nlmsg_type = fam.id;
              if (!ack_each) h->nlmsg_flags &= ~NLM_F_ACK;
            }
            BatchOutcome out;
            out.res = ch->Sock().Transact(*batch, opts);
            // Names only for the ops that get an error (BatchOutcomeToJs reads no others).
            out.op_names.resize(out.res.results.size());
            for (size_t i = 0; i < out.res.results.size(); i++) {
              const nl::RequestResult& r = out.res.results[i];
              if (r.outcome == nl::Outcome::kError || (r.outcome == nl::Outcome::kNoReply && r.status.error)) {
                const ipvs::Op& op = (*ops)[i];
                out.op_names[i] = OpName(op);
                // The kernel answers a scheduler it cannot load (no module, or no such name) with
                // ENOENT, as it answers a missing service: say which one this is.
                if (r.status.error == ENOENT &&
                    (op.kind == ipvs::OpKind::kAddService || op.kind == ipvs::OpKind::kUpdateService)) {
                  out.hints.resize(out.res.results.size());
                  out.hints[i] = "no scheduler '" + op.svc.sched + "' (the kernel module ip_vs_" + op.svc.sched +
                                 " is missing, or the name is wrong)";
                }
              }
            }
            return out;
          },
          [](Napi::Env env, BatchOutcome& r) -> Napi::Value { return BatchOutcomeToJs(env, r); });
    } catch (...) {
      ch->SkipTurn(ticket);  // never queued: the next batch must not wait for it
      throw;
    }
  }

  // services({ withDestinations?, stats? }): one GET_SERVICE dump, then one GET_DEST dump per
  // service (the kernel has no all-destinations dump), all in one worker job.
  Napi::Value Services(const Napi::CallbackInfo& info) {
    const ListOptions o = ListOpts(info[0]);
    return OnChannel<std::shared_ptr<Listing>>(info.Env(), [o, pool = listings_](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          std::shared_ptr<Listing> lp = pool->Take();
          Listing& l = *lp;
          nl::Batch req;
          ipvs::EncodeGetServices(req, fam.id);
          DumpDecoded(ch.Sock(), req, "IPVS_CMD_GET_SERVICE", ipvs::DecodeService,
                      [&](ipvs::Service&& s) { l.services.push_back(std::move(s)); });
          if (o.with_dests) DumpAllDests(ch, fam.id, &l);
          return lp;
        },
        [o](Napi::Env env, std::shared_ptr<Listing>& l) -> Napi::Value {
          Napi::Value r = ListingToJs(env, *l, o);
          l.reset();  // back to the pool now rather than when the worker is deleted
          return r;
        });
  }

  // service(key, { withDestinations?, stats? }) -> Service | null (null when the kernel says ESRCH)
  Napi::Value Service(const Napi::CallbackInfo& info) {
    const ipvs::ServiceKey k = KeyArg(info.Env(), info[0], "service");
    const ListOptions o = ListOpts(info[1]);
    return OnChannel<Listing>(info.Env(), [k, o](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          Listing l;
          nl::Batch b;
          ipvs::EncodeGetService(b, fam.id, k);
          std::optional<ipvs::Service> s =
              Get(ch, b, "IPVS_CMD_GET_SERVICE " + ipvs::DescribeService(k), -1, ipvs::DecodeService, ESRCH);
          if (!s) {
            l.found = false;
            return l;
          }
          l.services.push_back(std::move(*s));
          if (o.with_dests) {
            l.dests.resize(1);
            DumpDests(ch, fam.id, k, &l.dests[0]);
          }
          return l;
        },
        [o](Napi::Env env, Listing& l) -> Napi::Value {
          if (!l.found) return env.Null();
          return ListingToJs(env, l, o).Get(0u);
        });
  }

  // destinations(key, { stats? }) -> Destination[]
  Napi::Value Destinations(const Napi::CallbackInfo& info) {
    const ipvs::ServiceKey k = KeyArg(info.Env(), info[0], "destinations");
    const ListOptions o = ListOpts(info[1]);
    return OnChannel<std::vector<ipvs::Dest>>(info.Env(), [k](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          std::vector<ipvs::Dest> out;
          DumpDests(ch, fam.id, k, &out);
          return out;
        },
        [k, o](Napi::Env env, std::vector<ipvs::Dest>& ds) -> Napi::Value {
          Names names(env);
          return DestsToJs(names, k, ds, o.stats);
        });
  }

  // destinationsMany(keys, { stats? }) -> Destination[][]: each service's destinations, in the
  // order given, the dumps run as services() runs them (io_uring, or one at a time). Storage
  // for just these services, freed after: a caller reading a large table a slice at a time
  // (the engine's full sync) holds one slice's destinations, not the table's.
  Napi::Value DestinationsMany(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Array arr = ArrayArg(env, info[0], "destinationsMany", "expected an array of services");
    auto l = std::make_shared<Listing>();
    l->services.resize(arr.Length());
    for (uint32_t i = 0; i < arr.Length(); i++) l->services[i].key = KeyArg(env, arr.Get(i), "destinationsMany");
    const ListOptions o = ListOpts(info[1]);
    return OnChannel<std::shared_ptr<Listing>>(env, [l](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          DumpAllDests(ch, fam.id, l.get());
          return l;
        },
        [o](Napi::Env env, std::shared_ptr<Listing>& l) -> Napi::Value {
          Names names(env);
          Napi::Array out = Napi::Array::New(env, l->services.size());
          for (size_t i = 0; i < l->services.size(); i++) {
            Napi::HandleScope scope(env);  // bounded handles, as in ListingToJs
            out.Set(i, DestsToJs(names, l->services[i].key, l->dests[i], o.stats));
          }
          l.reset();
          return out;
        });
  }

  // timeouts() -> { tcp, tcpFin, udp }
  Napi::Value Timeouts(const Napi::CallbackInfo& info) {
    return OnChannel<ipvs::Timeouts>(info.Env(), [](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          nl::Batch b;
          ipvs::EncodeGetConfig(b, fam.id);
          return *Get(ch, b, "IPVS_CMD_GET_CONFIG", -1, ipvs::DecodeConfig);
        },
        [](Napi::Env env, ipvs::Timeouts& t) -> Napi::Value { return TimeoutsToJs(env, t); });
  }

  // daemons() -> Daemon[] (master and/or backup)
  Napi::Value Daemons(const Napi::CallbackInfo& info) {
    return OnChannel<std::vector<ipvs::Daemon>>(info.Env(), [](Channel& ch) {
          const nl::GenlFamily& fam = IpvsFamily(ch);
          nl::Batch req;
          ipvs::EncodeGetDaemons(req, fam.id);
          return DumpAll(ch.Sock(), req, "IPVS_CMD_GET_DAEMON", ipvs::DecodeDaemon);
        },
        [](Napi::Env env, std::vector<ipvs::Daemon>& ds) -> Napi::Value {
          return ArrayOf(env, ds, [&](const ipvs::Daemon& d) { return DaemonToJs(env, d); });
        });
  }

  // The socket's counters, plus those of the io_uring dump pool: { ioUring: { state, reason?,
  // enterCalls, sendmsgs, recvmsgs, dumps } } (state 'unused' until a listing needed it).
  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o = SocketStats(env, *ch_).As<Napi::Object>();
    Napi::Object u = Napi::Object::New(env);
    const int st = ch_->multi_state.load();
    u.Set("state", st == Channel::kMultiOn ? "on" : st == Channel::kMultiOff ? "off" : "unused");
    if (st == Channel::kMultiOff) u.Set("reason", ch_->multi_why);
    const nl::MultiDump* m = ch_->multi_opened.load();
    auto get = [&](const std::atomic<uint64_t> nl::MultiDumpStats::*f) {
      return m ? static_cast<double>((m->stats().*f).load()) : 0.0;
    };
    u.Set("enterCalls", get(&nl::MultiDumpStats::enter_calls));
    u.Set("sendmsgs", get(&nl::MultiDumpStats::ring_sendmsgs));
    u.Set("recvmsgs", get(&nl::MultiDumpStats::ring_recvmsgs));
    u.Set("dumps", get(&nl::MultiDumpStats::dumps));
    o.Set("ioUring", u);
    return o;
  }

  std::shared_ptr<ListingPool> listings_ = std::make_shared<ListingPool>();
};

// ---- codec hooks (golden bytes, malformed input, fuzzing) -----------------------------------

uint16_t FamilyIdArg(const Napi::CallbackInfo& info, size_t i) {
  if (!info[i].IsNumber()) ThrowInvalid(info.Env(), "codec", "expected a family id");
  return static_cast<uint16_t>(info[i].As<Napi::Number>().Uint32Value());
}

// A request that takes only the family id (argument 0) as a request batch would send it (seq
// and pid zero): the golden-byte form; Flags NLM_F_DUMP for a dump.
template <void (*Encode)(nl::Batch&, uint16_t), uint16_t Flags = 0>
Napi::Value EncodeByFamilyId(const Napi::CallbackInfo& info) {
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { Encode(b, FamilyIdArg(info, 0)); }, Flags);
}

// encodeOps(packed, familyId, { ack }?): every request apply() would send, back to back; 'each'
// by default here, the form ipvsadm sends.
Napi::Value EncodeOps(const Napi::CallbackInfo& info) {
  nl::Batch b;
  BuildBatch(info.Env(), info[0], FamilyIdArg(info, 1), &b, nullptr);
  b.Seal();
  if (info.Length() > 2 && info[2].IsObject() && !AckEach(info[2]))
    for (size_t i = 0; i < b.size(); i++) b.header(i)->nlmsg_flags &= ~NLM_F_ACK;
  return ToBuffer(info.Env(), b.buffer());
}

// convertOps(packed, familyId) -> bytes: the conversion apply() does on the calling thread (the ops
// read, checked and encoded into a batch in native memory), the batch then dropped; no copy to
// JavaScript. For an in-memory IPVS that should cost the caller what the real handle does.
Napi::Value ConvertOps(const Napi::CallbackInfo& info) {
  nl::Batch b;
  BuildBatch(info.Env(), info[0], FamilyIdArg(info, 1), &b, nullptr);
  b.Seal();
  return Napi::Number::New(info.Env(), static_cast<double>(b.buffer().size()));
}

Napi::Value EncodeGetService(const Napi::CallbackInfo& info) {
  const ipvs::ServiceKey k = KeyArg(info.Env(), info[0], "encodeGetService");
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { ipvs::EncodeGetService(b, FamilyIdArg(info, 1), k); });
}

Napi::Value EncodeGetDests(const Napi::CallbackInfo& info) {
  const ipvs::ServiceKey k = KeyArg(info.Env(), info[0], "encodeGetDests");
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { ipvs::EncodeGetDests(b, FamilyIdArg(info, 1), k); }, NLM_F_DUMP);
}

Napi::Value DecodeInfo(const Napi::CallbackInfo& info) {
  const ipvs::Info out = DecodedArg(info, "decodeInfo", ipvs::DecodeInfo);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("version", ipvs::FormatVersion(out.version));
  o.Set("connTableSize", out.conn_table_size);
  return o;
}

Napi::Value DecodeService(const Napi::CallbackInfo& info) {
  const ipvs::Service s = DecodedArg(info, "decodeService", ipvs::DecodeService);
  Names names(info.Env());
  Napi::Object o = ServiceToJs(names, s, true);
  o.Set("stats64", s.stats64);
  return o;
}

// decodeDest(msg, serviceFamily?): the service's family fills in a missing ADDR_FAMILY.
Napi::Value DecodeDest(const Napi::CallbackInfo& info) {
  const ipvs::Dest d = DecodedArg(info, "decodeDest", ipvs::DecodeDest);
  ipvs::ServiceKey k;
  if (info.Length() > 1 && info[1].IsString() && info[1].As<Napi::String>().Utf8Value() == "inet6")
    k.af = ipvs::kAfInet6;
  Names names(info.Env());
  Napi::Object o = DestToJs(names, k, d, true);
  o.Set("stats64", d.stats64);
  return o;
}

Napi::Value DecodeConfig(const Napi::CallbackInfo& info) {
  return TimeoutsToJs(info.Env(), DecodedArg(info, "decodeConfig", ipvs::DecodeConfig));
}

Napi::Value DecodeDaemon(const Napi::CallbackInfo& info) {
  return DaemonToJs(info.Env(), DecodedArg(info, "decodeDaemon", ipvs::DecodeDaemon));
}

}  // namespace

void InitIpvs(Napi::Env env, Napi::Object exports) {
  IpvsHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "ipvs");
  codec.Set("encodeGetInfo", Function<EncodeByFamilyId<ipvs::EncodeGetInfo>>(env, "encodeGetInfo"));
  codec.Set("encodeOps", Function<EncodeOps>(env, "encodeOps"));
  codec.Set("convertOps", Function<ConvertOps>(env, "convertOps"));
  Napi::Array keys = Napi::Array::New(env, ipvs::kKeyCount);
  for (size_t i = 0; i < ipvs::kKeyCount; i++) keys.Set(static_cast<uint32_t>(i), ipvs::kKeyNames[i]);
  codec.Set("packedKeys", keys);
  codec.Set("encodeGetServices", Function<EncodeByFamilyId<ipvs::EncodeGetServices, NLM_F_DUMP>>(env, "encodeGetServices"));
  codec.Set("encodeGetService", Function<EncodeGetService>(env, "encodeGetService"));
  codec.Set("encodeGetDests", Function<EncodeGetDests>(env, "encodeGetDests"));
  codec.Set("encodeGetConfig", Function<EncodeByFamilyId<ipvs::EncodeGetConfig>>(env, "encodeGetConfig"));
  codec.Set("encodeGetDaemons", Function<EncodeByFamilyId<ipvs::EncodeGetDaemons, NLM_F_DUMP>>(env, "encodeGetDaemons"));
  codec.Set("decodeInfo", Function<DecodeInfo>(env, "decodeInfo"));
  codec.Set("decodeService", Function<DecodeService>(env, "decodeService"));
  codec.Set("decodeDest", Function<DecodeDest>(env, "decodeDest"));
  codec.Set("decodeConfig", Function<DecodeConfig>(env, "decodeConfig"));
  codec.Set("decodeDaemon", Function<DecodeDaemon>(env, "decodeDaemon"));
}

}  // namespace addon
