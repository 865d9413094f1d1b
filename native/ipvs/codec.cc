#include "ipvs/codec.h"

#include <linux/genetlink.h>
#include <linux/ip_vs.h>
#include <netinet/in.h>

#include <cstring>
#include <utility>

#include "common/inet.h"

namespace ipvs {

namespace {

constexpr uint16_t kReq = NLM_F_REQUEST | NLM_F_ACK;

bool IsV4(uint16_t af) { return af == kAfInet; }

void PutServiceKey(nl::AttrWriter&& w, const ServiceKey& k) {
  w.U16(IPVS_SVC_ATTR_AF, k.af);
  if (k.fwmark) {
    w.U32(IPVS_SVC_ATTR_FWMARK, k.fwmark);
  } else {
    w.U16(IPVS_SVC_ATTR_PROTOCOL, k.protocol);
    w.Put(IPVS_SVC_ATTR_ADDR, k.addr, sizeof k.addr);
    w.Be16(IPVS_SVC_ATTR_PORT, k.port);
  }
}

// IPVS_CMD_ATTR_SERVICE. `full` adds what NEW/SET require (scheduler, flags, timeout, netmask).
void PutService(nl::AttrWriter&& w, const Service& s, bool full) {
  const size_t nest = w.Begin(IPVS_CMD_ATTR_SERVICE | nl::kNested);
  PutServiceKey(std::move(w), s.key);
  if (full) {
    w.Str(IPVS_SVC_ATTR_SCHED_NAME, s.sched);
    if (!s.pe.empty()) w.Str(IPVS_SVC_ATTR_PE_NAME, s.pe);
    ip_vs_flags f{s.flags & ~kFlagHashed, 0xffffffffu};
    w.Put(IPVS_SVC_ATTR_FLAGS, &f, sizeof f);
    w.U32(IPVS_SVC_ATTR_TIMEOUT, s.timeout);
    w.U32(IPVS_SVC_ATTR_NETMASK, s.netmask);
  }
  w.End(nest);
}

uint16_t DestAf(const ServiceKey& k, const Dest& d) { return d.af ? d.af : k.af; }

void PutDest(nl::AttrWriter&& w, const ServiceKey& k, const Dest& d, bool full) {
  const size_t nest = w.Begin(IPVS_CMD_ATTR_DEST | nl::kNested);
  w.U16(IPVS_DEST_ATTR_ADDR_FAMILY, DestAf(k, d));
  w.Put(IPVS_DEST_ATTR_ADDR, d.addr, sizeof d.addr);
  w.Be16(IPVS_DEST_ATTR_PORT, d.port);
  if (full) {
    w.U32(IPVS_DEST_ATTR_FWD_METHOD, d.fwd);
    w.U32(IPVS_DEST_ATTR_WEIGHT, static_cast<uint32_t>(d.weight));
    w.U8(IPVS_DEST_ATTR_TUN_TYPE, d.tun_type);
    w.Be16(IPVS_DEST_ATTR_TUN_PORT, d.tun_port);
    w.U16(IPVS_DEST_ATTR_TUN_FLAGS, d.tun_flags);
    w.U32(IPVS_DEST_ATTR_U_THRESH, d.u_thresh);
    w.U32(IPVS_DEST_ATTR_L_THRESH, d.l_thresh);
  }
  w.End(nest);
}

void Begin(nl::Batch& b, uint16_t family_id, uint8_t cmd) {
  b.Begin(family_id, kReq);
  b.GenlHeader(cmd, IPVS_GENL_VERSION);
}

// A GET naming one service by its key.
void GetForService(nl::Batch& b, uint16_t family_id, uint8_t cmd, const ServiceKey& k) {
  Begin(b, family_id, cmd);
  Service s;
  s.key = k;
  PutService(b.Attrs(), s, false);
}

uint64_t Num(nl::AttrReader& r) {
  // 32-bit STATS carry most counters as u32, STATS64 everything as u64: accept either width.
  if (r.len() == 8) return r.U64();
  return r.U32();
}

void ReadStats(nl::AttrReader r, Stats* s) {
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_STATS_ATTR_CONNS: s->conns = Num(r); break;
      case IPVS_STATS_ATTR_INPKTS: s->inpkts = Num(r); break;
      case IPVS_STATS_ATTR_OUTPKTS: s->outpkts = Num(r); break;
      case IPVS_STATS_ATTR_INBYTES: s->inbytes = Num(r); break;
      case IPVS_STATS_ATTR_OUTBYTES: s->outbytes = Num(r); break;
      case IPVS_STATS_ATTR_CPS: s->cps = Num(r); break;
      case IPVS_STATS_ATTR_INPPS: s->inpps = Num(r); break;
      case IPVS_STATS_ATTR_OUTPPS: s->outpps = Num(r); break;
      case IPVS_STATS_ATTR_INBPS: s->inbps = Num(r); break;
      case IPVS_STATS_ATTR_OUTBPS: s->outbps = Num(r); break;
      default: break;
    }
  }
}

