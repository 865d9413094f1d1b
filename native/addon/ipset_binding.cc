// JS surface of ipset (nfnetlink subsystem IPSET): class IpsetHandle + codec hooks.
// Inputs are validated and converted on the main thread (a bad op throws a kInvalid
// NetlinkError and nothing is sent); protocol negotiation, type revisions, encoding and the
// kernel conversation happen on the worker.
#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "addon/batch.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "ipset/codec.h"
#include "netlink/error.h"

namespace addon {

namespace {

constexpr uint32_t kMaxTimeout = 2147483;  // IPSET_MAX_TIMEOUT: (UINT_MAX >> 1) / MSEC_PER_SEC

// Negotiated per handle (per socket), touched only on the worker with ch->mu held.
struct IpsetState {
  uint8_t protocol = 0;
  std::map<std::string, uint8_t> revisions;  // "type/family" -> highest revision the kernel has
};

// ---- JS -> structs ---------------------------------------------------------------------------

// Property keys created once per conversion, so 100k members do not create 1.5M key strings.
struct Keys {
  explicit Keys(Napi::Env env) {
    const char* names[] = {"ip",      "cidr",   "proto",      "port",   "ip2",     "cidr2",
                           "timeout", "packets", "bytes",     "comment", "nomatch", "skbmark",
                           "skbmarkmask", "skbprio", "skbqueue", "line"};
    for (size_t i = 0; i < kCount; i++) k[i] = Napi::String::New(env, names[i]);
  }
  enum { kIp, kCidr, kProto, kPort, kIp2, kCidr2, kTimeout, kPackets, kBytes, kComment, kNomatch,
         kSkbmark, kSkbmarkmask, kSkbprio, kSkbqueue, kLine, kCount };
  Napi::String k[kCount];
};

void CheckName(Napi::Env env, const std::string& name, const std::string& op, const char* what = "set name") {
  if (name.empty()) ThrowInvalid(env, op, std::string(what) + " is empty");
  if (name.size() > ipset::kMaxNameLen)
    ThrowInvalid(env, op, std::string(what) + " '" + name + "' is " + std::to_string(name.size()) +
                     " bytes; ipset names are at most 31");
}

uint8_t FamilyArg(Napi::Env env, const Napi::Value& v, const ipset::TypeInfo& t, const std::string& op) {
  if (t.bitmap) {
    if (IsSet(v)) ThrowInvalid(env, op, std::string(t.name) + " takes no family");
    return ipset::kFamilyUnspec;
  }
  if (!IsSet(v)) return ipset::kFamilyInet;
  const std::string f = StrArg(env, v, op, "family");
  if (f == "inet") return ipset::kFamilyInet;
  if (f == "inet6") return ipset::kFamilyInet6;
  ThrowInvalid(env, op, "family must be 'inet' or 'inet6' (got '" + f + "')");
}

const ipset::TypeInfo& TypeArg(Napi::Env env, const Napi::Value& v, const std::string& op) {
  const std::string type = StrArg(env, v, op, "type");
  const ipset::TypeInfo* t = ipset::FindType(type);
  if (!t) ThrowInvalid(env, op, "set type '" + type + "' is not supported by ipvsync");
  return *t;
}

bool ProtoHasPorts(uint8_t p) {
  return p == IPPROTO_TCP || p == IPPROTO_UDP || p == IPPROTO_SCTP || p == IPPROTO_UDPLITE ||
         p == IPPROTO_ICMP || p == IPPROTO_ICMPV6;
}

uint8_t ProtoArg(Napi::Env env, const Napi::Value& v, const std::string& where) {
  if (!IsSet(v)) return IPPROTO_TCP;  // ipset's default for a bare port
  if (v.IsNumber()) {
    const uint64_t p = UIntArg(env, v, 255, where, "proto");
    if (p == 0) ThrowInvalid(env, where, "proto 0 is not a valid protocol");
    return static_cast<uint8_t>(p);
  }
  const std::string s = StrArg(env, v, where, "proto");
  if (s == "tcp") return IPPROTO_TCP;
  if (s == "udp") return IPPROTO_UDP;
  if (s == "sctp") return IPPROTO_SCTP;
  if (s == "udplite") return IPPROTO_UDPLITE;
  if (s == "icmp") return IPPROTO_ICMP;
  if (s == "icmpv6" || s == "ipv6-icmp") return IPPROTO_ICMPV6;
  ThrowInvalid(env, where, "unknown proto '" + s + "' (tcp, udp, sctp, udplite, icmp, icmpv6 or a number)");
}

// "10.0.0.0/8" or "10.0.0.1" (+ an optional separate cidr) for an address component.
void AddrArg(Napi::Env env, const Napi::Value& v, const Napi::Value& cidr_v, bool net, uint8_t family,
             inet::Addr* out, uint8_t* cidr, const std::string& where, const char* what) {
  std::string s = StrArg(env, v, where, what);
  int cidr_val = -1;
  const size_t slash = s.find('/');
  if (slash != std::string::npos) {
    const std::string c = s.substr(slash + 1);
    s.resize(slash);
    if (c.empty() || c.size() > 3 || c.find_first_not_of("0123456789") != std::string::npos)
      ThrowInvalid(env, where, std::string(what) + " has a bad prefix length '" + c + "'");
    cidr_val = std::stoi(c);
  }
  if (IsSet(cidr_v)) {
    if (cidr_val >= 0) ThrowInvalid(env, where, std::string(what) + " has a prefix length twice");
    cidr_val = static_cast<int>(UIntArg(env, cidr_v, 128, where, "cidr"));
  }
  if (!inet::Parse(s, out)) ThrowInvalid(env, where, std::string(what) + " '" + s + "' is not an IPv4 or IPv6 address");
  const bool want6 = family == ipset::kFamilyInet6;
  if ((out->family == inet::kV6) != want6)
    ThrowInvalid(env, where, std::string(what) + " '" + s + "' is " + (want6 ? "IPv4" : "IPv6") + " but the set is family " +
                        (want6 ? "inet6" : "inet"));
  const int max = want6 ? 128 : 32;
  if (cidr_val >= 0) {
    if (!net) ThrowInvalid(env, where, std::string(what) + " is a host address in this set type; no prefix length allowed");
    if (cidr_val < 1 || cidr_val > max)
      ThrowInvalid(env, where, "prefix length " + std::to_string(cidr_val) + " is out of range 1-" + std::to_string(max));
  }
  // No prefix: nothing is sent and the kernel takes the host prefix (as libipset does).
  *cidr = cidr_val >= 0 ? static_cast<uint8_t>(cidr_val) : 0;
}

// `plain`: the caller (IpSets.apply) saw that no member of the op has an extension (timeout,
// counters, comment, nomatch, skb*, line): only the key fields are read, a third of the
// property reads of a member.
ipset::Member MemberArg(Napi::Env env, const Napi::Value& v, const ipset::TypeInfo& t, uint8_t family,
                        const Keys& keys, const std::string& where, bool plain = false) {
  if (!v.IsObject()) ThrowInvalid(env, where, "member must be an object");
  Napi::Object o = v.As<Napi::Object>();
  ipset::Member m;
  auto get = [&](int k) { return o.Get(keys.k[k]); };
  const ipset::Dim d0 = t.dims[0];
  if (d0 == ipset::Dim::kIp || d0 == ipset::Dim::kNet) {
    const Napi::Value ip = get(Keys::kIp);
    if (!IsSet(ip)) ThrowInvalid(env, where, std::string(t.name) + " members need ip");
    AddrArg(env, ip, get(Keys::kCidr), d0 == ipset::Dim::kNet, family, &m.ip, &m.cidr, where, "ip");
    if (d0 == ipset::Dim::kIp) m.cidr = 0;
  } else if (IsSet(get(Keys::kIp))) {
    ThrowInvalid(env, where, std::string(t.name) + " members take no ip");
  }
  if (ipset::HasDim(t, ipset::Dim::kPort)) {
    const Napi::Value port = get(Keys::kPort);
    if (!IsSet(port)) ThrowInvalid(env, where, std::string(t.name) + " members need port");
    m.port = static_cast<uint16_t>(UIntArg(env, port, 65535, where, "port"));
    m.has_port = true;
    if (!t.bitmap) {
      m.proto = ProtoArg(env, get(Keys::kProto), where);
      if (m.proto == IPPROTO_ICMP && family != ipset::kFamilyInet)
        ThrowInvalid(env, where, "proto icmp can be used with family inet only");
      if (m.proto == IPPROTO_ICMPV6 && family != ipset::kFamilyInet6)
        ThrowInvalid(env, where, "proto icmpv6 can be used with family inet6 only");
      if (!ProtoHasPorts(m.proto) && m.port != 0)
        ThrowInvalid(env, where, "proto " + std::to_string(m.proto) + " has no ports; port must be 0");
    } else if (IsSet(get(Keys::kProto))) {
      ThrowInvalid(env, where, "bitmap:port members take no proto");
    }
  } else if (IsSet(get(Keys::kPort))) {
    ThrowInvalid(env, where, std::string(t.name) + " members take no port");
  }
  const int n = ipset::DimCount(t);
  const ipset::Dim last = n >= 2 ? t.dims[n - 1] : ipset::Dim::kNone;
  const bool has_second_addr = n >= 2 && (last == ipset::Dim::kIp || last == ipset::Dim::kNet);
  if (has_second_addr) {
    const Napi::Value ip2 = get(Keys::kIp2);
    if (!IsSet(ip2)) ThrowInvalid(env, where, std::string(t.name) + " members need ip2");
    AddrArg(env, ip2, get(Keys::kCidr2), last == ipset::Dim::kNet, family, &m.ip2, &m.cidr2, where, "ip2");
    if (last == ipset::Dim::kIp) m.cidr2 = 0;
  } else if (IsSet(get(Keys::kIp2))) {
    ThrowInvalid(env, where, std::string(t.name) + " members take no ip2");
  }
  if (plain) return m;
  const Napi::Value timeout = get(Keys::kTimeout);
  if (IsSet(timeout)) {
    m.timeout = static_cast<uint32_t>(UIntArg(env, timeout, kMaxTimeout, where, "timeout"));
    m.has_timeout = true;
  }
  const Napi::Value packets = get(Keys::kPackets), bytes = get(Keys::kBytes);
  if (IsSet(packets) || IsSet(bytes)) {
    m.has_counters = true;
    if (IsSet(packets)) m.packets = UIntArg(env, packets, UINT64_MAX, where, "packets");
    if (IsSet(bytes)) m.bytes = UIntArg(env, bytes, UINT64_MAX, where, "bytes");
  }
  const Napi::Value comment = get(Keys::kComment);
  if (IsSet(comment)) {
    m.comment = StrArg(env, comment, where, "comment");
    if (m.comment.size() > ipset::kMaxCommentLen) ThrowInvalid(env, where, "comment is longer than 255 bytes");
    if (m.comment.find('"') != std::string::npos) ThrowInvalid(env, where, "comment must not contain '\"'");
    m.has_comment = true;
  }
  m.nomatch = BoolArg(env, get(Keys::kNomatch), m.nomatch, where, "nomatch");
  if (m.nomatch && !ipset::HasDim(t, ipset::Dim::kNet))
    ThrowInvalid(env, where, std::string("nomatch needs a net component; ") + t.name + " has none");
  const Napi::Value skbmark = get(Keys::kSkbmark);
  if (IsSet(skbmark)) {
    m.skbmark = static_cast<uint32_t>(UIntArg(env, skbmark, UINT32_MAX, where, "skbmark"));
    const Napi::Value mask = get(Keys::kSkbmarkmask);
    m.skbmarkmask = IsSet(mask) ? static_cast<uint32_t>(UIntArg(env, mask, UINT32_MAX, where, "skbmarkmask")) : UINT32_MAX;
    m.has_skbmark = true;
  }
  const Napi::Value skbprio = get(Keys::kSkbprio);
  if (IsSet(skbprio)) {
    m.skbprio = static_cast<uint32_t>(UIntArg(env, skbprio, UINT32_MAX, where, "skbprio"));
    m.has_skbprio = true;
  }
  const Napi::Value skbqueue = get(Keys::kSkbqueue);
  if (IsSet(skbqueue)) {
    m.skbqueue = static_cast<uint16_t>(UIntArg(env, skbqueue, 65535, where, "skbqueue"));
    m.has_skbqueue = true;
  }
  const Napi::Value line = get(Keys::kLine);
  if (IsSet(line)) m.lineno = static_cast<uint32_t>(UIntArg(env, line, UINT32_MAX, where, "line"));
  return m;
}

enum class OpKind { kCreate, kDestroy, kFlush, kRename, kSwap, kAdd, kDel };

struct PlannedOp {
  OpKind kind;
  uint8_t cmd;
  std::string name, name2;
  ipset::SetHeader create;
  const ipset::TypeInfo* type = nullptr;
  uint8_t family = 0;
  bool exist = false;
  std::vector<ipset::Member> members;
  bool numbered = false;  // member linenos were assigned by us (index + 1), not by the caller
};

// The command-level LINENO of a request the kernel echoed back (0 when absent).
uint32_t EchoedLineno(const std::vector<uint8_t>& echoed) {
  const size_t hdr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
  if (echoed.size() <= hdr) return 0;
  nl::AttrReader r(echoed.data() + hdr, echoed.size() - hdr);
  uint32_t line = 0;
  while (r.Next())
    if (r.type() == IPSET_ATTR_LINENO && r.len() == 4) line = r.Be32();
  return r.ok() ? line : 0;
}

PlannedOp OpArg(Napi::Env env, const Napi::Value& v, size_t i, const Keys& keys) {
  const std::string at = "op " + std::to_string(i);
  if (!v.IsObject()) ThrowInvalid(env, at, "must be an object");
  Napi::Object o = v.As<Napi::Object>();
  const std::string kind = StrArg(env, o.Get("op"), at, "op");
  PlannedOp p;
  p.name = StrArg(env, o.Get("name"), at + " (" + kind + ")", "name");
  const std::string where = at + " (" + kind + " " + p.name + ")";
  CheckName(env, p.name, where);
  p.exist = BoolArg(env, o.Get("exist"), false, where, "exist");
  if (kind == "create") {
    p.kind = OpKind::kCreate;
    p.cmd = IPSET_CMD_CREATE;
    const ipset::TypeInfo& t = TypeArg(env, o.Get("type"), where);
    p.type = &t;
    ipset::SetHeader& h = p.create;
    h.name = p.name;
    h.type = t.name;
    h.family = FamilyArg(env, o.Get("family"), t, where);
    auto opt32 = [&](const char* key, bool* has, uint32_t* out, uint64_t max) {
      const Napi::Value x = o.Get(key);
      if (!IsSet(x)) return;
      if (t.bitmap && std::string(key) != "timeout") ThrowInvalid(env, where, std::string(t.name) + " takes no " + key);
      *out = static_cast<uint32_t>(UIntArg(env, x, max, where, key));
      *has = true;
    };
    opt32("hashsize", &h.has_hashsize, &h.hashsize, UINT32_MAX);
    opt32("maxelem", &h.has_maxelem, &h.maxelem, UINT32_MAX);
    opt32("timeout", &h.has_timeout, &h.timeout, kMaxTimeout);
    opt32("initval", &h.has_initval, &h.initval, UINT32_MAX);
    const Napi::Value bucketsize = o.Get("bucketsize");
    if (IsSet(bucketsize)) {
      if (t.bitmap) ThrowInvalid(env, where, std::string(t.name) + " takes no bucketsize");
      h.bucketsize = static_cast<uint8_t>(UIntArg(env, bucketsize, 255, where, "bucketsize"));
      h.has_bucketsize = true;
    }
    if (h.has_maxelem && h.maxelem == 0) ThrowInvalid(env, where, "maxelem must be at least 1");
    const Napi::Value netmask = o.Get("netmask");
    if (IsSet(netmask)) {
      if (std::string(t.name) != "hash:ip") ThrowInvalid(env, where, "netmask is only supported by hash:ip");
      const uint8_t max = h.family == ipset::kFamilyInet6 ? 128 : 32;
      h.netmask = static_cast<uint8_t>(UIntArg(env, netmask, max, where, "netmask"));
      if (h.netmask == 0) ThrowInvalid(env, where, "netmask is out of range 1-" + std::to_string(max));
      h.has_netmask = true;
    }
    auto flag = [&](const char* key, bool* out) { *out = BoolArg(env, o.Get(key), *out, where, key); };
    flag("counters", &h.counters);
    flag("comment", &h.comment);
    flag("skbinfo", &h.skbinfo);
    flag("forceadd", &h.forceadd);
    if (h.forceadd && t.bitmap) ThrowInvalid(env, where, "forceadd is only supported by hash types");
    const Napi::Value range = o.Get("range");
    if (t.bitmap) {
      if (!range.IsObject()) ThrowInvalid(env, where, "bitmap:port needs range: { from, to }");
      Napi::Object r = range.As<Napi::Object>();
      h.port_from = static_cast<uint16_t>(UIntArg(env, r.Get("from"), 65535, where, "range.from"));
      h.port_to = static_cast<uint16_t>(UIntArg(env, r.Get("to"), 65535, where, "range.to"));
      if (h.port_from > h.port_to) ThrowInvalid(env, where, "range.from is greater than range.to");
      h.has_range = true;
    } else if (IsSet(range)) {
      ThrowInvalid(env, where, std::string(t.name) + " takes no range");
    }
    return p;
  }
  if (kind == "destroy" || kind == "flush") {
    p.kind = kind == "destroy" ? OpKind::kDestroy : OpKind::kFlush;
    p.cmd = kind == "destroy" ? IPSET_CMD_DESTROY : IPSET_CMD_FLUSH;
    return p;
  }
  if (kind == "rename" || kind == "swap") {
    p.kind = kind == "rename" ? OpKind::kRename : OpKind::kSwap;
    p.cmd = kind == "rename" ? IPSET_CMD_RENAME : IPSET_CMD_SWAP;
    p.name2 = StrArg(env, o.Get(kind == "rename" ? "to" : "with"), where, kind == "rename" ? "to" : "with");
    CheckName(env, p.name2, where, kind == "rename" ? "new name" : "second set name");
    return p;
  }
  if (kind == "add" || kind == "del") {
    p.kind = kind == "add" ? OpKind::kAdd : OpKind::kDel;
    p.cmd = kind == "add" ? IPSET_CMD_ADD : IPSET_CMD_DEL;
    const ipset::TypeInfo& t = TypeArg(env, o.Get("type"), where);
    p.type = &t;
    p.family = FamilyArg(env, o.Get("family"), t, where);
    const Napi::Value mv = o.Get("members");
    if (!mv.IsArray()) ThrowInvalid(env, where, "members must be an array");
    Napi::Array arr = mv.As<Napi::Array>();
    const uint32_t n = arr.Length();
    p.members.reserve(n);
    const Napi::Value plain = o.Get("plain");
    const bool key_fields_only = plain.IsBoolean() && plain.As<Napi::Boolean>().Value();
    for (uint32_t j = 0; j < n; j++) {
      p.members.push_back(AtOp(env, static_cast<int64_t>(i), j, [&] {
        return MemberArg(env, arr.Get(j), t, p.family, keys, where + " member " + std::to_string(j), key_fields_only);
      }));
    }
    return p;
  }
  ThrowInvalid(env, at, "unknown op '" + kind + "' (create, destroy, flush, rename, swap, add, del)");
}

// ---- structs -> JS ---------------------------------------------------------------------------

const char* ProtoName(uint8_t p) {
  switch (p) {
    case IPPROTO_TCP: return "tcp";
    case IPPROTO_UDP: return "udp";
    case IPPROTO_SCTP: return "sctp";
    case IPPROTO_UDPLITE: return "udplite";
    case IPPROTO_ICMP: return "icmp";
    case IPPROTO_ICMPV6: return "icmpv6";
    default: return nullptr;
  }
}

const char* FamilyName(uint8_t f) {
  return f == ipset::kFamilyInet6 ? "inet6" : f == ipset::kFamilyInet ? "inet" : nullptr;
}

Napi::Object MemberToJs(Napi::Env env, const ipset::Member& m, const Keys& keys) {
  Napi::Object o = Napi::Object::New(env);
  if (m.ip.family) o.Set(keys.k[Keys::kIp], inet::Format(m.ip));
  if (m.cidr) o.Set(keys.k[Keys::kCidr], m.cidr);
  if (m.has_port) {
    if (m.proto) o.Set(keys.k[Keys::kProto], NameOr(env, ProtoName(m.proto), m.proto));
    o.Set(keys.k[Keys::kPort], m.port);
  }
  if (m.ip2.family) o.Set(keys.k[Keys::kIp2], inet::Format(m.ip2));
  if (m.cidr2) o.Set(keys.k[Keys::kCidr2], m.cidr2);
  if (m.has_timeout) o.Set(keys.k[Keys::kTimeout], m.timeout);
  if (m.has_counters) {
    o.Set(keys.k[Keys::kPackets], Napi::BigInt::New(env, m.packets));
    o.Set(keys.k[Keys::kBytes], Napi::BigInt::New(env, m.bytes));
  }
  if (m.has_comment) o.Set(keys.k[Keys::kComment], m.comment);
  if (m.nomatch) o.Set(keys.k[Keys::kNomatch], true);
  if (m.has_skbmark) {
    o.Set(keys.k[Keys::kSkbmark], m.skbmark);
    o.Set(keys.k[Keys::kSkbmarkmask], m.skbmarkmask);
  }
  if (m.has_skbprio) o.Set(keys.k[Keys::kSkbprio], m.skbprio);
  if (m.has_skbqueue) o.Set(keys.k[Keys::kSkbqueue], m.skbqueue);
  return o;
}

Napi::Object HeaderToJs(Napi::Env env, const ipset::SetHeader& h) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", h.name);
  o.Set("type", h.type);
  const char* fam = FamilyName(h.family);
  if (fam) o.Set("family", fam);
  o.Set("revision", h.revision);
  if (h.has_hashsize) o.Set("hashsize", h.hashsize);
  if (h.has_maxelem) o.Set("maxelem", h.maxelem);
  if (h.has_netmask) o.Set("netmask", h.netmask);
  if (h.has_timeout) o.Set("timeout", h.timeout);
  if (h.counters) o.Set("counters", true);
  if (h.comment) o.Set("comment", true);
  if (h.skbinfo) o.Set("skbinfo", true);
  if (h.forceadd) o.Set("forceadd", true);
  if (h.has_range) {
    Napi::Object r = Napi::Object::New(env);
    r.Set("from", h.port_from);
    r.Set("to", h.port_to);
    o.Set("range", r);
  }
  if (h.has_bucketsize) o.Set("bucketsize", h.bucketsize);
  if (h.has_initval) o.Set("initval", h.initval);
  o.Set("references", h.references);
  o.Set("memsize", h.memsize);
  o.Set("elements", h.elements);
  if (h.index >= 0) o.Set("index", h.index);
  return o;
}

Napi::Value SetsToJs(Napi::Env env, std::vector<ipset::ListedSet>& sets, bool with_members) {
  Keys keys(env);
  Napi::Array a = Napi::Array::New(env, sets.size());
  for (size_t i = 0; i < sets.size(); i++) {
    Napi::Object o = HeaderToJs(env, sets[i].header);
    if (with_members)
      o.Set("members", ArrayOf(env, sets[i].members, [&](const ipset::Member& m) { return MemberToJs(env, m, keys); }));
    a.Set(i, o);
  }
  return a;
}

// ---- kernel conversation (worker thread, ch->mu held) -----------------------------------------

nl::Error IpsetError(const std::string& op, uint8_t cmd, bool bitmap, int64_t index, const nl::Status& st) {
  nl::Error e = KernelError(op, index, st);
  const std::string name = ipset::ErrorName(st.error, bitmap);
  if (!name.empty()) e.code = name;
  const std::string text = ipset::ErrorMessage(st.error, cmd, bitmap);
  if (!text.empty()) {
    e.message = op + ": " + text + " (" + e.code + ")";
    if (!st.extack.empty()) e.message += ": " + st.extack;
    if (st.error == EPERM) e.message += " (CAP_NET_ADMIN required)";
  }
  return e;
}

// One request whose reply is a data message (PROTOCOL, TYPE); throws on failure.
std::vector<uint8_t> Ask(Channel& ch, nl::Batch& b, uint8_t cmd, const std::string& op) {
  nl::TransactResult res = ch.Sock().Transact(b, nl::TransactOptions{});
  const nl::RequestResult& r = res.results[0];
  if (r.outcome != nl::Outcome::kOk) {
    nl::Error e = IpsetError(op, cmd, false, -1, r.status);
    if (cmd == IPSET_CMD_PROTOCOL && r.status.error != EPERM) {
      // nfnetlink answers a subsystem it does not have with EOPNOTSUPP (or EINVAL on old kernels);
      // EPERM is the caller's missing CAP_NET_ADMIN, as for every other handle (kind 'kernel').
      e.kind = nl::ErrorKind::kUnsupported;
      e.message = op + ": the kernel has no ipset support (module ip_set is not loaded): " + e.code;
    }
    throw nl::Exception(std::move(e));
  }
  if (res.data.empty()) nl::ThrowDecode(op, "no reply message");
  return std::move(res.data[0].bytes);
}

uint8_t EnsureProtocol(Channel& ch, IpsetState& st) {
  if (st.protocol) return st.protocol;
  nl::Batch b;
  ipset::EncodeProtocol(b);
  std::vector<uint8_t> reply = Ask(ch, b, IPSET_CMD_PROTOCOL, "IPSET_CMD_PROTOCOL");
  uint8_t max = 0, min = 0;
  DecodeReply(Msg(reply), "IPSET_CMD_PROTOCOL", ipset::DecodeProtocol, &max, &min);
  // Like libipset: speak the newest version both sides know.
  const uint8_t use = max < ipset::kProtocol ? max : ipset::kProtocol;
  if (use < ipset::kProtocolMin || min > ipset::kProtocol) {
    throw nl::Exception(nl::Error(nl::ErrorKind::kUnsupported, EPROTONOSUPPORT, "EPROTONOSUPPORT", "IPSET_CMD_PROTOCOL",
                                  "IPSET_CMD_PROTOCOL: the kernel speaks ipset protocol " + std::to_string(min) + "-" +
                                      std::to_string(max) + ", ipvsync " + std::to_string(ipset::kProtocolMin) + "-" +
                                      std::to_string(ipset::kProtocol)));
  }
  st.protocol = use;
  return use;
}

uint8_t EnsureRevision(Channel& ch, IpsetState& st, const std::string& type, uint8_t family) {
  const std::string key = type + "/" + std::to_string(family);
  auto it = st.revisions.find(key);
  if (it != st.revisions.end()) return it->second;
  nl::Batch b;
  ipset::EncodeType(b, st.protocol, type, family);
  const std::string op = "IPSET_CMD_TYPE " + type;
  std::vector<uint8_t> reply = Ask(ch, b, IPSET_CMD_TYPE, op);
  uint8_t max = 0, min = 0;
  DecodeReply(Msg(reply), op, ipset::DecodeType, &max, &min);
  st.revisions[key] = max;
  return max;
}

struct ApplyWork {
  std::vector<PlannedOp> ops;
  nl::TransactOptions opts;
  // filled on the worker
  nl::TransactResult res;
  std::vector<size_t> req_op;
  std::vector<std::pair<size_t, size_t>> req_range;  // member range of ADT requests
};

std::string OpLabel(const PlannedOp& p) {
  std::string s = std::string(ipset::CommandName(p.cmd)) + " " + p.name;
  if (!p.name2.empty()) s += " " + p.name2;
  return s;
}

void RunApply(Channel& ch, IpsetState& st, ApplyWork& w) {
  const uint8_t proto = EnsureProtocol(ch, st);
  nl::Batch b;
  for (size_t i = 0; i < w.ops.size(); i++) {
    PlannedOp& p = w.ops[i];
    const size_t before = b.size();
    switch (p.kind) {
      case OpKind::kCreate:
        p.create.revision = EnsureRevision(ch, st, p.create.type, p.create.family);
        ipset::EncodeCreate(b, proto, p.create, p.exist);
        break;
      case OpKind::kDestroy:
      case OpKind::kFlush:
      case OpKind::kRename:
      case OpKind::kSwap:
        ipset::EncodeNamed(b, proto, p.cmd, p.name, p.name2);
        break;
      case OpKind::kAdd:
      case OpKind::kDel:
        // Number the members (as `ipset restore` numbers lines) unless the caller did: when one
        // member of a multi-member message fails, the kernel echoes the request with that
        // member's number patched into the command-level LINENO, which names it exactly.
        if (p.members.size() > 1 && std::all_of(p.members.begin(), p.members.end(), [](const ipset::Member& m) { return m.lineno == 0; })) {
          for (size_t j = 0; j < p.members.size(); j++) p.members[j].lineno = static_cast<uint32_t>(j + 1);
          p.numbered = true;
        }
        ipset::EncodeAdt(b, proto, p.cmd, p.name, *p.type, p.members, 0, p.members.size(), p.exist, &w.req_range);
        break;
    }
    for (size_t r = before; r < b.size(); r++) {
      w.req_op.push_back(i);
      if (p.kind != OpKind::kAdd && p.kind != OpKind::kDel) w.req_range.emplace_back(0, 0);
    }
  }
  w.res = ch.Sock().Transact(b, w.opts);
}

// "member 3" or "members 3-5" (a range that may hold one member).
std::string Members(int64_t first, int64_t last) {
  return first == last ? "member " + std::to_string(first)
                       : "members " + std::to_string(first) + "-" + std::to_string(last);
}

Napi::Value ApplyToJs(Napi::Env env, ApplyWork& w) {
  const size_t nops = w.ops.size();
  // Per op: the worst outcome of its requests. An op split over several messages that was only
  // partly sent (a later chunk stopped by an earlier failure) is 'unknown': resync it.
  std::vector<uint32_t> n_req(nops, 0), n_ok(nops, 0), n_err(nops, 0), n_noreply(nops, 0), n_notsent(nops, 0);
  Napi::Array errors = Napi::Array::New(env);
  uint32_t ne = 0;
  for (size_t r = 0; r < w.res.results.size(); r++) {
    const size_t i = w.req_op[r];
    const PlannedOp& p = w.ops[i];
    const nl::RequestResult& rr = w.res.results[r];
    n_req[i]++;
    switch (rr.outcome) {
      case nl::Outcome::kOk: n_ok[i]++; break;
      case nl::Outcome::kError: n_err[i]++; break;
      case nl::Outcome::kNoReply: n_noreply[i]++; break;
      case nl::Outcome::kNotSent: n_notsent[i]++; break;
    }
    if (rr.outcome == nl::Outcome::kError || (rr.outcome == nl::Outcome::kNoReply && rr.status.error)) {
      const auto& range = w.req_range[r];
      const bool adt = p.kind == OpKind::kAdd || p.kind == OpKind::kDel;
      nl::Error e = IpsetError(OpLabel(p), p.cmd, p.type && p.type->bitmap, static_cast<int64_t>(i), rr.status);
      if (adt && p.members.size() > 1) {
        // The kernel stops a multi-element message at its first failing element: elements
        // before it were applied, the rest of the message was not. Its echo names the element.
        const uint32_t line = EchoedLineno(rr.status.echoed);
        int64_t failed = -1;
        for (size_t j = range.first; line && j < range.second && j < p.members.size(); j++)
          if (p.members[j].lineno == line) failed = static_cast<int64_t>(j);
        if (failed >= 0) {
          e.member = failed;
          const int64_t first = static_cast<int64_t>(range.first), last = static_cast<int64_t>(range.second) - 1;
          e.message += " [member " + std::to_string(failed) + (p.numbered ? "" : " (line " + std::to_string(line) + ")") +
                       " failed";
          std::string parts;
          if (failed > first) parts += Members(first, failed - 1) + " before it " + (failed - 1 == first ? "was" : "were") + " applied";
          if (failed < last) parts += (parts.empty() ? "" : ", ") + Members(failed + 1, last) + " after it " + (failed + 1 == last ? "was" : "were") + " not";
          e.message += (parts.empty() ? "" : "; of its message, " + parts) + "]";
        } else {
          e.message += " [members " + std::to_string(range.first) + "-" + std::to_string(range.second - 1) +
                       " of " + std::to_string(p.members.size()) +
                       " share one message: those before the failing one were applied, those after it were not]";
        }
      }
      errors.Set(ne++, MakeError(env, e));
    }
  }
  Napi::Uint8Array statuses = Napi::Uint8Array::New(env, nops);
  for (size_t i = 0; i < nops; i++) {
    uint8_t s = kStatusOk;  // an add of zero members has nothing to do
    if (n_err[i]) s = kStatusError;
    else if (n_noreply[i]) s = kStatusNoReply;
    else if (n_req[i] && n_notsent[i] == n_req[i]) s = kStatusNotSent;
    else if (n_notsent[i]) s = kStatusNoReply;
    statuses[i] = s;
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("statuses", statuses);
  o.Set("errors", errors);
  o.Set("sendmsgCalls", static_cast<double>(w.res.sendmsg_calls));
  o.Set("messages", static_cast<double>(w.res.results.size()));
  return o;
}

class IpsetHandle : public ChannelHandle<IpsetHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "IpsetHandle",
           {Method<&IpsetHandle::Protocol>("protocol"), Method<&IpsetHandle::Apply>("apply"),
            Method<&IpsetHandle::List>("list"), Method<&IpsetHandle::Test>("test")});
  }

  explicit IpsetHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_NETFILTER) {}

 private:
  Napi::Value Protocol(const Napi::CallbackInfo& info) {
    return OnChannel<uint8_t>(info.Env(), [st = st_](Channel& ch) { return EnsureProtocol(ch, *st); },
        [](Napi::Env env, uint8_t& v) -> Napi::Value { return Napi::Number::New(env, v); });
  }

  // apply(ops, { stopOnError?, maxBatchMessages? }) -> { statuses (per op), errors, sendmsgCalls, messages }
  Napi::Value Apply(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto work = std::make_shared<ApplyWork>();
    Keys keys(env);
    work->ops = OpsArg(env, info[0], "ipset apply", [&](const Napi::Value& v, uint32_t i) { return OpArg(env, v, i, keys); });
    work->opts = BatchOptions(info[1]);
    // ADT messages are up to 32 KiB: let a sendmsg carry 1 MiB of them.
    work->opts.max_chunk_bytes = 1 << 20;
    return OnChannel<std::shared_ptr<ApplyWork>>(env, [st = st_, work](Channel& ch) {
          RunApply(ch, *st, *work);
          return work;
        },
        [](Napi::Env env, std::shared_ptr<ApplyWork>& w) { return ApplyToJs(env, *w); });
  }

  // list(name?: string, { headersOnly? }) -> sets (one dump)
  Napi::Value List(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string name;
    if (info.Length() > 0 && IsSet(info[0])) {
      name = StrArg(env, info[0], "IPSET_CMD_LIST", "name");
      CheckName(env, name, "IPSET_CMD_LIST");
    }
    const bool headers_only = BoolOpt(info[1], "headersOnly", false);
    return OnChannel<std::vector<ipset::ListedSet>>(env, [st = st_, name, headers_only](Channel& ch) {
          const uint8_t proto = EnsureProtocol(ch, *st);
          nl::Batch b;
          ipset::EncodeList(b, proto, name);
          if (headers_only) b.Attrs().U32(IPSET_ATTR_FLAGS, IPSET_FLAG_LIST_HEADER);
          ipset::ListAccumulator acc;
          const std::string op = name.empty() ? "IPSET_CMD_LIST" : "IPSET_CMD_LIST " + name;
          try {
            ch.Sock().Dump(b, op, [&](const nlmsghdr* h) {
              std::string why;
              if (!acc.Add(h, &why)) nl::ThrowDecode(op, why);
            });
          } catch (const nl::Exception& ex) {
            if (ex.error().kind != nl::ErrorKind::kKernel) throw;
            nl::Status s;
            s.error = ex.error().errnum;
            s.extack = ex.error().extack;
            throw nl::Exception(IpsetError(op, IPSET_CMD_LIST, false, -1, s));
          }
          return std::move(acc.sets());
        },
        [headers_only](Napi::Env env, std::vector<ipset::ListedSet>& sets) {
          return SetsToJs(env, sets, !headers_only);
        });
  }

  // test(name, type, family, members) -> Uint8Array (1 = in the set)
  Napi::Value Test(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const std::string name = StrArg(env, info[0], "IPSET_CMD_TEST", "name");
    const std::string where = "IPSET_CMD_TEST " + name;
    CheckName(env, name, where);
    const ipset::TypeInfo& t = TypeArg(env, info[1], where);
    const uint8_t family = FamilyArg(env, info[2], t, where);
    Napi::Array arr = ArrayArg(env, info[3], where, "members must be an array");
    Keys keys(env);
    auto members = std::make_shared<std::vector<ipset::Member>>();
    for (uint32_t j = 0; j < arr.Length(); j++)
      members->push_back(MemberArg(env, arr.Get(j), t, family, keys, where + " member " + std::to_string(j)));
    const ipset::TypeInfo* tp = &t;
    return OnChannel<std::vector<uint8_t>>(env, [st = st_, members, tp, name, where](Channel& ch) {
          const uint8_t proto = EnsureProtocol(ch, *st);
          nl::Batch b;
          for (const ipset::Member& m : *members) ipset::EncodeTest(b, proto, name, *tp, m);
          nl::TransactOptions opts;
          opts.stop_on_error = false;
          nl::TransactResult res = ch.Sock().Transact(b, opts);
          std::vector<uint8_t> present(members->size(), 0);
          for (size_t i = 0; i < res.results.size(); i++) {
            const nl::RequestResult& r = res.results[i];
            if (r.outcome == nl::Outcome::kOk) {
              present[i] = 1;
            } else if (r.outcome == nl::Outcome::kError && r.status.error == IPSET_ERR_EXIST) {
              present[i] = 0;  // TEST answers "not in the set" with IPSET_ERR_EXIST
            } else {
              throw nl::Exception(IpsetError(where, IPSET_CMD_TEST, tp->bitmap, static_cast<int64_t>(i), r.status));
            }
          }
          return present;
        },
        [](Napi::Env env, std::vector<uint8_t>& present) -> Napi::Value {
          Napi::Uint8Array a = Napi::Uint8Array::New(env, present.size());
          for (size_t i = 0; i < present.size(); i++) a[i] = present[i];
          return a;
        });
  }

  std::shared_ptr<IpsetState> st_ = std::make_shared<IpsetState>();
};

