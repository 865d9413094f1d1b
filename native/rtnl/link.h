// rtnetlink links (RTM_*LINK): codec only.
#pragma once

#include <cstdint>
#include <string>

#include "netlink/message.h"

namespace rtnl {

struct Link {
  int32_t index = 0;
  std::string name;
  uint32_t flags = 0;     // IFF_*
  uint16_t type = 0;      // ARPHRD_*
  uint32_t mtu = 0;
  std::string kind;       // IFLA_INFO_KIND ("dummy", "veth" ...), empty for none
  uint8_t operstate = 0;  // IF_OPER_*
  std::string address;    // hardware address as aa:bb:..., empty when none
};

void EncodeDumpLinks(nl::Batch& b);
bool DecodeLink(const nlmsghdr* h, Link* out, std::string* why);

}  // namespace rtnl
