// JS surface of rtnetlink: class RtnlHandle (links and addresses) + codec hooks.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "addon/batch.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "rtnl/addr.h"
#include "rtnl/link.h"
#include "rtnl/route.h"

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
  if (!l.alias.empty()) o.Set("alias", l.alias);
  return o;
}

namespace {

// Names of route types, tables, scopes and protocols, as iproute2 spells them.
struct NameNum {
  const char* name;
  uint32_t value;
};
constexpr NameNum kRouteTypes[] = {{"unicast", RTN_UNICAST},     {"local", RTN_LOCAL},         {"broadcast", RTN_BROADCAST},
                                   {"anycast", RTN_ANYCAST},     {"multicast", RTN_MULTICAST}, {"blackhole", RTN_BLACKHOLE},
                                   {"unreachable", RTN_UNREACHABLE}, {"prohibit", RTN_PROHIBIT}, {"throw", RTN_THROW},
                                   {"nat", RTN_NAT}};
constexpr NameNum kTables[] = {{"local", RT_TABLE_LOCAL}, {"main", RT_TABLE_MAIN}, {"default", RT_TABLE_DEFAULT}};
constexpr NameNum kScopes[] = {{"global", RT_SCOPE_UNIVERSE}, {"site", RT_SCOPE_SITE}, {"link", RT_SCOPE_LINK},
                               {"host", RT_SCOPE_HOST},       {"nowhere", RT_SCOPE_NOWHERE}};
constexpr NameNum kProtocols[] = {{"kernel", RTPROT_KERNEL}, {"boot", RTPROT_BOOT}, {"static", RTPROT_STATIC},
                                  {"ipvsync", rtnl::kIpvsyncProtocol}};

template <size_t N>
const char* NameOf(const NameNum (&t)[N], uint32_t v) {
  for (const NameNum& x : t)
    if (x.value == v) return x.name;
  return nullptr;
}

Napi::Value AddressToJs(Napi::Env env, const rtnl::Address& a, const std::string& link) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("link", link);
  o.Set("index", a.index);
  o.Set("family", a.local.family == inet::kV6 ? "inet6" : "inet");
  o.Set("address", inet::Format(a.local));
  o.Set("prefixlen", a.prefixlen);
  o.Set("scope", NameOr(env, NameOf(kScopes, a.scope), a.scope));
  o.Set("flags", a.flags);
  if (a.peer.family) o.Set("peer", inet::Format(a.peer));
  if (!a.label.empty()) o.Set("label", a.label);
  if (a.valid_lft != UINT32_MAX) o.Set("validLifetime", a.valid_lft);
  if (a.preferred_lft != UINT32_MAX) o.Set("preferredLifetime", a.preferred_lft);
  if (a.proto != 0) o.Set("protocol", a.proto);
  return o;
}

// ---- ops ---------------------------------------------------------------------------------------

enum class Kind { kAddLink, kDelLink, kSetLink, kAddAddr, kDelAddr, kAddRoute, kDelRoute };

struct RtOp {
  Kind kind;
  std::string name;   // link name ("" when given by index)
  int32_t index = 0;  // link index (0 = resolve the name)
  std::string link_kind;
  std::string alias;  // setLink: IFLA_IFALIAS (empty: left)
  uint32_t mtu = 0;
  int up = -1;        // setLink: 1 up, 0 down, -1 left
  bool exist = false;
  inet::Addr addr;
  uint8_t prefixlen = 0;
  uint8_t addr_proto = 0;  // addAddr: IFA_PROTO (0: none)
  std::string label;  // for messages
  rtnl::Route route;  // route ops (route.oif is filled in from index/name when sent)
};

bool IsAddrOp(const RtOp& op) { return op.kind == Kind::kAddAddr || op.kind == Kind::kDelAddr; }
bool IsRouteOp(const RtOp& op) { return op.kind == Kind::kAddRoute || op.kind == Kind::kDelRoute; }
// Whether the op names a link the apply must resolve to an index.
bool NeedsIndex(const RtOp& op) { return op.index == 0 && (IsAddrOp(op) || (IsRouteOp(op) && !op.name.empty())); }

std::string LinkNameArg(Napi::Env env, const Napi::Value& v, const std::string& where) {
  std::string n = StrArg(env, v, where, "link name");
  if (n.empty()) ThrowInvalid(env, where, "link name is empty");
  if (n.size() > rtnl::kMaxLinkName)
    ThrowInvalid(env, where, "link name '" + n + "' is " + std::to_string(n.size()) + " bytes; at most 15");
  if (n == "." || n == ".." || n.find_first_of("/: \t\n") != std::string::npos)
    ThrowInvalid(env, where, "link name '" + n + "' holds a character the kernel refuses ('/', ':' or whitespace)");
  return n;
}