// ---- codec hooks (golden bytes, fuzzing) -------------------------------------------------------

uint8_t ProtoOpt(const Napi::CallbackInfo& info, size_t i) {
  return static_cast<uint8_t>(NumberOr(info[i], ipset::kProtocol));
}

// encodeOps(ops, { protocol?, revision? }) -> Buffer with every request the ops become.
Napi::Value EncodeOps(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array arr = ArrayArg(env, info[0], "encodeOps", "expected an array of ops");
  Keys keys(env);
  const uint8_t proto = static_cast<uint8_t>(NumberOr(Opt(info[1], "protocol"), ipset::kProtocol));
  const uint8_t revision = static_cast<uint8_t>(NumberOr(Opt(info[1], "revision"), 0));
  const size_t max_bytes = NumberOr(Opt(info[1], "maxMessageBytes"), ipset::kMaxAdtBytes);
  return EncodedBytes(env, [&](nl::Batch& b) {
    for (uint32_t i = 0; i < arr.Length(); i++) {
      PlannedOp p = AtOp(env, i, -1, [&] { return OpArg(env, arr.Get(i), i, keys); });
      switch (p.kind) {
        case OpKind::kCreate:
          p.create.revision = revision;
          ipset::EncodeCreate(b, proto, p.create, p.exist);
          break;
        case OpKind::kAdd:
        case OpKind::kDel:
          ipset::EncodeAdt(b, proto, p.cmd, p.name, *p.type, p.members, 0, p.members.size(), p.exist, nullptr, max_bytes);
          break;
        default: ipset::EncodeNamed(b, proto, p.cmd, p.name, p.name2);
      }
    }
  });
}

