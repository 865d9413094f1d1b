#include "rtnl/link.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <cstdio>

namespace rtnl {

void EncodeDumpLinks(nl::Batch& b) {
  b.Begin(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  b.Header(&ifi, sizeof ifi);
  // Ask for the compact form without per-VF statistics.
  b.Attrs().U32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
}

bool DecodeLink(const nlmsghdr* h, Link* out, std::string* why) {
  if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)))
    return nl::Refuse(why, "not an RTM_NEWLINK message");
  const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(h));
  out->index = ifi->ifi_index;
  out->flags = ifi->ifi_flags;
  out->type = ifi->ifi_type;
  nl::AttrReader r = nl::Attributes(h, sizeof(ifinfomsg));
  while (r.Next()) {
    switch (r.type()) {
      case IFLA_IFNAME: out->name = r.Str(); break;
      case IFLA_MTU: out->mtu = r.U32(); break;
      case IFLA_OPERSTATE: out->operstate = r.U8(); break;
      case IFLA_IFALIAS: out->alias = r.Str(); break;
      case IFLA_ADDRESS: {
        std::string s;
        char part[4];
        for (size_t i = 0; i < r.len(); i++) {
          std::snprintf(part, sizeof part, i ? ":%02x" : "%02x", r.data()[i]);
          s += part;
        }
        out->address = s;
        break;
      }
      case IFLA_LINKINFO: {
        nl::AttrReader li = r.Nested();
        while (li.Next())
          if (li.type() == IFLA_INFO_KIND) out->kind = li.Str();
        break;
      }
      default: break;
    }
  }
  return r.ok(why);
}

}  // namespace rtnl

namespace rtnl {

namespace {

void LinkHeader(nl::Batch& b, int32_t index, uint32_t flags, uint32_t change) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  ifi.ifi_flags = flags;
  ifi.ifi_change = change;
  b.Header(&ifi, sizeof ifi);
}

}  // namespace

void EncodeNewLink(nl::Batch& b, const std::string& name, const std::string& kind, uint32_t mtu, bool exist) {
  b.Begin(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (exist ? 0 : NLM_F_EXCL));
  LinkHeader(b, 0, 0, 0);
  nl::AttrWriter w = b.Attrs();
  w.Str(IFLA_IFNAME, name);
  if (mtu) w.U32(IFLA_MTU, mtu);
  const size_t li = w.Begin(IFLA_LINKINFO);
  // iproute2 sends the kind without its NUL; the kernel's NLA_STRING policy takes both.
  w.Put(IFLA_INFO_KIND, kind.data(), kind.size());
  w.End(li);
}

void EncodeSetLink(nl::Batch& b, int32_t index, const std::string& name, int up, const std::string& alias) {
  b.Begin(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
  LinkHeader(b, index, up == 1 ? IFF_UP : 0, up >= 0 ? IFF_UP : 0);
  nl::AttrWriter w = b.Attrs();
  // iproute2 sends the alias first, without its NUL
  if (!alias.empty()) w.Put(IFLA_IFALIAS, alias.data(), alias.size());
  if (index <= 0) w.Str(IFLA_IFNAME, name);
}

void EncodeDelLink(nl::Batch& b, int32_t index, const std::string& name) {
  b.Begin(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
  LinkHeader(b, index, 0, 0);
  if (index <= 0) b.Attrs().Str(IFLA_IFNAME, name);
}

void EncodeGetLink(nl::Batch& b, const std::string& name) {
  b.Begin(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK);
  LinkHeader(b, 0, 0, 0);
  nl::AttrWriter w = b.Attrs();
  w.Str(IFLA_IFNAME, name);
  w.U32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
}

}  // namespace rtnl
