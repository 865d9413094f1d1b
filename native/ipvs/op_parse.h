// IPVS ops from the JS shape ({ op: 'addDestination', service: {...}, dest: {...} }) to
// ipvs::Op, with every check and error text of the API, over any source of values: ops come in
// their packed form (ipvs/packed.h, what src/kernel/ipvs-pack.ts writes); a service key argument
// of a listing call is read from the JS object itself (addon/ipvs_binding.cc, JsValue).
//
// V is a value of the source, with:
//   IsUndefined() IsNull() IsString() IsNumber() IsArray() IsObject()
//   std::string Text()    a string's value
//   double Num()          a number's value
//   std::string Shown()   the value as JS's String() shows it (error texts)
//   uint32_t Length(); V At(uint32_t i)   an array's length and elements
//   V Get(K key)                          an object's property (undefined when absent)
//   bool Same(const V& o)                 the very same value (a JS object's identity)
#pragma once

#include <linux/ip_vs.h>
#include <netinet/in.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "common/inet.h"
#include "ipvs/codec.h"
#include "ipvs/model.h"

namespace ipvs {

// The properties ParseOp reads. An enumerator's value is the property's key index in the packed
// form (packed.h); kKeyNames[k] is its JS name.
enum class K : uint8_t {
  op,
  service,
  dest,
  timeouts,
  daemon,
  fwmark,
  protocol,
  address,
  port,
  family,
  scheduler,
  flags,
  timeout,
  netmask,
  pe,
  forward,
  weight,
  upperThreshold,
  lowerThreshold,
  tunnel,
  type,
  checksum,
  tcp,
  tcpFin,
  udp,
  state,
  interface,
  syncId,
  syncMaxLen,
  mcastGroup,
  mcastPort,
  mcastTtl,
};
inline constexpr const char* kKeyNames[] = {
    "op",
    "service",
    "dest",
    "timeouts",
    "daemon",
    "fwmark",
    "protocol",
    "address",
    "port",
    "family",
    "scheduler",
    "flags",
    "timeout",
    "netmask",
    "pe",
    "forward",
    "weight",
    "upperThreshold",
    "lowerThreshold",
    "tunnel",
    "type",
    "checksum",
    "tcp",
    "tcpFin",
    "udp",
    "state",
    "interface",
    "syncId",
    "syncMaxLen",
    "mcastGroup",
    "mcastPort",
    "mcastTtl",
};
inline constexpr size_t kKeyCount = sizeof(kKeyNames) / sizeof(kKeyNames[0]);
inline const char* Name(K k) { return kKeyNames[static_cast<size_t>(k)]; }

// The first problem of an op; the caller reports it with the op's index.
struct Problem : std::exception {
  explicit Problem(std::string w) : why(std::move(w)) {}
  std::string why;
};

// The service of the previous destination op, when the next one's is the very same value (a
// plan's destination ops share their service object): its key is not converted again.
template <class V>
struct ServiceMemo {
  bool set = false;
  V service{};
  ServiceKey key{};
};

namespace parse {

template <class V>
bool Has(const V& o, K key) {
  V v = o.Get(key);
  return !v.IsUndefined() && !v.IsNull();
}

template <class V>
std::string Str(const V& o, K key) {
  V v = o.Get(key);
  if (!v.IsString()) throw Problem(std::string(Name(key)) + " must be a string");
  return v.Text();
}

// An integer in [lo, hi].
template <class V>
int64_t Int(const V& o, K key, int64_t lo, int64_t hi) {
  V v = o.Get(key);
  if (!v.IsNumber()) throw Problem(std::string(Name(key)) + " must be a number");
  const double d = v.Num();
  if (!std::isfinite(d) || std::floor(d) != d || d < static_cast<double>(lo) || d > static_cast<double>(hi))
    throw Problem(std::string(Name(key)) + " must be an integer " + std::to_string(lo) + "-" + std::to_string(hi) +
                  ", got " + v.Shown());
  return static_cast<int64_t>(d);
}

template <class V>
uint16_t FamilyOf(const V& o, uint16_t dflt) {
  if (!Has(o, K::family)) return dflt;
  const std::string f = Str(o, K::family);
  if (f == "inet") return kAfInet;
  if (f == "inet6") return kAfInet6;
  throw Problem("family must be 'inet' or 'inet6', got '" + f + "'");
}

inline void Addr(const std::string& text, uint16_t* af, uint8_t out[16], const char* what) {
  inet::Addr a;
  if (!inet::Parse(text, &a)) throw Problem(std::string("invalid ") + what + " '" + text + "'");
  *af = a.family == inet::kV4 ? kAfInet : kAfInet6;
  std::memcpy(out, a.bytes, 16);
}

template <class V>
V Obj(const V& v, const char* what) {
  if (!v.IsObject()) throw Problem(std::string(what) + " must be an object");
  return v;
}

template <class V>
void ServiceKeyOf(const V& o, ServiceKey* k) {
  *k = ServiceKey{};
  if (Has(o, K::fwmark)) {
    if (Has(o, K::address) || Has(o, K::protocol))
      throw Problem("a service is identified by fwmark or by protocol/address/port, not both");
    k->fwmark = static_cast<uint32_t>(Int(o, K::fwmark, 1, 0xffffffffLL));
    k->af = FamilyOf(o, kAfInet);
    return;
  }
  if (!Has(o, K::protocol)) throw Problem("a service needs protocol, address and port, or a fwmark");
  const std::string p = Str(o, K::protocol);
  if (p == "tcp") k->protocol = IPPROTO_TCP;
  else if (p == "udp") k->protocol = IPPROTO_UDP;
  else if (p == "sctp") k->protocol = IPPROTO_SCTP;
  else throw Problem("protocol must be tcp, udp or sctp, got '" + p + "'");
  Addr(Str(o, K::address), &k->af, k->addr, "service address");
  const uint16_t fam = FamilyOf(o, k->af);
  if (fam != k->af) throw Problem("family does not match the service address");
  k->port = static_cast<uint16_t>(Int(o, K::port, 0, 65535));
}

struct FlagName {
  const char* name;
  uint32_t bit;
  const char* sched;  // only valid with this scheduler (nullptr: any)
};
constexpr FlagName kFlags[] = {
    {"persistent", kFlagPersistent, nullptr}, {"one-packet", kFlagOnePacket, nullptr},
    {"sh-fallback", kFlagSched1, "sh"},       {"sh-port", kFlagSched2, "sh"},
    {"mh-fallback", kFlagSched1, "mh"},       {"mh-port", kFlagSched2, "mh"},
    {"flag-1", kFlagSched1, nullptr},         {"flag-2", kFlagSched2, nullptr},
    {"flag-3", kFlagSched3, nullptr},
};

template <class V>
void ServiceOf(const V& o, Service* s) {
  ServiceKeyOf(o, &s->key);
  s->sched = Has(o, K::scheduler) ? Str(o, K::scheduler) : "wlc";
  if (s->sched.empty() || s->sched.size() > IP_VS_SCHEDNAME_MAXLEN - 1)
    throw Problem("scheduler name must be 1-15 characters, got '" + s->sched + "'");
  s->flags = 0;
  if (Has(o, K::flags)) {
    V fa = o.Get(K::flags);
    if (!fa.IsArray()) throw Problem("flags must be an array of flag names");
    for (uint32_t i = 0; i < fa.Length(); i++) {
      V e = fa.At(i);
      if (!e.IsString()) throw Problem("flags must be an array of flag names");
      const std::string name = e.Text();
      const FlagName* hit = nullptr;
      for (const FlagName& f : kFlags)
        if (name == f.name) hit = &f;
      if (!hit) throw Problem("unknown service flag '" + name + "'");
      if (hit->sched && s->sched != hit->sched)
        throw Problem("flag '" + name + "' needs the " + hit->sched + " scheduler, not " + s->sched);
      s->flags |= hit->bit;
    }
  }
  // ipvsadm 1.31's -p without a value means 360 s.
  const bool persistent = (s->flags & kFlagPersistent) != 0;
  s->timeout = Has(o, K::timeout) ? static_cast<uint32_t>(Int(o, K::timeout, 0, 0xffffffffLL)) : (persistent ? 360 : 0);
  if (s->key.af == kAfInet) {
    s->netmask = 0xffffffff;
    if (Has(o, K::netmask)) {
      V nv = o.Get(K::netmask);
      if (!nv.IsString()) throw Problem("an IPv4 service's netmask is a dotted mask string like '255.255.255.0'");
      inet::Addr m;
      const std::string text = nv.Text();
      if (!inet::Parse(text, &m) || m.family != inet::kV4) throw Problem("invalid IPv4 netmask '" + text + "'");
      std::memcpy(&s->netmask, m.bytes, 4);
    }
  } else {
    s->netmask = 128;
    if (Has(o, K::netmask)) s->netmask = static_cast<uint32_t>(Int(o, K::netmask, 1, 128));
  }
  s->pe.clear();
  if (Has(o, K::pe)) {
    s->pe = Str(o, K::pe);
    if (s->pe.empty() || s->pe.size() > IP_VS_PENAME_MAXLEN - 1)
      throw Problem("persistence engine name must be 1-15 characters");
  }
}

template <class V>
void DestOf(const V& o, bool full, Dest* d) {
  *d = Dest{};
  Addr(Str(o, K::address), &d->af, d->addr, "destination address");
  if (FamilyOf(o, d->af) != d->af) throw Problem("family does not match the destination address");
  d->port = static_cast<uint16_t>(Int(o, K::port, 0, 65535));
  if (!full) return;
  d->fwd = kDroute;
  if (Has(o, K::forward)) {
    const std::string f = Str(o, K::forward);
    if (f == "masq") d->fwd = kMasq;
    else if (f == "local") d->fwd = kLocal;
    else if (f == "tunnel") d->fwd = kTunnel;
    else if (f == "droute") d->fwd = kDroute;
    else throw Problem("forward must be masq, local, tunnel or droute, got '" + f + "'");
  }
  if (Has(o, K::weight)) {
    V wv = o.Get(K::weight);
    if (!wv.IsNumber()) throw Problem("weight must be a number");
    const double w = wv.Num();
    if (!std::isfinite(w) || std::floor(w) != w || w < 0 || w > 2147483647.0)
      throw Problem("weight must be an integer 0-2147483647, got " + wv.Shown());
    d->weight = static_cast<int64_t>(w);
  }
  if (Has(o, K::upperThreshold)) d->u_thresh = static_cast<uint32_t>(Int(o, K::upperThreshold, 0, 0xffffffffLL));
  if (Has(o, K::lowerThreshold)) d->l_thresh = static_cast<uint32_t>(Int(o, K::lowerThreshold, 0, 0xffffffffLL));
  if (Has(o, K::tunnel)) {
    V t = Obj(o.Get(K::tunnel), "tunnel");
    const std::string type = Has(t, K::type) ? Str(t, K::type) : "ipip";
    if (type == "ipip") d->tun_type = kIpip;
    else if (type == "gue") d->tun_type = kGue;
    else if (type == "gre") d->tun_type = kGre;
    else throw Problem("tunnel type must be ipip, gue or gre, got '" + type + "'");
    if (Has(t, K::port)) d->tun_port = static_cast<uint16_t>(Int(t, K::port, 1, 65535));
    if (Has(t, K::checksum)) {
      const std::string c = Str(t, K::checksum);
      if (c == "none") d->tun_flags = 0;
      else if (c == "csum") d->tun_flags = kTunCsum;
      else if (c == "remcsum") d->tun_flags = kTunRemCsum;
      else throw Problem("tunnel checksum must be none, csum or remcsum, got '" + c + "'");
    }
  }
}

}  // namespace parse

// One op, checked (ipvs::Validate included). Throws Problem.
template <class V>
Op ParseOp(const V& v, ServiceMemo<V>* memo) {
  using namespace parse;
  V o = Obj(v, "op");
  Op op;
  const std::string kind = Has(o, K::op) ? Str(o, K::op) : "";
  if (kind == "addService" || kind == "updateService") {
    op.kind = kind == "addService" ? OpKind::kAddService : OpKind::kUpdateService;
    ServiceOf(Obj(o.Get(K::service), "service"), &op.svc);
  } else if (kind == "deleteService") {
    op.kind = OpKind::kDeleteService;
    ServiceKeyOf(Obj(o.Get(K::service), "service"), &op.svc.key);
  } else if (kind == "addDestination" || kind == "updateDestination" || kind == "deleteDestination") {
    op.kind = kind == "addDestination"      ? OpKind::kAddDest
              : kind == "updateDestination" ? OpKind::kUpdateDest
                                            : OpKind::kDeleteDest;
    V sv = o.Get(K::service);
    if (memo != nullptr && memo->set && memo->service.Same(sv)) {
      op.svc.key = memo->key;
    } else {
      ServiceKeyOf(Obj(sv, "service"), &op.svc.key);
      if (memo != nullptr) {
        memo->set = true;
        memo->service = sv;
        memo->key = op.svc.key;
      }
    }
    DestOf(Obj(o.Get(K::dest), "dest"), op.kind != OpKind::kDeleteDest, &op.dest);
  } else if (kind == "flush") {
    op.kind = OpKind::kFlush;
  } else if (kind == "zero") {
    op.kind = OpKind::kZero;
    op.has_service = Has(o, K::service);
    if (op.has_service) ServiceKeyOf(Obj(o.Get(K::service), "service"), &op.svc.key);
  } else if (kind == "setTimeouts") {
    op.kind = OpKind::kSetTimeouts;
    V t = Obj(o.Get(K::timeouts), "timeouts");
    if (Has(t, K::tcp)) op.timeouts.tcp = static_cast<uint32_t>(Int(t, K::tcp, 0, 0x7fffffffLL));
    if (Has(t, K::tcpFin)) op.timeouts.tcp_fin = static_cast<uint32_t>(Int(t, K::tcpFin, 0, 0x7fffffffLL));
    if (Has(t, K::udp)) op.timeouts.udp = static_cast<uint32_t>(Int(t, K::udp, 0, 0x7fffffffLL));
  } else if (kind == "startDaemon" || kind == "stopDaemon") {
    op.kind = kind == "startDaemon" ? OpKind::kStartDaemon : OpKind::kStopDaemon;
    V d = Obj(o.Get(K::daemon), "daemon");
    const std::string state = Str(d, K::state);
    if (state == "master") op.daemon.state = kStateMaster;
    else if (state == "backup") op.daemon.state = kStateBackup;
    else throw Problem("daemon state must be master or backup, got '" + state + "'");
    if (op.kind == OpKind::kStartDaemon) {
      op.daemon.mcast_ifn = Str(d, K::interface);
      if (Has(d, K::syncId)) op.daemon.sync_id = static_cast<uint32_t>(Int(d, K::syncId, 0, 255));
      if (Has(d, K::syncMaxLen)) op.daemon.sync_maxlen = static_cast<uint16_t>(Int(d, K::syncMaxLen, 1, 65535));
      if (Has(d, K::mcastGroup)) {
        Addr(Str(d, K::mcastGroup), &op.daemon.mcast_af, op.daemon.mcast_group, "multicast group");
        const bool mc = op.daemon.mcast_af == kAfInet ? (op.daemon.mcast_group[0] & 0xf0) == 0xe0
                                                      : op.daemon.mcast_group[0] == 0xff;
        if (!mc) throw Problem("mcastGroup must be a multicast address");
      }
      if (Has(d, K::mcastPort)) op.daemon.mcast_port = static_cast<uint16_t>(Int(d, K::mcastPort, 1, 65535));
      if (Has(d, K::mcastTtl)) op.daemon.mcast_ttl = static_cast<uint8_t>(Int(d, K::mcastTtl, 1, 255));
    }
  } else {
    throw Problem("unknown op '" + kind + "'");
  }
  std::string why;
  if (!Validate(op, &why)) throw Problem(why);
  return op;
}

// The name an op's error carries: its `op` string, else "apply".
template <class V>
std::string OpNameOf(const V& v) {
  if (!v.IsObject()) return "apply";
  V k = v.Get(K::op);
  return k.IsString() ? k.Text() : "apply";
}

}  // namespace ipvs
