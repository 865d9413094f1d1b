// rtnetlink links (RTM_*LINK): codec only.
#pragma once

#include <cstdint>
#include <string>

#include "netlink/message.h"

namespace rtnl {

constexpr size_t kMaxLinkName = 15;  // IFNAMSIZ - 1

struct Link {
  int32_t index = 0;
  std::string name;
  uint32_t flags = 0;     // IFF_*
  uint16_t type = 0;      // ARPHRD_*
  uint32_t mtu = 0;
  std::string kind;       // IFLA_INFO_KIND ("dummy", "veth" ...), empty for none
  uint8_t operstate = 0;  // IF_OPER_*
  std::string address;    // hardware address as aa:bb:..., empty when none
  std::string alias;      // IFLA_IFALIAS, empty when none
};

constexpr size_t kMaxLinkAlias = 255;  // IFALIASZ - 1

void EncodeDumpLinks(nl::Batch& b);
bool DecodeLink(const nlmsghdr* h, Link* out, std::string* why);

// RTM_NEWLINK creating a link of `kind` (dummy, bridge: no kind-specific data). exist=false
// asks for EEXIST when it is there already (NLM_F_EXCL); mtu 0 = the kind's default.
void EncodeNewLink(nl::Batch& b, const std::string& name, const std::string& kind, uint32_t mtu, bool exist);
// RTM_NEWLINK changing a link: up or down when `up` is 1 or 0 (-1: left), and its alias
// (IFLA_IFALIAS, as `ip link set … alias A`) when not empty; the kernel takes an alias only on
// a link that exists, not in the request that creates it. The link is named by index when
// index > 0 (as iproute2 does), by IFLA_IFNAME otherwise.
void EncodeSetLink(nl::Batch& b, int32_t index, const std::string& name, int up, const std::string& alias);
void EncodeDelLink(nl::Batch& b, int32_t index, const std::string& name);
// RTM_GETLINK of one link by name (answered with RTM_NEWLINK, or ENODEV).
void EncodeGetLink(nl::Batch& b, const std::string& name);

}  // namespace rtnl
