#include "rtnl/addr.h"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstring>

namespace rtnl {

namespace {

void AddrMessage(nl::Batch& b, uint16_t type, uint16_t flags, int32_t index, const inet::Addr& a, uint8_t prefixlen,
                 uint8_t proto) {
  b.Begin(type, flags);
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(a.family);
  ifa.ifa_prefixlen = prefixlen;
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<uint32_t>(index);
  b.Header(&ifa, sizeof ifa);
  nl::AttrWriter w = b.Attrs();
  w.Put(IFA_LOCAL, a.bytes, a.size());
  w.Put(IFA_ADDRESS, a.bytes, a.size());
  if (proto != 0) w.U8(IFA_PROTO, proto);
}

bool ReadAddr(nl::AttrReader& r, uint8_t family, inet::Addr* out) {
  *out = inet::Addr{};
  out->family = family;
  return r.Fixed(out->bytes, family == AF_INET6 ? 16 : 4);
}

}  // namespace

void EncodeNewAddr(nl::Batch& b, int32_t index, const inet::Addr& a, uint8_t prefixlen, bool exist, uint8_t proto) {
  AddrMessage(b, RTM_NEWADDR, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (exist ? NLM_F_REPLACE : NLM_F_EXCL), index, a,
              prefixlen, proto);
}

void EncodeDelAddr(nl::Batch& b, int32_t index, const inet::Addr& a, uint8_t prefixlen) {
  AddrMessage(b, RTM_DELADDR, NLM_F_REQUEST | NLM_F_ACK, index, a, prefixlen, 0);
}

void EncodeDumpAddrs(nl::Batch& b, uint8_t family) {
  b.Begin(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP);
  ifaddrmsg ifa{};
  ifa.ifa_family = family;
  b.Header(&ifa, sizeof ifa);
}

bool DecodeAddr(const nlmsghdr* h, Address* out, std::string* why) {
  if (h->nlmsg_type != RTM_NEWADDR || h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg)))
    return nl::Refuse(why, "not an RTM_NEWADDR message");
  const auto* ifa = static_cast<const ifaddrmsg*>(NLMSG_DATA(h));
  if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
    return nl::Refuse(why, "address family " + std::to_string(ifa->ifa_family) + " is neither AF_INET nor AF_INET6");
  out->index = static_cast<int32_t>(ifa->ifa_index);
  out->prefixlen = ifa->ifa_prefixlen;
  out->scope = ifa->ifa_scope;
  out->flags = ifa->ifa_flags;
  bool has_local = false, has_address = false;
  inet::Addr address;
  nl::AttrReader r = nl::Attributes(h, sizeof(ifaddrmsg));
  while (r.Next()) {
    switch (r.type()) {
      case IFA_LOCAL: has_local = ReadAddr(r, ifa->ifa_family, &out->local); break;
      case IFA_ADDRESS: has_address = ReadAddr(r, ifa->ifa_family, &address); break;
      case IFA_LABEL: out->label = r.Str(); break;
      case IFA_FLAGS: out->flags = r.U32(); break;
      case IFA_PROTO: out->proto = r.U8(); break;
      case IFA_CACHEINFO: {
        ifa_cacheinfo ci{};
        if (r.Fixed(&ci, sizeof ci)) {
          out->valid_lft = ci.ifa_valid;
          out->preferred_lft = ci.ifa_prefered;
        }
        break;
      }
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!has_local && !has_address) return nl::Refuse(why, "RTM_NEWADDR without IFA_LOCAL or IFA_ADDRESS");
  if (!has_local) {
    out->local = address;
  } else if (has_address && std::memcmp(address.bytes, out->local.bytes, 16) != 0) {
    out->peer = address;
  }
  return true;
}

}  // namespace rtnl
