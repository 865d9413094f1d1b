// ipset over nfnetlink (NFNL_SUBSYS_IPSET): pure codec, structs <-> messages.
// include/uapi/linux/netfilter/ipset/ip_set.h; net/netfilter/ipset/ip_set_core.c.
// Wire rules the kernel enforces: nests carry NLA_F_NESTED, addresses are nests of
// IPADDR_IPV4/IPV6, every multi-byte CADT/create attribute carries NLA_F_NET_BYTEORDER, and
// every request carries ATTR_PROTOCOL (otherwise IPSET_ERR_PROTOCOL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/inet.h"
#include "netlink/message.h"

namespace ipset {

constexpr uint8_t kProtocol = 7;     // what we speak (libipset 7.x)
constexpr uint8_t kProtocolMin = 6;  // the oldest we accept
constexpr size_t kMaxNameLen = 31;   // IPSET_MAXNAMELEN - 1
constexpr size_t kMaxCommentLen = 255;
// One ADT message stays well below the u16 length of its ADT nest.
constexpr size_t kMaxAdtBytes = 32 * 1024;

// NFPROTO_* as ipset uses them in ATTR_FAMILY.
constexpr uint8_t kFamilyUnspec = 0;
constexpr uint8_t kFamilyInet = 2;
constexpr uint8_t kFamilyInet6 = 10;

enum class Dim : uint8_t { kNone, kIp, kNet, kPort };

// A set type whose element is a tuple of up to three of ip / net / port. Every such type shares
// one codec; types with macs, marks, interfaces or set references are not modelled.
struct TypeInfo {
  const char* name;
  Dim dims[3];
  bool bitmap;  // bitmap:* (range instead of family/hashsize/maxelem)
};

// nullptr for a type this codec does not model.
const TypeInfo* FindType(const std::string& name);
int DimCount(const TypeInfo& t);
bool HasDim(const TypeInfo& t, Dim d);

struct Member {
  inet::Addr ip;        // first ip/net component
  uint8_t cidr = 0;     // 0 = not sent (host)
  uint8_t proto = 0;    // IPPROTO_*, for ip,port types (sent always; tcp when unspecified)
  uint16_t port = 0;    // port, or (type << 8 | code) for icmp/icmpv6
  bool has_port = false;
  inet::Addr ip2;       // third component (ip or net)
  uint8_t cidr2 = 0;
  bool has_timeout = false;
  uint32_t timeout = 0;
  bool has_counters = false;
  uint64_t packets = 0, bytes = 0;
  bool has_comment = false;
  std::string comment;
  bool nomatch = false;
  // skbinfo extension (decoded for save fidelity; encoded when present)
  bool has_skbmark = false;
  uint32_t skbmark = 0, skbmarkmask = 0;
  bool has_skbprio = false;
  uint32_t skbprio = 0;
  bool has_skbqueue = false;
  uint16_t skbqueue = 0;
  uint32_t lineno = 0;  // restore line, sent as CADT_LINENO when non-zero
};

// Create options and, when decoded from a LIST reply, the kernel's header data.
struct SetHeader {
  std::string name;
  std::string type;
  uint8_t family = kFamilyInet;
  uint8_t revision = 0;
  bool has_hashsize = false;
  uint32_t hashsize = 0;
  bool has_maxelem = false;
  uint32_t maxelem = 0;
  bool has_netmask = false;
  uint8_t netmask = 0;
  bool has_timeout = false;
  uint32_t timeout = 0;
  bool counters = false, comment = false, skbinfo = false, forceadd = false;
  bool has_range = false;  // bitmap:port
  uint16_t port_from = 0, port_to = 0;
  // reported by the kernel only
  bool has_bucketsize = false;
  uint8_t bucketsize = 0;
  bool has_initval = false;
  uint32_t initval = 0;
  uint32_t references = 0, memsize = 0, elements = 0;
  int32_t index = -1;
};

struct ListedSet {
  SetHeader header;
  std::vector<Member> members;
};

// ---- encoders: each appends one request (or several for AppendAdt) -----------------------
void EncodeProtocol(nl::Batch& b);
void EncodeType(nl::Batch& b, uint8_t proto, const std::string& type, uint8_t family);
void EncodeCreate(nl::Batch& b, uint8_t proto, const SetHeader& h, bool exist);
// DESTROY, FLUSH, HEADER (name2 empty) and RENAME, SWAP (name2 set).
void EncodeNamed(nl::Batch& b, uint8_t proto, uint8_t cmd, const std::string& name,
                 const std::string& name2);
// ADD or DEL of members[from, to) in ATTR_ADT messages of at most kMaxAdtBytes; appends the
// [first, end) member range of every message it starts to `ranges`.
void EncodeAdt(nl::Batch& b, uint8_t proto, uint8_t cmd, const std::string& set, const TypeInfo& t,
               const std::vector<Member>& members, size_t from, size_t to, bool exist,
               std::vector<std::pair<size_t, size_t>>* ranges, size_t max_bytes = kMaxAdtBytes);
// TEST takes exactly one element (ATTR_DATA) per message.
void EncodeTest(nl::Batch& b, uint8_t proto, const std::string& set, const TypeInfo& t, const Member& m);
// LIST dump request: all sets, or one when name is non-empty. Sent without NLM_F_ACK: the kernel
// would otherwise answer a failing dump start twice.
void EncodeList(nl::Batch& b, uint8_t proto, const std::string& name);

// ---- decoders (false + why on malformed input) --------------------------------------------
bool DecodeProtocol(const nlmsghdr* h, uint8_t* max, uint8_t* min, std::string* why);
bool DecodeType(const nlmsghdr* h, uint8_t* rev_max, uint8_t* rev_min, std::string* why);
// One LIST/HEADER message: the set name, its header when the message carries one
// (*has_header), and the members it carries (appended).
bool DecodeList(const nlmsghdr* h, SetHeader* header, bool* has_header, std::vector<Member>* members,
                std::string* why);

// Folds a dump's messages into sets: a set whose members span several messages arrives as a
// header message followed by member-only messages with the same name.
class ListAccumulator {
 public:
  bool Add(const nlmsghdr* h, std::string* why);
  std::vector<ListedSet>& sets() { return sets_; }

 private:
  std::vector<ListedSet> sets_;
};

// ---- errors --------------------------------------------------------------------------------
// "IPSET_ERR_EXIST" for 4103 etc.; type-specific codes (4352+) need the set type's kind
// (bitmap or hash); returns "" for a plain errno.
std::string ErrorName(int code, bool bitmap);
// ipset's own wording for an error of command `cmd` (as libipset prints it), or "" when ipset
// has none (the caller then falls back to strerror).
std::string ErrorMessage(int code, uint8_t cmd, bool bitmap);
const char* CommandName(uint8_t cmd);

}  // namespace ipset