int32_t IndexArg(Napi::Env env, const Napi::Value& v, const std::string& where) {
  if (!v.IsNumber()) ThrowInvalid(env, where, "index must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 1) || d != std::floor(d) || d > 2147483647.0) ThrowInvalid(env, where, "index must be a positive integer");
  return static_cast<int32_t>(d);
}

// { link: name } or { index: n }
void TargetArg(Napi::Env env, Napi::Object o, RtOp* op, const std::string& where, const char* name_key) {
  const Napi::Value idx = o.Get("index");
  const Napi::Value name = o.Get(name_key);
  if (IsSet(idx)) {
    op->index = IndexArg(env, idx, where);
    if (IsSet(name)) op->name = LinkNameArg(env, name, where);
  } else {
    op->name = LinkNameArg(env, name, where);
  }
}

void AddressArg(Napi::Env env, const Napi::Value& v, RtOp* op, const std::string& where) {
  if (!v.IsString()) ThrowInvalid(env, where, "address must be a string such as '10.0.0.1/32' or 'fd00::1'");
  std::string s = v.As<Napi::String>().Utf8Value();
  int prefix = -1;
  const size_t slash = s.find('/');
  if (slash != std::string::npos) {
    const std::string p = s.substr(slash + 1);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos)
      ThrowInvalid(env, where, "bad prefix length in '" + s + "'");
    prefix = std::stoi(p);
    s.resize(slash);
  }
  if (!inet::Parse(s, &op->addr)) ThrowInvalid(env, where, "'" + s + "' is not an IPv4 or IPv6 address");
  const int max = op->addr.family == inet::kV6 ? 128 : 32;
  if (prefix < 0) prefix = max;  // a VIP: /32 or /128
  if (prefix > max) ThrowInvalid(env, where, "prefix length " + std::to_string(prefix) + " is out of range 0-" + std::to_string(max));
  op->prefixlen = static_cast<uint8_t>(prefix);
}


// ---- routes ------------------------------------------------------------------------------------

template <size_t N>
std::string Names(const NameNum (&t)[N]) {
  std::string s;
  for (const NameNum& x : t) s += (s.empty() ? "" : ", ") + std::string(x.name);
  return s;
}

// A name from the table, or (max > 0) a number in 0..max.
template <size_t N>
uint32_t NamedArg(Napi::Env env, const Napi::Value& v, const NameNum (&t)[N], double min, double max, const std::string& where,
                  const char* what) {
  if (v.IsString()) {
    const std::string s = v.As<Napi::String>().Utf8Value();
    for (const NameNum& x : t)
      if (s == x.name) return x.value;
    ThrowInvalid(env, where, std::string(what) + " '" + s + "' is unknown (" + Names(t) + (max > 0 ? ", or a number" : "") + ")");
  }
  if (max > 0 && v.IsNumber()) {
    const double d = v.As<Napi::Number>().DoubleValue();
    if (!(d >= min) || d > max || d != std::floor(d))
      ThrowInvalid(env, where, std::string(what) + " must be an integer in " + std::to_string(static_cast<uint64_t>(min)) + "-" +
                          std::to_string(static_cast<uint64_t>(max)));
    return static_cast<uint32_t>(d);
  }
  ThrowInvalid(env, where, std::string(what) + " must be " + (max > 0 ? "a name or a number" : "one of " + Names(t)));
}