// A service's or destination's counters: 32-bit STATS, STATS64 or both (the 64-bit ones win).
struct StatsAttrs {
  Stats s32, s64;
  bool have32 = false, have64 = false;

  void Read32(nl::AttrReader nest) {
    ReadStats(nest, &s32);
    have32 = true;
  }
  void Read64(nl::AttrReader nest) {
    ReadStats(nest, &s64);
    have64 = true;
  }
  template <class T>
  void Into(T* out) const {
    if (!have32 && !have64) return;
    out->stats = have64 ? s64 : s32;
    if (have64) out->stats64 = true;
    out->have_stats = true;
  }
};

// Finds the top-level nest `type` of a reply and returns a reader over it.
bool TopNest(const nlmsghdr* h, uint16_t type, nl::AttrReader* out, std::string* why, const char* what) {
  nl::AttrReader r = nl::Attributes(h, GENL_HDRLEN);
  bool found = false;
  while (r.Next()) {
    if (r.type() == type && !found) {
      *out = r.Nested();
      found = true;
    }
  }
  if (!r.ok(why)) return false;
  if (!found) return nl::Refuse(why, std::string("no ") + what + " attribute");
  return true;
}

bool ValidName(const std::string& s) { return !s.empty() && s.size() < IP_VS_SCHEDNAME_MAXLEN; }

bool ValidateKey(const ServiceKey& k, std::string* why) {
  if (k.af != kAfInet && k.af != kAfInet6) return nl::Refuse(why, "address family must be inet or inet6");
  if (k.fwmark == 0 && k.protocol != IPPROTO_TCP && k.protocol != IPPROTO_UDP && k.protocol != IPPROTO_SCTP)
    return nl::Refuse(why, "protocol must be tcp, udp or sctp (or give a non-zero fwmark)");
  return true;
}

bool ValidateService(const Service& s, std::string* why) {
  if (!ValidateKey(s.key, why)) return false;
  if (!ValidName(s.sched)) return nl::Refuse(why, "scheduler name must be 1-15 characters, got '" + s.sched + "'");
  if (!s.pe.empty() && s.pe.size() >= IP_VS_PENAME_MAXLEN)
    return nl::Refuse(why, "persistence engine name must be at most 15 characters");
  if (s.key.af == kAfInet6 && (s.netmask < 1 || s.netmask > 128))
    return nl::Refuse(why, "IPv6 netmask must be a prefix length 1-128, got " + std::to_string(s.netmask));
  return true;
}