Napi::Value EncodeProtocolHook(const Napi::CallbackInfo& info) {
  return EncodedBytes(info.Env(), [](nl::Batch& b) { ipset::EncodeProtocol(b); });
}

Napi::Value EncodeTypeHook(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ipset::TypeInfo& t = TypeArg(env, info[0], "encodeType");
  const uint8_t family = FamilyArg(env, info[1], t, "encodeType");
  return EncodedBytes(env, [&](nl::Batch& b) { ipset::EncodeType(b, ProtoOpt(info, 2), t.name, family); });
}

Napi::Value EncodeListHook(const Napi::CallbackInfo& info) {
  const std::string name = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { ipset::EncodeList(b, ProtoOpt(info, 1), name); });
}

Napi::Value EncodeTestHook(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string name = StrArg(env, info[0], "encodeTest", "name");
  const ipset::TypeInfo& t = TypeArg(env, info[1], "encodeTest");
  const uint8_t family = FamilyArg(env, info[2], t, "encodeTest");
  Keys keys(env);
  ipset::Member m = MemberArg(env, info[3], t, family, keys, "encodeTest");
  return EncodedBytes(env, [&](nl::Batch& b) { ipset::EncodeTest(b, ProtoOpt(info, 4), name, t, m); });
}

// decodeList(buf) -> sets, folding every message of a datagram (a dump's replies back to back).
Napi::Value DecodeListHook(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<uint8_t> buf = BufferArg(info, 0);
  ipset::ListAccumulator acc;
  std::string why;
  bool bad = false;
  const bool ok = nl::ForEachMessage(buf.data(), buf.size(), [&](const nlmsghdr* h) {
    if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) return true;
    if (!acc.Add(h, &why)) {
      bad = true;
      return false;
    }
    return true;
  });
  if (!ok) ThrowInvalid(env, "decodeList", "truncated or malformed netlink message");
  if (bad) ThrowInvalid(env, "decodeList", why);
  return SetsToJs(env, acc.sets(), true);
}