void RouteArg(Napi::Env env, Napi::Object o, RtOp* op, bool add, const std::string& where) {
  rtnl::Route& r = op->route;
  // dst: 'a.b.c.d/len' or 'x::y/len' (no length: a host route); the address must be the network.
  const Napi::Value dst = o.Get("dst");
  if (!dst.IsString()) ThrowInvalid(env, where, "dst must be a string such as '10.96.0.0/12' or 'fd00:96::/108'");
  AddressArg(env, dst, op, where);
  r.family = static_cast<uint8_t>(op->addr.family);
  r.dst = op->addr;
  r.dst_len = op->prefixlen;
  const int bits = r.family == AF_INET6 ? 128 : 32;
  inet::Addr net = r.dst;
  for (int i = r.dst_len; i < bits; i++) net.bytes[i / 8] &= static_cast<uint8_t>(~(0x80 >> (i % 8)));
  if (std::memcmp(net.bytes, r.dst.bytes, sizeof net.bytes) != 0)
    ThrowInvalid(env, where, "dst '" + dst.As<Napi::String>().Utf8Value() + "' has host bits set (the network is " + inet::Format(net) +
                        "/" + std::to_string(r.dst_len) + ")");
  // As iproute2: an add defaults to unicast, protocol boot; a delete to "any" (0).
  r.type = add ? RTN_UNICAST : RTN_UNSPEC;
  r.protocol = add ? RTPROT_BOOT : RTPROT_UNSPEC;
  if (IsSet(o.Get("type"))) r.type = static_cast<uint8_t>(NamedArg(env, o.Get("type"), kRouteTypes, 0, 0, where, "route type"));
  if (IsSet(o.Get("protocol")))
    r.protocol = static_cast<uint8_t>(NamedArg(env, o.Get("protocol"), kProtocols, add ? 1 : 0, 255, where, "protocol"));
  // Table: local for local/broadcast/anycast/nat routes, main otherwise (iproute2's default).
  r.table = (r.type == RTN_LOCAL || r.type == RTN_BROADCAST || r.type == RTN_ANYCAST || r.type == RTN_NAT) ? RT_TABLE_LOCAL
                                                                                                        : RT_TABLE_MAIN;
  if (IsSet(o.Get("table"))) r.table = NamedArg(env, o.Get("table"), kTables, 1, 4294967295.0, where, "table");
  // Link: dev (name) or index; none for blackhole/unreachable/prohibit/throw.
  if (IsSet(o.Get("index"))) op->index = IndexArg(env, o.Get("index"), where);
  if (IsSet(o.Get("dev"))) op->name = LinkNameArg(env, o.Get("dev"), where);
  const bool has_link = op->index != 0 || !op->name.empty();
  const bool nolink_type = r.type == RTN_BLACKHOLE || r.type == RTN_UNREACHABLE || r.type == RTN_PROHIBIT || r.type == RTN_THROW;
  if (add && nolink_type && has_link) ThrowInvalid(env, where, std::string(NameOf(kRouteTypes, r.type)) + " routes take no dev");
  auto other = [&](const char* key, inet::Addr* out) {
    const Napi::Value v = o.Get(key);
    if (!IsSet(v)) return;
    if (!v.IsString()) ThrowInvalid(env, where, std::string(key) + " must be an address string");
    const std::string s = v.As<Napi::String>().Utf8Value();
    if (!inet::Parse(s, out)) ThrowInvalid(env, where, std::string(key) + " '" + s + "' is not an IPv4 or IPv6 address");
    if (out->family != r.family)
      ThrowInvalid(env, where, std::string(key) + " '" + s + "' is not of the family of dst (mixed IPv4 and IPv6)");
  };
  other("prefsrc", &r.prefsrc);
  other("gateway", &r.gateway);
  if (r.gateway.family && r.type != RTN_UNICAST) ThrowInvalid(env, where, "only unicast routes take a gateway");
  if (add && r.type == RTN_UNICAST && !has_link && !r.gateway.family) ThrowInvalid(env, where, "a unicast route needs dev or gateway");
  const Napi::Value metric = o.Get("metric");
  if (IsSet(metric)) {
    if (!metric.IsNumber()) ThrowInvalid(env, where, "metric must be a number");
    const double d = metric.As<Napi::Number>().DoubleValue();
    if (!(d >= 0) || d > 4294967295.0 || d != std::floor(d)) ThrowInvalid(env, where, "metric must be an integer in 0-4294967295");
    r.priority = static_cast<uint32_t>(d);
    r.has_priority = true;
  }
  // Scope as iproute2 picks it: IPv6 global; local/nat host; broadcast/multicast/anycast link;
  // a unicast add without gateway link; a delete "any" (nowhere) unless the type implies one.
  if (IsSet(o.Get("scope"))) {
    r.scope = static_cast<uint8_t>(NamedArg(env, o.Get("scope"), kScopes, 0, 0, where, "scope"));
  } else if (r.family == AF_INET6) {
    r.scope = RT_SCOPE_UNIVERSE;
  } else if (r.type == RTN_LOCAL || r.type == RTN_NAT) {
    r.scope = RT_SCOPE_HOST;
  } else if (r.type == RTN_BROADCAST || r.type == RTN_MULTICAST || r.type == RTN_ANYCAST) {
    r.scope = RT_SCOPE_LINK;
  } else if (r.type == RTN_UNICAST || r.type == RTN_UNSPEC) {
    r.scope = !add ? RT_SCOPE_NOWHERE : r.gateway.family ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
  } else {
    r.scope = RT_SCOPE_UNIVERSE;
  }
}

