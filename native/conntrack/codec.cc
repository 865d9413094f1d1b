#include "conntrack/codec.h"

#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace ct {

namespace {

using nl::kNested;
using nl::kNetByteOrder;

uint16_t MsgType(uint8_t cmd) { return static_cast<uint16_t>((NFNL_SUBSYS_CTNETLINK << 8) | cmd); }

bool SameAddr(const inet::Addr& a, const inet::Addr& b) {
  return a.family == b.family && std::memcmp(a.bytes, b.bytes, a.size()) == 0;
}

bool PortProto(uint8_t p) {
  return p == IPPROTO_TCP || p == IPPROTO_UDP || p == IPPROTO_SCTP || p == IPPROTO_UDPLITE || p == IPPROTO_DCCP;
}

void PutTuple(nl::AttrWriter& w, uint16_t type, uint8_t family, const Tuple& t) {
  const size_t tuple = w.Begin(type | kNested);
  const size_t ip = w.Begin(CTA_TUPLE_IP | kNested);
  if (family == AF_INET6) {
    w.Put(CTA_IP_V6_SRC, t.src.bytes, 16);
    w.Put(CTA_IP_V6_DST, t.dst.bytes, 16);
  } else {
    w.Put(CTA_IP_V4_SRC, t.src.bytes, 4);
    w.Put(CTA_IP_V4_DST, t.dst.bytes, 4);
  }
  w.End(ip);
  const size_t proto = w.Begin(CTA_TUPLE_PROTO | kNested);
  w.U8(CTA_PROTO_NUM, t.proto);
  if (t.has_ports) {
    w.Be16(CTA_PROTO_SRC_PORT, t.sport);
    w.Be16(CTA_PROTO_DST_PORT, t.dport);
  }
  if (t.has_icmp) {
    const bool v6 = t.proto == IPPROTO_ICMPV6;
    w.Be16(v6 ? CTA_PROTO_ICMPV6_ID : CTA_PROTO_ICMP_ID, t.icmp_id);
    w.U8(v6 ? CTA_PROTO_ICMPV6_TYPE : CTA_PROTO_ICMP_TYPE, t.icmp_type);
    w.U8(v6 ? CTA_PROTO_ICMPV6_CODE : CTA_PROTO_ICMP_CODE, t.icmp_code);
  }
  w.End(proto);
  w.End(tuple);
}

bool ReadTuple(nl::AttrReader r, uint8_t family, Tuple* t) {
  while (r.Next()) {
    if (r.type() == CTA_TUPLE_IP) {
      nl::AttrReader ip = r.Nested();
      while (ip.Next()) {
        inet::Addr* dst = nullptr;
        size_t n = 0;
        switch (ip.type()) {
          case CTA_IP_V4_SRC: dst = &t->src; n = 4; break;
          case CTA_IP_V4_DST: dst = &t->dst; n = 4; break;
          case CTA_IP_V6_SRC: dst = &t->src; n = 16; break;
          case CTA_IP_V6_DST: dst = &t->dst; n = 16; break;
          default: continue;
        }
        if ((n == 16) != (family == AF_INET6)) {
          ip.Fail("tuple address of the wrong family");
          break;
        }
        *dst = inet::Addr{};
        dst->family = family;
        ip.Fixed(dst->bytes, n);
      }
    } else if (r.type() == CTA_TUPLE_PROTO) {
      nl::AttrReader p = r.Nested();
      while (p.Next()) {
        switch (p.type()) {
          case CTA_PROTO_NUM: t->proto = p.U8(); break;
          case CTA_PROTO_SRC_PORT: nl::Store(&t->sport, p.Be16(), &t->has_ports); break;
          case CTA_PROTO_DST_PORT: nl::Store(&t->dport, p.Be16(), &t->has_ports); break;
          case CTA_PROTO_ICMP_ID:
          case CTA_PROTO_ICMPV6_ID: nl::Store(&t->icmp_id, p.Be16(), &t->has_icmp); break;
          case CTA_PROTO_ICMP_TYPE:
          case CTA_PROTO_ICMPV6_TYPE: t->icmp_type = p.U8(); break;
          case CTA_PROTO_ICMP_CODE:
          case CTA_PROTO_ICMPV6_CODE: t->icmp_code = p.U8(); break;
          default: break;
        }
      }
    }
  }
  return r.ok();
}

void ReadCounters(nl::AttrReader r, uint64_t* packets, uint64_t* bytes) {
  while (r.Next()) {
    if (r.type() == CTA_COUNTERS_PACKETS) *packets = r.Be64();
    else if (r.type() == CTA_COUNTERS_BYTES) *bytes = r.Be64();
  }
}

}  // namespace