bool ValidateDest(const ServiceKey& k, const Dest& d, bool full, std::string* why) {
  const uint16_t af = DestAf(k, d);
  if (af != kAfInet && af != kAfInet6) return nl::Refuse(why, "destination address family must be inet or inet6");
  if (!full) return true;
  if (af != k.af && d.fwd != kTunnel)
    return nl::Refuse(why, "mixed address families: an " + std::string(IsV4(af) ? "IPv4" : "IPv6") +
                               " destination in an " + (IsV4(k.af) ? "IPv4" : "IPv6") +
                               " service needs the tunnel forwarding method");
  if (d.fwd > kDroute) return nl::Refuse(why, "unknown forwarding method");
  if (d.weight < 0 || d.weight > 0x7fffffff)
    return nl::Refuse(why, "weight must be 0-2147483647, got " + std::to_string(d.weight));
  const bool tun_attrs = d.tun_type != kIpip || d.tun_port != 0 || d.tun_flags != 0;
  if (d.fwd != kTunnel && tun_attrs)
    return nl::Refuse(why, "tunnel type, port and checksum options need the tunnel forwarding method");
  if (d.tun_type > kGre) return nl::Refuse(why, "tunnel type must be ipip, gue or gre");
  if (d.tun_flags & ~(kTunCsum | kTunRemCsum)) return nl::Refuse(why, "unknown tunnel flags");
  if (d.tun_type == kGue && d.tun_port == 0) return nl::Refuse(why, "a gue tunnel needs a tunnel port (1-65535)");
  if (d.tun_type != kGue && d.tun_port != 0) return nl::Refuse(why, "only gue tunnels take a tunnel port");
  if (d.tun_type == kIpip && d.tun_flags != 0) return nl::Refuse(why, "ipip tunnels take no checksum option");
  if (d.tun_type == kGre && (d.tun_flags & kTunRemCsum))
    return nl::Refuse(why, "gre tunnels do not support remote checksum offload");
  if ((d.tun_flags & kTunCsum) && (d.tun_flags & kTunRemCsum)) return nl::Refuse(why, "choose one of csum and remcsum");
  return true;
}

std::string AddrPort(uint16_t af, const uint8_t* addr, uint16_t port) {
  const std::string a = inet::Format(IsV4(af) ? inet::kV4 : inet::kV6, addr);
  return IsV4(af) ? a + ":" + std::to_string(port) : "[" + a + "]:" + std::to_string(port);
}

}  // namespace

void EncodeGetInfo(nl::Batch& b, uint16_t family_id) { Begin(b, family_id, IPVS_CMD_GET_INFO); }

bool DecodeInfo(const nlmsghdr* h, Info* out, std::string* why) {
  nl::AttrReader r = nl::Attributes(h, GENL_HDRLEN);
  bool have_version = false;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_INFO_ATTR_VERSION: nl::Store(&out->version, r.U32(), &have_version); break;
      case IPVS_INFO_ATTR_CONN_TAB_SIZE: out->conn_table_size = r.U32(); break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!have_version) return nl::Refuse(why, "no IPVS_INFO_ATTR_VERSION");
  return true;
}