std::string RouteText(const RtOp& op) {
  const rtnl::Route& r = op.route;
  std::string s;
  if (const char* t = NameOf(kRouteTypes, r.type)) s += std::string(t) + " ";
  s += inet::Format(r.dst) + "/" + std::to_string(r.dst_len);
  if (!op.name.empty()) s += " dev " + op.name;
  else if (op.index) s += " dev #" + std::to_string(op.index);
  const char* t = NameOf(kTables, r.table);
  s += " table " + (t ? std::string(t) : std::to_string(r.table));
  if (r.protocol) s += " proto " + std::to_string(r.protocol);
  return s;
}

Napi::Value RouteToJs(Napi::Env env, const rtnl::Route& r, const std::string& dev) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", r.family == AF_INET6 ? "inet6" : "inet");
  o.Set("dst", inet::Format(r.dst) + "/" + std::to_string(r.dst_len));
  o.Set("type", NameOr(env, NameOf(kRouteTypes, r.type), r.type));
  o.Set("table", r.table);
  o.Set("protocol", r.protocol);
  o.Set("scope", NameOr(env, NameOf(kScopes, r.scope), r.scope));
  if (r.oif) {
    o.Set("index", r.oif);
    if (!dev.empty()) o.Set("dev", dev);
  }
  if (r.has_priority) o.Set("metric", r.priority);
  if (r.prefsrc.family) o.Set("prefsrc", inet::Format(r.prefsrc));
  if (r.gateway.family) o.Set("gateway", inet::Format(r.gateway));
  o.Set("flags", r.flags);
  return o;
}

struct RouteFilter {
  uint8_t family = AF_UNSPEC;
  bool by_table = false, by_protocol = false, by_type = false;
  uint32_t table = 0;
  uint8_t protocol = 0, type = 0;
  bool Keeps(const rtnl::Route& r) const {
    return (!by_table || r.table == table) && (!by_protocol || r.protocol == protocol) && (!by_type || r.type == type);
  }
};

RtOp OpArg(Napi::Env env, const Napi::Value& v, size_t i) {
  const std::string at = "op " + std::to_string(i);
  if (!v.IsObject()) ThrowInvalid(env, at, "must be an object");
  Napi::Object o = v.As<Napi::Object>();
  const std::string kind = StrArg(env, o.Get("op"), at, "op");
  const std::string where = at + " (" + kind + ")";
  RtOp op;
  op.exist = BoolArg(env, o.Get("exist"), false, where, "exist");
  if (kind == "addLink") {
    op.kind = Kind::kAddLink;
    op.name = LinkNameArg(env, o.Get("name"), where);
    op.link_kind = StrArg(env, o.Get("kind"), where, "kind");
    if (op.link_kind != "dummy" && op.link_kind != "bridge")
      ThrowInvalid(env, where, "link kind '" + op.link_kind + "' is not supported (dummy, bridge)");
    const Napi::Value mtu = o.Get("mtu");
    if (IsSet(mtu)) {
      if (!mtu.IsNumber()) ThrowInvalid(env, where, "mtu must be a number");
      const double d = mtu.As<Napi::Number>().DoubleValue();
      if (!(d >= 68) || d > 65535 || d != std::floor(d)) ThrowInvalid(env, where, "mtu is out of range 68-65535");
      op.mtu = static_cast<uint32_t>(d);
    }
  } else if (kind == "delLink" || kind == "setLink") {
    op.kind = kind == "delLink" ? Kind::kDelLink : Kind::kSetLink;
    TargetArg(env, o, &op, where, "name");
    if (op.kind == Kind::kSetLink) {
      const Napi::Value up = o.Get("up");
      if (IsSet(up)) op.up = BoolArg(env, up, false, where, "up") ? 1 : 0;
      const Napi::Value alias = o.Get("alias");
      if (IsSet(alias)) {
        op.alias = StrArg(env, alias, where, "alias");
        if (op.alias.empty() || op.alias.size() > rtnl::kMaxLinkAlias || op.alias.find('\0') != std::string::npos)
          ThrowInvalid(env, where, "alias must be 1-255 bytes without NUL");
      }
      if (op.up < 0 && op.alias.empty()) ThrowInvalid(env, where, "setLink needs up or alias");
    }
  } else if (kind == "addAddr" || kind == "delAddr") {
    op.kind = kind == "addAddr" ? Kind::kAddAddr : Kind::kDelAddr;
    TargetArg(env, o, &op, where, "link");
    AddressArg(env, o.Get("address"), &op, where);
    const Napi::Value proto = o.Get("protocol");
    if (IsSet(proto)) {
      // RTM_DELADDR matches the address alone: a protocol there would read as a filter it is not.
      if (op.kind == Kind::kDelAddr) ThrowInvalid(env, where, "protocol is for addAddr only (a delete matches the address alone)");
      if (!proto.IsNumber()) ThrowInvalid(env, where, "protocol must be a number 0-255");
      const double d = proto.As<Napi::Number>().DoubleValue();
      if (!(d >= 0) || d > 255 || d != std::floor(d)) ThrowInvalid(env, where, "protocol must be an integer in 0-255");
      op.addr_proto = static_cast<uint8_t>(d);
    }
  } else if (kind == "addRoute" || kind == "delRoute") {
    op.kind = kind == "addRoute" ? Kind::kAddRoute : Kind::kDelRoute;
    RouteArg(env, o, &op, op.kind == Kind::kAddRoute, where);
  } else {
    ThrowInvalid(env, at, "unknown op '" + kind + "' (addLink, delLink, setLink, addAddr, delAddr, addRoute, delRoute)");
  }
  return op;
}

