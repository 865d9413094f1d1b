// rtnetlink addresses (RTM_*ADDR): codec only.
#pragma once

#include <cstdint>
#include <string>

#include "common/inet.h"
#include "netlink/message.h"

namespace rtnl {

struct Address {
  int32_t index = 0;     // link
  uint8_t prefixlen = 0;
  uint8_t scope = 0;     // RT_SCOPE_*
  uint32_t flags = 0;    // IFA_F_* (IFA_FLAGS when present, else ifa_flags)
  inet::Addr local;      // the address itself (IFA_LOCAL, or IFA_ADDRESS when no IFA_LOCAL)
  inet::Addr peer;       // IFA_ADDRESS when it differs from IFA_LOCAL (point-to-point)
  std::string label;     // IFA_LABEL (IPv4)
  uint32_t valid_lft = UINT32_MAX, preferred_lft = UINT32_MAX;  // IFA_CACHEINFO, s
  uint8_t proto = 0;     // IFA_PROTO (Linux 6.1+; IFAPROT_UNSPEC when absent)
};

// RTM_NEWADDR as `ip addr add ADDR/PREFIX dev IDX` sends it (IFA_LOCAL and IFA_ADDRESS).
// exist=false: NLM_F_EXCL (EEXIST when present); exist=true: NLM_F_REPLACE (no error).
// proto != 0 adds IFA_PROTO: the address carries its owner's mark (Linux 6.1+; older kernels
// ignore the attribute, as iproute2's `ip addr add … proto N` does on them).
void EncodeNewAddr(nl::Batch& b, int32_t index, const inet::Addr& a, uint8_t prefixlen, bool exist, uint8_t proto = 0);
void EncodeDelAddr(nl::Batch& b, int32_t index, const inet::Addr& a, uint8_t prefixlen);
// One dump of every address of `family` (AF_UNSPEC: both).
void EncodeDumpAddrs(nl::Batch& b, uint8_t family);
bool DecodeAddr(const nlmsghdr* h, Address* out, std::string* why);

}  // namespace rtnl