// decodeProtocol / decodeType: the reply's highest and lowest version, as { <max_key>, <min_key> }.
Napi::Value VersionsHook(const Napi::CallbackInfo& info, const char* op,
                         bool (*decode)(const nlmsghdr*, uint8_t*, uint8_t*, std::string*), const char* max_key,
                         const char* min_key) {
  uint8_t max = 0, min = 0;
  DecodeMessageArg(info, op, decode, &max, &min);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set(max_key, max);
  o.Set(min_key, min);
  return o;
}

Napi::Value DecodeProtocolHook(const Napi::CallbackInfo& info) {
  return VersionsHook(info, "decodeProtocol", ipset::DecodeProtocol, "max", "min");
}

Napi::Value DecodeTypeHook(const Napi::CallbackInfo& info) {
  return VersionsHook(info, "decodeType", ipset::DecodeType, "revision", "revisionMin");
}

// errorInfo(code, cmdName, bitmap?) -> { code, message }
Napi::Value ErrorInfoHook(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int code = static_cast<int>(UIntArg(env, info[0], INT32_MAX, "errorInfo", "code"));
  const std::string cmd = StrArg(env, info[1], "errorInfo", "cmd");
  const bool bitmap = info.Length() > 2 && info[2].IsBoolean() && info[2].As<Napi::Boolean>().Value();
  uint8_t c = 0;
  for (uint8_t i = 1; i <= IPSET_CMD_TYPE; i++)
    if (cmd == ipset::CommandName(i)) c = i;
  nl::Status st;
  st.error = code;
  nl::Error e = IpsetError(cmd, c, bitmap, -1, st);
  Napi::Object o = Napi::Object::New(env);
  o.Set("code", e.code);
  o.Set("message", e.message);
  return o;
}

}  // namespace

void InitIpset(Napi::Env env, Napi::Object exports) {
  IpsetHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "ipset");
  codec.Set("encodeOps", Function<EncodeOps>(env, "encodeOps"));
  codec.Set("encodeProtocol", Function<EncodeProtocolHook>(env, "encodeProtocol"));
  codec.Set("encodeType", Function<EncodeTypeHook>(env, "encodeType"));
  codec.Set("encodeList", Function<EncodeListHook>(env, "encodeList"));
  codec.Set("encodeTest", Function<EncodeTestHook>(env, "encodeTest"));
  codec.Set("decodeList", Function<DecodeListHook>(env, "decodeList"));
  codec.Set("decodeProtocol", Function<DecodeProtocolHook>(env, "decodeProtocol"));
  codec.Set("decodeType", Function<DecodeTypeHook>(env, "decodeType"));
  codec.Set("errorInfo", Function<ErrorInfoHook>(env, "errorInfo"));
}

}  // namespace addon