std::string OpName(const RtOp& op) {
  const std::string link = op.name.empty() ? "#" + std::to_string(op.index) : op.name;
  switch (op.kind) {
    case Kind::kAddLink: return "RTM_NEWLINK " + op.name + " (" + op.link_kind + ")";
    case Kind::kDelLink: return "RTM_DELLINK " + link;
    case Kind::kSetLink: return "RTM_NEWLINK " + link + (op.up == 1 ? " up" : op.up == 0 ? " down" : "") + (op.alias.empty() ? "" : " alias " + op.alias);
    case Kind::kAddAddr:
      return "RTM_NEWADDR " + inet::Format(op.addr) + "/" + std::to_string(op.prefixlen) + " dev " + link +
             (op.addr_proto ? " proto " + std::to_string(op.addr_proto) : "");
    case Kind::kDelAddr: return "RTM_DELADDR " + inet::Format(op.addr) + "/" + std::to_string(op.prefixlen) + " dev " + link;
    case Kind::kAddRoute: return "RTM_NEWROUTE " + RouteText(op);
    case Kind::kDelRoute: return "RTM_DELROUTE " + RouteText(op);
  }
  return "";
}

void Encode(nl::Batch& b, const RtOp& op, int32_t index) {
  switch (op.kind) {
    case Kind::kAddLink: rtnl::EncodeNewLink(b, op.name, op.link_kind, op.mtu, op.exist); break;
    case Kind::kDelLink: rtnl::EncodeDelLink(b, op.index, op.name); break;
    case Kind::kSetLink: rtnl::EncodeSetLink(b, op.index, op.name, op.up, op.alias); break;
    case Kind::kAddAddr: rtnl::EncodeNewAddr(b, index, op.addr, op.prefixlen, op.exist, op.addr_proto); break;
    case Kind::kDelAddr: rtnl::EncodeDelAddr(b, index, op.addr, op.prefixlen); break;
    case Kind::kAddRoute:
    case Kind::kDelRoute: {
      rtnl::Route r = op.route;
      r.oif = index;
      if (op.kind == Kind::kAddRoute) rtnl::EncodeNewRoute(b, r, op.exist);
      else rtnl::EncodeDelRoute(b, r);
      break;
    }
  }
}

std::map<std::string, int32_t> LinkIndexes(nl::Socket& sock) {
  nl::Batch b;
  rtnl::EncodeDumpLinks(b);
  std::map<std::string, int32_t> out;
  DumpDecoded(sock, b, "RTM_GETLINK", rtnl::DecodeLink, [&](rtnl::Link&& l) { out[l.name] = l.index; });
  return out;
}

struct ApplyWork {
  std::vector<RtOp> ops;
  nl::TransactOptions opts;
  BatchOutcome outcome;
};

