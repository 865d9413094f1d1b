// rtnetlink routes (RTM_*ROUTE): codec only.
#pragma once

#include <cstdint>
#include <string>

#include "common/inet.h"
#include "netlink/message.h"

namespace rtnl {

// The rtm_protocol value that marks routes ipvsync owns. Unassigned in rtnetlink.h and in
// iproute2's rt_protos (which reserves 0-18, 42, 99, 186-189, 192); the engine only ever
// deletes routes that carry it.
constexpr uint8_t kIpvsyncProtocol = 249;

struct Route {
  uint8_t family = 0;  // AF_INET, AF_INET6
  inet::Addr dst;      // the network (family set even for a default route)
  uint8_t dst_len = 0;
  uint32_t table = 0;     // RTA_TABLE when present, else rtm_table
  uint8_t type = 0;       // RTN_*
  uint8_t scope = 0;      // RT_SCOPE_*
  uint8_t protocol = 0;   // RTPROT_*
  uint32_t flags = 0;     // RTM_F_*, RTNH_F_*
  int32_t oif = 0;        // RTA_OIF (0: none)
  bool has_priority = false;
  uint32_t priority = 0;  // RTA_PRIORITY (the metric)
  inet::Addr prefsrc;     // RTA_PREFSRC (family 0: none)
  inet::Addr gateway;     // RTA_GATEWAY (family 0: none)
};

// RTM_NEWROUTE as iproute2 sends it: rtmsg, then RTA_DST, RTA_PREFSRC, RTA_GATEWAY,
// RTA_PRIORITY, RTA_TABLE (only for tables >= 256; rtm_table is then RT_TABLE_UNSPEC), RTA_OIF.
// exist=false: NLM_F_CREATE|NLM_F_EXCL (EEXIST when present); exist=true: NLM_F_CREATE|NLM_F_REPLACE.
void EncodeNewRoute(nl::Batch& b, const Route& r, bool exist);
// RTM_DELROUTE: zero type/protocol/scope(RT_SCOPE_NOWHERE) fields match any route.
void EncodeDelRoute(nl::Batch& b, const Route& r);
// One dump of every route of `family` (AF_UNSPEC: every family; callers skip non-inet ones).
// On a socket with NETLINK_GET_STRICT_CHK the kernel filters by the non-zero fields of
// `filter`: table (rtm_table, or RTA_TABLE for tables >= 256), protocol, type. Without strict
// checking it ignores them (callers filter the replies themselves either way).
struct RouteDumpFilter {
  uint8_t family = 0;
  uint32_t table = 0;
  uint8_t protocol = 0;
  uint8_t type = 0;
};
void EncodeDumpRoutes(nl::Batch& b, const RouteDumpFilter& filter);
// Decodes one RTM_NEWROUTE of AF_INET or AF_INET6.
bool DecodeRoute(const nlmsghdr* h, Route* out, std::string* why);

}  // namespace rtnl
