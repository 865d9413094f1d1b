// conntrack over nfnetlink (NFNL_SUBSYS_CTNETLINK): pure codec and flow filter.
// include/uapi/linux/netfilter/nfnetlink_conntrack.h; net/netfilter/nf_conntrack_netlink.c.
#pragma once

#include <cstdint>
#include <string>

#include "common/inet.h"
#include "netlink/message.h"

namespace ct {

struct Tuple {
  inet::Addr src, dst;
  uint8_t proto = 0;
  bool has_ports = false;  // tcp, udp, sctp, udplite, dccp
  uint16_t sport = 0, dport = 0;
  bool has_icmp = false;
  uint16_t icmp_id = 0;
  uint8_t icmp_type = 0, icmp_code = 0;
};

struct Flow {
  uint8_t family = 0;  // AF_INET / AF_INET6
  Tuple orig, reply;
  uint32_t status = 0;   // IPS_*
  uint32_t timeout = 0;  // seconds left
  uint32_t mark = 0;
  uint32_t id = 0;
  uint32_t use = 0;
  uint16_t zone = 0;
  bool has_tcp_state = false;
  uint8_t tcp_state = 0;
  bool has_counters = false;
  uint64_t orig_packets = 0, orig_bytes = 0, reply_packets = 0, reply_bytes = 0;
};

// Which flows: every set field must match. Addresses compare by family and bytes.
struct Filter {
  uint8_t family = 0;  // 0 = both
  uint8_t proto = 0;   // 0 = any
  bool has_orig_src = false, has_orig_dst = false, has_reply_src = false;
  inet::Addr orig_src, orig_dst, reply_src;
  int32_t orig_dport = -1;   // -1 = any
  int32_t reply_sport = -1;  // -1 = any
};

bool Matches(const Flow& f, const Filter& filter);

// IPCTNL_MSG_CT_GET dump of one family (AF_UNSPEC: all). The kernel filters by family itself;
// the rest of a Filter is applied to decoded flows (as conntrack-tools 1.4.7 does).
void EncodeDump(nl::Batch& b, uint8_t family);
// IPCTNL_MSG_CT_DELETE of one flow by its original tuple, zone and id (an entry re-created
// with the same tuple in between has a new id and survives).
void EncodeDelete(nl::Batch& b, const Flow& f);
bool DecodeFlow(const nlmsghdr* h, Flow* out, std::string* why);

const char* TcpStateName(uint8_t s);

}  // namespace ct