std::string FormatVersion(uint32_t v) {
  return std::to_string((v >> 16) & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

bool Validate(const Op& op, std::string* why) {
  switch (op.kind) {
    case OpKind::kAddService:
    case OpKind::kUpdateService: return ValidateService(op.svc, why);
    case OpKind::kDeleteService: return ValidateKey(op.svc.key, why);
    case OpKind::kAddDest:
    case OpKind::kUpdateDest:
      return ValidateKey(op.svc.key, why) && ValidateDest(op.svc.key, op.dest, true, why);
    case OpKind::kDeleteDest:
      return ValidateKey(op.svc.key, why) && ValidateDest(op.svc.key, op.dest, false, why);
    case OpKind::kZero: return !op.has_service || ValidateKey(op.svc.key, why);
    case OpKind::kFlush:
    case OpKind::kSetTimeouts: return true;
    case OpKind::kStartDaemon:
      if (op.daemon.state != kStateMaster && op.daemon.state != kStateBackup)
        return nl::Refuse(why, "daemon state must be master or backup");
      if (op.daemon.mcast_ifn.empty() || op.daemon.mcast_ifn.size() >= IP_VS_IFNAME_MAXLEN)
        return nl::Refuse(why, "multicast interface name must be 1-15 characters");
      return true;
    case OpKind::kStopDaemon:
      if (op.daemon.state != kStateMaster && op.daemon.state != kStateBackup)
        return nl::Refuse(why, "daemon state must be master or backup");
      return true;
  }
  return nl::Refuse(why, "unknown op");
}

const char* CommandName(OpKind k) {
  switch (k) {
    case OpKind::kAddService: return "IPVS_CMD_NEW_SERVICE";
    case OpKind::kUpdateService: return "IPVS_CMD_SET_SERVICE";
    case OpKind::kDeleteService: return "IPVS_CMD_DEL_SERVICE";
    case OpKind::kAddDest: return "IPVS_CMD_NEW_DEST";
    case OpKind::kUpdateDest: return "IPVS_CMD_SET_DEST";
    case OpKind::kDeleteDest: return "IPVS_CMD_DEL_DEST";
    case OpKind::kFlush: return "IPVS_CMD_FLUSH";
    case OpKind::kZero: return "IPVS_CMD_ZERO";
    case OpKind::kSetTimeouts: return "IPVS_CMD_SET_CONFIG";
    case OpKind::kStartDaemon: return "IPVS_CMD_NEW_DAEMON";
    case OpKind::kStopDaemon: return "IPVS_CMD_DEL_DAEMON";
  }
  return "IPVS_CMD_UNSPEC";
}

std::string DescribeService(const ServiceKey& k) {
  if (k.fwmark) return "fwmark " + std::to_string(k.fwmark) + (IsV4(k.af) ? "" : " (inet6)");
  const char* proto = k.protocol == IPPROTO_TCP ? "tcp" : k.protocol == IPPROTO_UDP ? "udp" : "sctp";
  return std::string(proto) + " " + AddrPort(k.af, k.addr, k.port);
}

std::string DescribeDest(const ServiceKey& k, const Dest& d) {
  return DescribeService(k) + " -> " + AddrPort(DestAf(k, d), d.addr, d.port);
}

void EncodeOp(nl::Batch& b, uint16_t family_id, const Op& op) {
  switch (op.kind) {
    case OpKind::kAddService:
      Begin(b, family_id, IPVS_CMD_NEW_SERVICE);
      PutService(b.Attrs(), op.svc, true);
      break;
    case OpKind::kUpdateService:
      Begin(b, family_id, IPVS_CMD_SET_SERVICE);
      PutService(b.Attrs(), op.svc, true);
      break;
    case OpKind::kDeleteService:
      Begin(b, family_id, IPVS_CMD_DEL_SERVICE);
      PutService(b.Attrs(), op.svc, false);
      break;
    case OpKind::kAddDest:
    case OpKind::kUpdateDest:
    case OpKind::kDeleteDest: {
      const uint8_t cmd = op.kind == OpKind::kAddDest    ? IPVS_CMD_NEW_DEST
                          : op.kind == OpKind::kUpdateDest ? IPVS_CMD_SET_DEST
                                                           : IPVS_CMD_DEL_DEST;
      Begin(b, family_id, cmd);
      PutService(b.Attrs(), op.svc, false);
      PutDest(b.Attrs(), op.svc.key, op.dest, op.kind != OpKind::kDeleteDest);
      break;
    }
    case OpKind::kFlush: Begin(b, family_id, IPVS_CMD_FLUSH); break;
    case OpKind::kZero:
      Begin(b, family_id, IPVS_CMD_ZERO);
      if (op.has_service) PutService(b.Attrs(), op.svc, false);
      break;
    case OpKind::kSetTimeouts: {
      Begin(b, family_id, IPVS_CMD_SET_CONFIG);
      nl::AttrWriter w = b.Attrs();
      // The kernel leaves a timeout unchanged when its attribute is absent or 0.
      if (op.timeouts.tcp) w.U32(IPVS_CMD_ATTR_TIMEOUT_TCP, op.timeouts.tcp);
      if (op.timeouts.tcp_fin) w.U32(IPVS_CMD_ATTR_TIMEOUT_TCP_FIN, op.timeouts.tcp_fin);
      if (op.timeouts.udp) w.U32(IPVS_CMD_ATTR_TIMEOUT_UDP, op.timeouts.udp);
      break;
    }
    case OpKind::kStartDaemon: {
      Begin(b, family_id, IPVS_CMD_NEW_DAEMON);
      nl::AttrWriter w = b.Attrs();
      const Daemon& d = op.daemon;
      const size_t nest = w.Begin(IPVS_CMD_ATTR_DAEMON | nl::kNested);
      w.U32(IPVS_DAEMON_ATTR_STATE, d.state);
      w.Str(IPVS_DAEMON_ATTR_MCAST_IFN, d.mcast_ifn);
      w.U32(IPVS_DAEMON_ATTR_SYNC_ID, d.sync_id);
      if (d.sync_maxlen) w.U16(IPVS_DAEMON_ATTR_SYNC_MAXLEN, d.sync_maxlen);
      if (d.mcast_port) w.U16(IPVS_DAEMON_ATTR_MCAST_PORT, d.mcast_port);
      if (d.mcast_ttl) w.U8(IPVS_DAEMON_ATTR_MCAST_TTL, d.mcast_ttl);
      if (d.mcast_af == kAfInet) w.Put(IPVS_DAEMON_ATTR_MCAST_GROUP, d.mcast_group, 4);
      if (d.mcast_af == kAfInet6) w.Put(IPVS_DAEMON_ATTR_MCAST_GROUP6, d.mcast_group, 16);
      w.End(nest);
      break;
    }
    case OpKind::kStopDaemon: {
      Begin(b, family_id, IPVS_CMD_DEL_DAEMON);
      nl::AttrWriter w = b.Attrs();
      const size_t nest = w.Begin(IPVS_CMD_ATTR_DAEMON | nl::kNested);
      w.U32(IPVS_DAEMON_ATTR_STATE, op.daemon.state);
      w.End(nest);
      break;
    }
  }
}

void EncodeGetServices(nl::Batch& b, uint16_t family_id) { Begin(b, family_id, IPVS_CMD_GET_SERVICE); }

void EncodeGetService(nl::Batch& b, uint16_t family_id, const ServiceKey& k) {
  GetForService(b, family_id, IPVS_CMD_GET_SERVICE, k);
}

void EncodeGetDests(nl::Batch& b, uint16_t family_id, const ServiceKey& k) {
  GetForService(b, family_id, IPVS_CMD_GET_DEST, k);
}

void EncodeGetConfig(nl::Batch& b, uint16_t family_id) { Begin(b, family_id, IPVS_CMD_GET_CONFIG); }

void EncodeGetDaemons(nl::Batch& b, uint16_t family_id) { Begin(b, family_id, IPVS_CMD_GET_DAEMON); }

bool DecodeService(const nlmsghdr* h, Service* out, std::string* why) {
  nl::AttrReader r(nullptr, 0);
  if (!TopNest(h, IPVS_CMD_ATTR_SERVICE, &r, why, "IPVS_CMD_ATTR_SERVICE")) return false;
  *out = Service{};
  out->netmask = 0;
  bool have_af = false, have_sched = false;
  bool have_proto = false, have_addr = false, have_port = false;
  StatsAttrs stats;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_SVC_ATTR_AF: nl::Store(&out->key.af, r.U16(), &have_af); break;
      case IPVS_SVC_ATTR_PROTOCOL: nl::Store(&out->key.protocol, r.U16(), &have_proto); break;
      case IPVS_SVC_ATTR_ADDR:
        r.AtMost(out->key.addr, sizeof out->key.addr);
        have_addr = true;
        break;
      case IPVS_SVC_ATTR_PORT: nl::Store(&out->key.port, r.Be16(), &have_port); break;
      case IPVS_SVC_ATTR_FWMARK: out->key.fwmark = r.U32(); break;
      case IPVS_SVC_ATTR_SCHED_NAME: nl::Store(&out->sched, r.Str(), &have_sched); break;
      case IPVS_SVC_ATTR_PE_NAME: out->pe = r.Str(); break;
      case IPVS_SVC_ATTR_FLAGS: {
        ip_vs_flags f{};
        if (r.Fixed(&f, sizeof f)) out->flags = f.flags & f.mask;
        break;
      }
      case IPVS_SVC_ATTR_TIMEOUT: out->timeout = r.U32(); break;
      case IPVS_SVC_ATTR_NETMASK: out->netmask = r.U32(); break;
      case IPVS_SVC_ATTR_STATS: stats.Read32(r.Nested()); break;
      case IPVS_SVC_ATTR_STATS64: stats.Read64(r.Nested()); break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!have_af || (out->key.af != kAfInet && out->key.af != kAfInet6))
    return nl::Refuse(why, "service without a valid IPVS_SVC_ATTR_AF");
  if (out->key.fwmark == 0 && !(have_proto && have_addr && have_port))
    return nl::Refuse(why, "service has neither a fwmark nor protocol, address and port");
  if (!have_sched) return nl::Refuse(why, "service without IPVS_SVC_ATTR_SCHED_NAME");
  stats.Into(out);
  return true;
}

bool DecodeDest(const nlmsghdr* h, Dest* out, std::string* why) {
  nl::AttrReader r(nullptr, 0);
  if (!TopNest(h, IPVS_CMD_ATTR_DEST, &r, why, "IPVS_CMD_ATTR_DEST")) return false;
  *out = Dest{};
  bool have_addr = false, have_port = false;
  StatsAttrs stats;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_DEST_ATTR_ADDR:
        r.AtMost(out->addr, sizeof out->addr);
        have_addr = true;
        break;
      case IPVS_DEST_ATTR_PORT: nl::Store(&out->port, r.Be16(), &have_port); break;
      case IPVS_DEST_ATTR_FWD_METHOD: out->fwd = r.U32() & IP_VS_CONN_F_FWD_MASK; break;
      case IPVS_DEST_ATTR_WEIGHT: out->weight = static_cast<int32_t>(r.U32()); break;
      case IPVS_DEST_ATTR_U_THRESH: out->u_thresh = r.U32(); break;
      case IPVS_DEST_ATTR_L_THRESH: out->l_thresh = r.U32(); break;
      case IPVS_DEST_ATTR_ACTIVE_CONNS: out->active_conns = r.U32(); break;
      case IPVS_DEST_ATTR_INACT_CONNS: out->inact_conns = r.U32(); break;
      case IPVS_DEST_ATTR_PERSIST_CONNS: out->persist_conns = r.U32(); break;
      case IPVS_DEST_ATTR_ADDR_FAMILY: out->af = r.U16(); break;
      case IPVS_DEST_ATTR_TUN_TYPE: nl::Store(&out->tun_type, r.U8(), &out->have_tun); break;
      case IPVS_DEST_ATTR_TUN_PORT: out->tun_port = r.Be16(); break;
      case IPVS_DEST_ATTR_TUN_FLAGS: out->tun_flags = r.U16(); break;
      case IPVS_DEST_ATTR_STATS: stats.Read32(r.Nested()); break;
      case IPVS_DEST_ATTR_STATS64: stats.Read64(r.Nested()); break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!have_addr || !have_port) return nl::Refuse(why, "destination without address or port");
  if (out->af != 0 && out->af != kAfInet && out->af != kAfInet6)
    return nl::Refuse(why, "destination with an unknown address family " + std::to_string(out->af));
  stats.Into(out);
  return true;
}