// Runs the ops in order. Address ops need link indexes: names are resolved with one link dump,
// redone only after an op that creates or deletes a link. Requests between those points share
// one Transact (many per sendmsg, or one at a time with stop_on_error).
void RunApply(nl::Socket& sock, ApplyWork& w) {
  const size_t n = w.ops.size();
  nl::TransactResult& all = w.outcome.res;
  all.results.resize(n);
  std::map<std::string, int32_t> idx;
  bool fresh = false;
  size_t i = 0;
  bool stopped = false;
  while (i < n && !stopped) {
    nl::Batch b;
    std::vector<size_t> req_op;
    size_t j = i;
    for (; j < n; j++) {
      const RtOp& op = w.ops[j];
      int32_t index = op.index;
      if (NeedsIndex(op)) {
        auto it = idx.find(op.name);
        if (it == idx.end() && !fresh) {
          if (!b.empty()) break;  // send what precedes first: it may create the link
          idx = LinkIndexes(sock);
          fresh = true;
          it = idx.find(op.name);
        }
        if (it == idx.end()) {
          // As the kernel would answer a missing device.
          if (!b.empty()) break;
          all.results[j].outcome = nl::Outcome::kError;
          all.results[j].status.error = ENODEV;
          all.results[j].status.extack = "no link named " + op.name;
          if (all.first_error == SIZE_MAX) all.first_error = j;
          if (w.opts.stop_on_error) {
            stopped = true;
            j++;
            break;
          }
          continue;
        }
        index = it->second;
      }
      Encode(b, op, index);
      req_op.push_back(j);
      if (op.kind == Kind::kAddLink || op.kind == Kind::kDelLink) {
        fresh = false;  // names may map differently now
        idx.clear();
        j++;
        break;
      }
    }
    if (!b.empty()) {
      nl::TransactResult r = sock.Transact(b, w.opts);
      all.sendmsg_calls += r.sendmsg_calls;
      for (size_t k = 0; k < req_op.size(); k++) {
        all.results[req_op[k]] = std::move(r.results[k]);
        if (all.results[req_op[k]].outcome == nl::Outcome::kError && all.first_error > req_op[k])
          all.first_error = req_op[k];
      }
      if (w.opts.stop_on_error && (r.first_error != SIZE_MAX ||
                                   std::any_of(r.results.begin(), r.results.end(), [](const nl::RequestResult& x) {
                                     return x.outcome == nl::Outcome::kNoReply;
                                   })))
        stopped = true;
    }
    i = j;
  }
  w.outcome.op_names.reserve(n);
  for (const RtOp& op : w.ops) w.outcome.op_names.push_back(OpName(op));
}

// A listing of objects that refer to links by index, with the links' names (one link dump).
template <class T>
struct WithLinkNames {
  std::vector<T> items;
  std::map<int32_t, std::string> names;

  void ReadNames(nl::Socket& sock) {
    for (const auto& [name, index] : LinkIndexes(sock)) names[index] = name;
  }
  const std::string& Name(int32_t index) const {
    static const std::string none;
    auto it = names.find(index);
    return it == names.end() ? none : it->second;
  }
};