bool Matches(const Flow& f, const Filter& x) {
  if (x.family && f.family != x.family) return false;
  if (x.proto && f.orig.proto != x.proto) return false;
  if (x.has_orig_src && !SameAddr(f.orig.src, x.orig_src)) return false;
  if (x.has_orig_dst && !SameAddr(f.orig.dst, x.orig_dst)) return false;
  if (x.orig_dport >= 0 && (!f.orig.has_ports || f.orig.dport != x.orig_dport)) return false;
  if (x.has_reply_src && !SameAddr(f.reply.src, x.reply_src)) return false;
  if (x.reply_sport >= 0 && (!f.reply.has_ports || f.reply.sport != x.reply_sport)) return false;
  return true;
}

void EncodeDump(nl::Batch& b, uint8_t family) {
  b.Begin(MsgType(IPCTNL_MSG_CT_GET), NLM_F_REQUEST | NLM_F_DUMP);
  b.NfgenHeader(family, NFNETLINK_V0, 0);
}

void EncodeDelete(nl::Batch& b, const Flow& f) {
  b.Begin(MsgType(IPCTNL_MSG_CT_DELETE), NLM_F_REQUEST | NLM_F_ACK);
  b.NfgenHeader(f.family, NFNETLINK_V0, 0);
  nl::AttrWriter w = b.Attrs();
  PutTuple(w, CTA_TUPLE_ORIG, f.family, f.orig);
  if (f.zone) w.Be16(CTA_ZONE, f.zone);
  w.Be32(CTA_ID, f.id);
}

bool DecodeFlow(const nlmsghdr* h, Flow* out, std::string* why) {
  if (h->nlmsg_type != MsgType(IPCTNL_MSG_CT_NEW) && h->nlmsg_type != MsgType(IPCTNL_MSG_CT_DELETE))
    return nl::Refuse(why, "not a ctnetlink conntrack message");
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return nl::Refuse(why, "message shorter than its nfgenmsg header");
  const auto* g = static_cast<const nfgenmsg*>(NLMSG_DATA(h));
  if (g->nfgen_family != AF_INET && g->nfgen_family != AF_INET6)
    return nl::Refuse(why, "conntrack family " + std::to_string(g->nfgen_family) + " is neither AF_INET nor AF_INET6");
  out->family = g->nfgen_family;
  bool has_orig = false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case CTA_TUPLE_ORIG: has_orig = ReadTuple(r.Nested(), out->family, &out->orig); break;
      case CTA_TUPLE_REPLY: ReadTuple(r.Nested(), out->family, &out->reply); break;
      case CTA_STATUS: out->status = r.Be32(); break;
      case CTA_TIMEOUT: out->timeout = r.Be32(); break;
      case CTA_MARK: out->mark = r.Be32(); break;
      case CTA_ID: out->id = r.Be32(); break;
      case CTA_USE: out->use = r.Be32(); break;
      case CTA_ZONE: out->zone = r.Be16(); break;
      case CTA_PROTOINFO: {
        nl::AttrReader pi = r.Nested();
        while (pi.Next()) {
          if (pi.type() != CTA_PROTOINFO_TCP) continue;
          nl::AttrReader tcp = pi.Nested();
          while (tcp.Next())
            if (tcp.type() == CTA_PROTOINFO_TCP_STATE) nl::Store(&out->tcp_state, tcp.U8(), &out->has_tcp_state);
        }
        break;
      }
      case CTA_COUNTERS_ORIG:
        ReadCounters(r.Nested(), &out->orig_packets, &out->orig_bytes);
        out->has_counters = true;
        break;
      case CTA_COUNTERS_REPLY:
        ReadCounters(r.Nested(), &out->reply_packets, &out->reply_bytes);
        out->has_counters = true;
        break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!has_orig || !out->orig.src.family || !out->orig.dst.family)
    return nl::Refuse(why, "conntrack entry without a complete original tuple");
  out->orig.has_ports = out->orig.has_ports && PortProto(out->orig.proto);
  out->reply.has_ports = out->reply.has_ports && PortProto(out->reply.proto);
  return true;
}

const char* TcpStateName(uint8_t s) {
  static const char* const names[] = {"NONE",      "SYN_SENT", "SYN_RECV",  "ESTABLISHED", "FIN_WAIT",
                                      "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE",       "SYN_SENT2"};
  return s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

}  // namespace ct
