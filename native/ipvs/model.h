// Plain structs for IPVS objects (include/uapi/linux/ip_vs.h), shared by the codec and the
// binding. Addresses use the kernel's layout: 16 bytes, IPv4 in the first 4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ipvs {

constexpr uint16_t kAfInet = 2;
constexpr uint16_t kAfInet6 = 10;

// Service flags (IP_VS_SVC_F_*).
constexpr uint32_t kFlagPersistent = 0x1;
constexpr uint32_t kFlagHashed = 0x2;  // kernel-internal, always set in replies
constexpr uint32_t kFlagOnePacket = 0x4;
constexpr uint32_t kFlagSched1 = 0x8;   // sh-fallback / mh-fallback
constexpr uint32_t kFlagSched2 = 0x10;  // sh-port / mh-port
constexpr uint32_t kFlagSched3 = 0x20;

// Forwarding methods (IP_VS_CONN_F_*).
enum Fwd : uint32_t { kMasq = 0, kLocal = 1, kTunnel = 2, kDroute = 3 };
// Tunnel types and flags (IP_VS_CONN_F_TUNNEL_TYPE_*, IP_VS_TUNNEL_ENCAP_FLAG_*).
enum TunType : uint8_t { kIpip = 0, kGue = 1, kGre = 2 };
constexpr uint16_t kTunCsum = 0x1;
constexpr uint16_t kTunRemCsum = 0x2;

// Daemon states (IP_VS_STATE_*).
constexpr uint32_t kStateMaster = 1;
constexpr uint32_t kStateBackup = 2;

struct Stats {
  uint64_t conns = 0, inpkts = 0, outpkts = 0, inbytes = 0, outbytes = 0;
  uint64_t cps = 0, inpps = 0, outpps = 0, inbps = 0, outbps = 0;
};

// Identity: af + (fwmark | protocol + addr + port).
struct ServiceKey {
  uint16_t af = kAfInet;
  uint32_t fwmark = 0;  // non-zero: a firewall-mark service
  uint16_t protocol = 0;
  uint8_t addr[16]{};
  uint16_t port = 0;  // host order
};

struct Service {
  ServiceKey key;
  std::string sched;
  std::string pe;
  uint32_t flags = 0;
  uint32_t timeout = 0;  // persistence timeout, seconds
  // IPv4: the mask as it sits in memory (network order bytes: 255.255.255.0 = ff ff ff 00);
  // IPv6: the prefix length.
  uint32_t netmask = 0xffffffff;
  // Read-only, from dumps.
  bool have_stats = false;
  bool stats64 = false;  // came from IPVS_SVC_ATTR_STATS64 (else 32-bit STATS)
  Stats stats;
};

struct Dest {
  uint16_t af = 0;  // IPVS_DEST_ATTR_ADDR_FAMILY; 0 = the service's
  uint8_t addr[16]{};
  uint16_t port = 0;  // host order
  uint32_t fwd = kMasq;
  int64_t weight = 1;
  uint32_t u_thresh = 0;
  uint32_t l_thresh = 0;
  uint8_t tun_type = kIpip;
  uint16_t tun_port = 0;  // host order
  uint16_t tun_flags = 0;
  // Read-only, from dumps.
  bool have_tun = false;  // the kernel reported tunnel attributes (5.2+)
  uint32_t active_conns = 0, inact_conns = 0, persist_conns = 0;
  bool have_stats = false;
  bool stats64 = false;
  Stats stats;
};

struct Timeouts {
  uint32_t tcp = 0, tcp_fin = 0, udp = 0;  // seconds; 0 in a SET = leave unchanged
};

struct Daemon {
  uint32_t state = kStateMaster;
  std::string mcast_ifn;
  uint32_t sync_id = 0;
  // Newer attributes (4.3+); 0 / af 0 = not sent, kernel default.
  uint16_t sync_maxlen = 0;
  uint16_t mcast_af = 0;
  uint8_t mcast_group[16]{};
  uint16_t mcast_port = 0;
  uint8_t mcast_ttl = 0;
};

enum class OpKind : uint8_t {
  kAddService,
  kUpdateService,
  kDeleteService,
  kAddDest,
  kUpdateDest,
  kDeleteDest,
  kFlush,
  kZero,  // all counters, or one service's when has_service
  kSetTimeouts,
  kStartDaemon,
  kStopDaemon,
};

struct Op {
  OpKind kind = OpKind::kFlush;
  bool has_service = true;
  Service svc;
  Dest dest;
  Timeouts timeouts;
  Daemon daemon;
};

}  // namespace ipvs