class RtnlHandle : public ChannelHandle<RtnlHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "RtnlHandle",
           {Method<&RtnlHandle::Links>("links"), Method<&RtnlHandle::GetLink>("link"),
            Method<&RtnlHandle::Addresses>("addresses"), Method<&RtnlHandle::Routes>("routes"),
            Method<&RtnlHandle::Apply>("apply")});
  }

  explicit RtnlHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_ROUTE) {}

 private:
  Napi::Value Links(const Napi::CallbackInfo& info) {
    return OnChannel<std::vector<rtnl::Link>>(info.Env(), [](Channel& ch) {
          nl::Batch b;
          rtnl::EncodeDumpLinks(b);
          return DumpAll(ch.Sock(), b, "RTM_GETLINK", rtnl::DecodeLink);
        },
        [](Napi::Env env, std::vector<rtnl::Link>& links) -> Napi::Value {
          return ArrayOf(env, links, [&](const rtnl::Link& l) { return LinkToJs(env, l); });
        });
  }

  // link(name) -> Link | null
  Napi::Value GetLink(const Napi::CallbackInfo& info) {
    const std::string name = LinkNameArg(info.Env(), info[0], "RTM_GETLINK");
    return OnChannel<std::vector<rtnl::Link>>(info.Env(), [name](Channel& ch) {
          nl::Batch b;
          rtnl::EncodeGetLink(b, name);
          nl::TransactResult r = ch.Sock().Transact(b, nl::TransactOptions{});
          std::vector<rtnl::Link> out;
          const nl::RequestResult& rr = r.results[0];
          if (rr.outcome == nl::Outcome::kError && rr.status.error == ENODEV) return out;
          if (rr.outcome != nl::Outcome::kOk) throw nl::Exception(KernelError("RTM_GETLINK " + name, -1, rr.status));
          for (const nl::DataReply& d : r.data) out.push_back(Decoded(Msg(d.bytes), rtnl::DecodeLink, "RTM_GETLINK"));
          return out;
        },
        [](Napi::Env env, std::vector<rtnl::Link>& l) -> Napi::Value {
          return l.empty() ? env.Null() : LinkToJs(env, l[0]);
        });
  }

  // addresses({ family?: 'inet'|'inet6', link?: name }) -> every address with its link's name
  // (one RTM_GETADDR dump + one RTM_GETLINK dump for the names).
  Napi::Value Addresses(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint8_t family = AF_UNSPEC;
    std::string link;
    const Napi::Value f = Opt(info[0], "family");
    if (IsSet(f)) family = InetFamilyArg(env, f, "RTM_GETADDR");
    const Napi::Value l = Opt(info[0], "link");
    if (IsSet(l)) link = LinkNameArg(env, l, "RTM_GETADDR");
    return OnChannel<WithLinkNames<rtnl::Address>>(env, [family, link](Channel& ch) {
          WithLinkNames<rtnl::Address> out;
          out.ReadNames(ch.Sock());
          int32_t want = 0;
          if (!link.empty()) {
            for (const auto& [index, name] : out.names)
              if (name == link) want = index;
            if (!want) {
              nl::Status st;
              st.error = ENODEV;
              st.extack = "no link named " + link;
              throw nl::Exception(KernelError("RTM_GETADDR dev " + link, -1, st));
            }
          }
          nl::Batch b;
          rtnl::EncodeDumpAddrs(b, family);
          DumpDecoded(ch.Sock(), b, "RTM_GETADDR", rtnl::DecodeAddr, [&](rtnl::Address&& a) {
            if (want && a.index != want) return;  // filtered here: no strict dump checking needed
            out.items.push_back(std::move(a));
          });
          return out;
        },
        [](Napi::Env env, WithLinkNames<rtnl::Address>& l) -> Napi::Value {
          return ArrayOf(env, l.items, [&](const rtnl::Address& a) { return AddressToJs(env, a, l.Name(a.index)); });
        });
  }

  // routes({ family?, table?, protocol?, type? }) -> the routes that match, with link names (one
  // RTM_GETLINK dump for the names + one RTM_GETROUTE dump). The kernel filters the dump when it
  // supports strict checking (4.20+; every GET this handle sends is strict-clean), so a node
  // with 50k VIP addresses does not copy its 50k local routes out to find ipvsync's few; the
  // same filter runs here too, for older kernels.
  Napi::Value Routes(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    RouteFilter f;
    const Napi::Value fam = Opt(info[0], "family");
    if (IsSet(fam)) f.family = InetFamilyArg(env, fam, "RTM_GETROUTE");
    if (IsSet(Opt(info[0], "table"))) {
      f.by_table = true;
      f.table = NamedArg(env, Opt(info[0], "table"), kTables, 0, 4294967295.0, "RTM_GETROUTE", "table");
    }
    if (IsSet(Opt(info[0], "protocol"))) {
      f.by_protocol = true;
      f.protocol = static_cast<uint8_t>(NamedArg(env, Opt(info[0], "protocol"), kProtocols, 0, 255, "RTM_GETROUTE", "protocol"));
    }
    if (IsSet(Opt(info[0], "type"))) {
      f.by_type = true;
      f.type = static_cast<uint8_t>(NamedArg(env, Opt(info[0], "type"), kRouteTypes, 0, 0, "RTM_GETROUTE", "route type"));
    }
    return OnChannel<WithLinkNames<rtnl::Route>>(env, [f](Channel& ch) {
          WithLinkNames<rtnl::Route> out;
          out.ReadNames(ch.Sock());
          if (!ch.strict_check_tried) {
            ch.strict_check_tried = true;
            ch.strict_check = ch.Sock().EnableStrictCheck();
          }
          rtnl::RouteDumpFilter kf;
          kf.family = f.family;
          if (ch.strict_check) {
            if (f.by_table) kf.table = f.table;
            if (f.by_protocol) kf.protocol = f.protocol;
            if (f.by_type) kf.type = f.type;
          }
          nl::Batch b;
          rtnl::EncodeDumpRoutes(b, kf);
          try {
            ch.Sock().Dump(b, "RTM_GETROUTE", [&](const nlmsghdr* h) {
            // An AF_UNSPEC dump also returns other families' routes (IPMR, MPLS): not ours.
            if (h->nlmsg_len >= NLMSG_LENGTH(sizeof(rtmsg))) {
              const uint8_t fam = static_cast<const rtmsg*>(NLMSG_DATA(h))->rtm_family;
              if (fam != AF_INET && fam != AF_INET6) return;
            }
            const rtnl::Route r = Decoded(h, rtnl::DecodeRoute, "RTM_GETROUTE");
            if (f.Keeps(r)) out.items.push_back(r);
            });
          } catch (const nl::Exception& e) {
            // A single-family dump filtered by a table that does not exist: no routes.
            if (!(kf.table && kf.family != AF_UNSPEC && e.error().errnum == ENOENT)) throw;
          }
          return out;
        },
        [](Napi::Env env, WithLinkNames<rtnl::Route>& l) -> Napi::Value {
          return ArrayOf(env, l.items, [&](const rtnl::Route& r) { return RouteToJs(env, r, l.Name(r.oif)); });
        });
  }

  // apply(ops, opts) -> { statuses, errors, sendmsgCalls }
  Napi::Value Apply(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto w = std::make_shared<ApplyWork>();
    w->ops = OpsArg(env, info[0], "rtnl apply", [&](const Napi::Value& v, uint32_t i) { return OpArg(env, v, i); });
    w->opts = BatchOptions(info[1]);
    return OnChannel<std::shared_ptr<ApplyWork>>(env, [w](Channel& ch) {
          RunApply(ch.Sock(), *w);
          return w;
        },
        [](Napi::Env env, std::shared_ptr<ApplyWork>& w) { return BatchOutcomeToJs(env, w->outcome); });
  }
};