bool DecodeConfig(const nlmsghdr* h, Timeouts* out, std::string* why) {
  nl::AttrReader r = nl::Attributes(h, GENL_HDRLEN);
  *out = Timeouts{};
  int seen = 0;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_CMD_ATTR_TIMEOUT_TCP: out->tcp = r.U32(); seen++; break;
      case IPVS_CMD_ATTR_TIMEOUT_TCP_FIN: out->tcp_fin = r.U32(); seen++; break;
      case IPVS_CMD_ATTR_TIMEOUT_UDP: out->udp = r.U32(); seen++; break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (seen == 0) return nl::Refuse(why, "no timeout attributes");
  return true;
}

bool DecodeDaemon(const nlmsghdr* h, Daemon* out, std::string* why) {
  nl::AttrReader r(nullptr, 0);
  if (!TopNest(h, IPVS_CMD_ATTR_DAEMON, &r, why, "IPVS_CMD_ATTR_DAEMON")) return false;
  *out = Daemon{};
  bool have_state = false;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_DAEMON_ATTR_STATE: nl::Store(&out->state, r.U32(), &have_state); break;
      case IPVS_DAEMON_ATTR_MCAST_IFN: out->mcast_ifn = r.Str(); break;
      case IPVS_DAEMON_ATTR_SYNC_ID: out->sync_id = r.U32(); break;
      case IPVS_DAEMON_ATTR_SYNC_MAXLEN: out->sync_maxlen = r.U16(); break;
      case IPVS_DAEMON_ATTR_MCAST_PORT: out->mcast_port = r.U16(); break;
      case IPVS_DAEMON_ATTR_MCAST_TTL: out->mcast_ttl = r.U8(); break;
      case IPVS_DAEMON_ATTR_MCAST_GROUP:
        if (r.Fixed(out->mcast_group, 4)) out->mcast_af = kAfInet;
        break;
      case IPVS_DAEMON_ATTR_MCAST_GROUP6:
        if (r.Fixed(out->mcast_group, 16)) out->mcast_af = kAfInet6;
        break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!have_state) return nl::Refuse(why, "daemon without IPVS_DAEMON_ATTR_STATE");
  return true;
}

}  // namespace ipvs