Napi::Value DecodeLink(const Napi::CallbackInfo& info) {
  return LinkToJs(info.Env(), DecodedArg(info, "decodeLink", rtnl::DecodeLink));
}

Napi::Value DecodeAddrHook(const Napi::CallbackInfo& info) {
  return AddressToJs(info.Env(), DecodedArg(info, "decodeAddr", rtnl::DecodeAddr), "");
}

// encodeOps(ops) -> the requests as sent (golden form); address ops need an explicit index.
Napi::Value EncodeOpsHook(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array arr = ArrayArg(env, info[0], "encodeOps", "expected an array of ops");
  return EncodedBytes(env, [&](nl::Batch& b) {
    for (uint32_t i = 0; i < arr.Length(); i++) {
      RtOp op = AtOp(env, i, -1, [&] { return OpArg(env, arr.Get(i), i); });
      if (NeedsIndex(op)) ThrowInvalid(env, "encodeOps", "address and route ops name their link by index here");
      Encode(b, op, op.index);
    }
  });
}

Napi::Value DecodeRouteHook(const Napi::CallbackInfo& info) {
  return RouteToJs(info.Env(), DecodedArg(info, "decodeRoute", rtnl::DecodeRoute), "");
}

Napi::Value EncodeDumpRoutesHook(const Napi::CallbackInfo& info) {
  // encodeDumpRoutes({ family?, table?, protocol?, type? } as numbers)
  rtnl::RouteDumpFilter f;
  auto num = [&](const char* k) { return NumberOr(Opt(info[0], k), 0); };
  f.family = static_cast<uint8_t>(num("family"));
  f.table = num("table");
  f.protocol = static_cast<uint8_t>(num("protocol"));
  f.type = static_cast<uint8_t>(num("type"));
  return EncodedBytes(info.Env(), [&](nl::Batch& b) { rtnl::EncodeDumpRoutes(b, f); });
}

}  // namespace

void InitRtnl(Napi::Env env, Napi::Object exports) {
  RtnlHandle::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "rtnl");
  codec.Set("decodeLink", Function<DecodeLink>(env, "decodeLink"));
  codec.Set("decodeAddr", Function<DecodeAddrHook>(env, "decodeAddr"));
  codec.Set("encodeOps", Function<EncodeOpsHook>(env, "encodeOps"));
  codec.Set("decodeRoute", Function<DecodeRouteHook>(env, "decodeRoute"));
  codec.Set("encodeDumpRoutes", Function<EncodeDumpRoutesHook>(env, "encodeDumpRoutes"));
}

}  // namespace addon
