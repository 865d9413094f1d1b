#include "ipset/codec.h"

#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/ipset/ip_set_bitmap.h>
#include <linux/netfilter/ipset/ip_set_hash.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ipset {

namespace {

using nl::kNested;
using nl::kNetByteOrder;

constexpr TypeInfo kTypes[] = {
    {"hash:ip", {Dim::kIp, Dim::kNone, Dim::kNone}, false},
    {"hash:ip,port", {Dim::kIp, Dim::kPort, Dim::kNone}, false},
    {"hash:ip,port,ip", {Dim::kIp, Dim::kPort, Dim::kIp}, false},
    {"hash:ip,port,net", {Dim::kIp, Dim::kPort, Dim::kNet}, false},
    {"hash:net", {Dim::kNet, Dim::kNone, Dim::kNone}, false},
    {"hash:net,port", {Dim::kNet, Dim::kPort, Dim::kNone}, false},
    {"hash:net,net", {Dim::kNet, Dim::kNet, Dim::kNone}, false},
    {"hash:net,port,net", {Dim::kNet, Dim::kPort, Dim::kNet}, false},
    {"bitmap:port", {Dim::kPort, Dim::kNone, Dim::kNone}, true},
};

uint16_t MsgType(uint8_t cmd) { return static_cast<uint16_t>((NFNL_SUBSYS_IPSET << 8) | cmd); }

// A request's start: its headers, then the protocol version every command carries first.
nl::AttrWriter Begin(nl::Batch& b, uint8_t cmd, uint16_t flags, uint8_t proto) {
  b.Begin(MsgType(cmd), flags);
  // libipset always sends AF_INET here; the set's family travels in ATTR_FAMILY.
  b.NfgenHeader(AF_INET, NFNETLINK_V0, 0);
  nl::AttrWriter w = b.Attrs();
  w.U8(IPSET_ATTR_PROTOCOL, proto);
  return w;
}

void PutAddr(nl::AttrWriter& w, uint16_t type, const inet::Addr& a) {
  const size_t nest = w.Begin(type | kNested);
  if (a.family == inet::kV6)
    w.Put(IPSET_ATTR_IPADDR_IPV6 | kNetByteOrder, a.bytes, 16);
  else
    w.Put(IPSET_ATTR_IPADDR_IPV4 | kNetByteOrder, a.bytes, 4);
  w.End(nest);
}

// The member's attributes inside a DATA nest, in ascending attribute order as libipset
// writes them (CADT_LINENO last), so our bytes equal `ipset restore`'s for the same input.
void PutMember(nl::AttrWriter& w, const TypeInfo& t, const Member& m) {
  const bool first_is_addr = t.dims[0] == Dim::kIp || t.dims[0] == Dim::kNet;
  if (first_is_addr) PutAddr(w, IPSET_ATTR_IP, m.ip);
  if (first_is_addr && m.cidr) w.U8(IPSET_ATTR_CIDR, m.cidr);
  if (HasDim(t, Dim::kPort)) w.Be16(IPSET_ATTR_PORT | kNetByteOrder, m.port);
  if (m.has_timeout) w.Be32(IPSET_ATTR_TIMEOUT | kNetByteOrder, m.timeout);
  if (HasDim(t, Dim::kPort) && !t.bitmap) w.U8(IPSET_ATTR_PROTO, m.proto);
  if (m.nomatch) w.Be32(IPSET_ATTR_CADT_FLAGS | kNetByteOrder, IPSET_FLAG_NOMATCH);
  const Dim third = DimCount(t) == 3 ? t.dims[2] : (t.dims[1] == Dim::kNet ? Dim::kNet : Dim::kNone);
  if (third != Dim::kNone) {
    PutAddr(w, IPSET_ATTR_IP2, m.ip2);
    if (m.cidr2) w.U8(IPSET_ATTR_CIDR2, m.cidr2);
  }
  if (m.has_counters) {
    w.Be64(IPSET_ATTR_BYTES | kNetByteOrder, m.bytes);
    w.Be64(IPSET_ATTR_PACKETS | kNetByteOrder, m.packets);
  }
  if (m.has_comment) w.Str(IPSET_ATTR_COMMENT, m.comment);
  if (m.has_skbmark)
    w.Be64(IPSET_ATTR_SKBMARK | kNetByteOrder, (uint64_t(m.skbmark) << 32) | m.skbmarkmask);
  if (m.has_skbprio) w.Be32(IPSET_ATTR_SKBPRIO | kNetByteOrder, m.skbprio);
  if (m.has_skbqueue) w.Be16(IPSET_ATTR_SKBQUEUE | kNetByteOrder, m.skbqueue);
  if (m.lineno) w.Be32(IPSET_ATTR_CADT_LINENO | kNetByteOrder, m.lineno);
}

bool ReadAddr(nl::AttrReader r, inet::Addr* out) {
  bool got = false;
  while (r.Next()) {
    if (r.type() == IPSET_ATTR_IPADDR_IPV4) {
      *out = inet::Addr{};
      out->family = inet::kV4;
      got = r.Fixed(out->bytes, 4);
    } else if (r.type() == IPSET_ATTR_IPADDR_IPV6) {
      *out = inet::Addr{};
      out->family = inet::kV6;
      got = r.Fixed(out->bytes, 16);
    }
  }
  if (!got && r.ok()) r.Fail("address nest without IPADDR_IPV4/IPV6");
  return got && r.ok();
}

bool ReadMember(nl::AttrReader r, Member* m) {
  while (r.Next()) {
    switch (r.type()) {
      case IPSET_ATTR_IP: ReadAddr(r.Nested(), &m->ip); break;
      case IPSET_ATTR_CIDR: m->cidr = r.U8(); break;
      case IPSET_ATTR_PORT: nl::Store(&m->port, r.Be16(), &m->has_port); break;
      case IPSET_ATTR_PROTO: m->proto = r.U8(); break;
      case IPSET_ATTR_TIMEOUT: nl::Store(&m->timeout, r.Be32(), &m->has_timeout); break;
      case IPSET_ATTR_CADT_FLAGS: m->nomatch = (r.Be32() & IPSET_FLAG_NOMATCH) != 0; break;
      case IPSET_ATTR_IP2: ReadAddr(r.Nested(), &m->ip2); break;
      case IPSET_ATTR_CIDR2: m->cidr2 = r.U8(); break;
      case IPSET_ATTR_BYTES: nl::Store(&m->bytes, r.Be64(), &m->has_counters); break;
      case IPSET_ATTR_PACKETS: nl::Store(&m->packets, r.Be64(), &m->has_counters); break;
      case IPSET_ATTR_COMMENT: nl::Store(&m->comment, r.Str(), &m->has_comment); break;
      case IPSET_ATTR_SKBMARK: {
        const uint64_t v = r.Be64();
        m->skbmark = static_cast<uint32_t>(v >> 32);
        m->skbmarkmask = static_cast<uint32_t>(v);
        m->has_skbmark = true;
        break;
      }
      case IPSET_ATTR_SKBPRIO: nl::Store(&m->skbprio, r.Be32(), &m->has_skbprio); break;
      case IPSET_ATTR_SKBQUEUE: nl::Store(&m->skbqueue, r.Be16(), &m->has_skbqueue); break;
      case IPSET_ATTR_CADT_LINENO: m->lineno = r.Be32(); break;
      default: break;  // IPSET_ATTR_PAD and attributes of types we do not model
    }
  }
  return r.ok();
}

bool ReadHeaderData(nl::AttrReader r, SetHeader* h) {
  while (r.Next()) {
    switch (r.type()) {
      case IPSET_ATTR_HASHSIZE: nl::Store(&h->hashsize, r.Be32(), &h->has_hashsize); break;
      case IPSET_ATTR_MAXELEM: nl::Store(&h->maxelem, r.Be32(), &h->has_maxelem); break;
      case IPSET_ATTR_NETMASK: nl::Store(&h->netmask, r.U8(), &h->has_netmask); break;
      case IPSET_ATTR_BUCKETSIZE: nl::Store(&h->bucketsize, r.U8(), &h->has_bucketsize); break;
      case IPSET_ATTR_INITVAL: nl::Store(&h->initval, r.Be32(), &h->has_initval); break;
      case IPSET_ATTR_TIMEOUT: nl::Store(&h->timeout, r.Be32(), &h->has_timeout); break;
      case IPSET_ATTR_CADT_FLAGS: {
        const uint32_t f = r.Be32();
        h->counters = f & IPSET_FLAG_WITH_COUNTERS;
        h->comment = f & IPSET_FLAG_WITH_COMMENT;
        h->skbinfo = f & IPSET_FLAG_WITH_SKBINFO;
        h->forceadd = f & IPSET_FLAG_WITH_FORCEADD;
        break;
      }
      case IPSET_ATTR_PORT: nl::Store(&h->port_from, r.Be16(), &h->has_range); break;
      case IPSET_ATTR_PORT_TO: nl::Store(&h->port_to, r.Be16(), &h->has_range); break;
      case IPSET_ATTR_REFERENCES: h->references = r.Be32(); break;
      case IPSET_ATTR_MEMSIZE: h->memsize = r.Be32(); break;
      case IPSET_ATTR_ELEMENTS: h->elements = r.Be32(); break;
      default: break;
    }
  }
  return r.ok();
}

bool CheckType(const nlmsghdr* h, uint8_t cmd, std::string* why) {
  if (h->nlmsg_type != MsgType(cmd))
    return nl::Refuse(why, std::string("not an ipset ") + CommandName(cmd) + " message");
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return nl::Refuse(why, "message shorter than its nfgenmsg header");
  return true;
}

// A PROTOCOL or TYPE reply: the highest version (`max_attr`, which it must hold) and the lowest
// (`min_attr`, 0 when absent).
bool DecodeVersions(const nlmsghdr* h, uint8_t cmd, uint16_t max_attr, uint16_t min_attr, const char* missing,
                    uint8_t* max, uint8_t* min, std::string* why) {
  if (!CheckType(h, cmd, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  bool got = false;
  *min = 0;
  while (r.Next()) {
    if (r.type() == max_attr) nl::Store(max, r.U8(), &got);
    else if (r.type() == min_attr) *min = r.U8();
  }
  if (!r.ok(why)) return false;
  if (!got) return nl::Refuse(why, missing);
  return true;
}

}  // namespace

const TypeInfo* FindType(const std::string& name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

int DimCount(const TypeInfo& t) {
  int n = 0;
  for (Dim d : t.dims)
    if (d != Dim::kNone) n++;
  return n;
}

bool HasDim(const TypeInfo& t, Dim d) {
  for (Dim x : t.dims)
    if (x == d) return true;
  return false;
}

void EncodeProtocol(nl::Batch& b) {
  Begin(b, IPSET_CMD_PROTOCOL, NLM_F_REQUEST | NLM_F_ACK, kProtocol);
}

void EncodeType(nl::Batch& b, uint8_t proto, const std::string& type, uint8_t family) {
  nl::AttrWriter w = Begin(b, IPSET_CMD_TYPE, NLM_F_REQUEST | NLM_F_ACK, proto);
  w.Str(IPSET_ATTR_TYPENAME, type);
  w.U8(IPSET_ATTR_FAMILY, family);
}

void EncodeCreate(nl::Batch& b, uint8_t proto, const SetHeader& h, bool exist) {
  nl::AttrWriter w = Begin(b, IPSET_CMD_CREATE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (exist ? 0 : NLM_F_EXCL), proto);
  w.Str(IPSET_ATTR_SETNAME, h.name);
  w.Str(IPSET_ATTR_TYPENAME, h.type);
  w.U8(IPSET_ATTR_REVISION, h.revision);
  w.U8(IPSET_ATTR_FAMILY, h.family);
  const size_t data = w.Begin(IPSET_ATTR_DATA | kNested);
  if (h.has_range) {
    w.Be16(IPSET_ATTR_PORT | kNetByteOrder, h.port_from);
    w.Be16(IPSET_ATTR_PORT_TO | kNetByteOrder, h.port_to);
  }
  if (h.has_timeout) w.Be32(IPSET_ATTR_TIMEOUT | kNetByteOrder, h.timeout);
  uint32_t cadt = 0;
  if (h.counters) cadt |= IPSET_FLAG_WITH_COUNTERS;
  if (h.comment) cadt |= IPSET_FLAG_WITH_COMMENT;
  if (h.skbinfo) cadt |= IPSET_FLAG_WITH_SKBINFO;
  if (h.forceadd) cadt |= IPSET_FLAG_WITH_FORCEADD;
  if (cadt) w.Be32(IPSET_ATTR_CADT_FLAGS | kNetByteOrder, cadt);
  if (h.has_initval) w.Be32(IPSET_ATTR_INITVAL | kNetByteOrder, h.initval);
  if (h.has_hashsize) w.Be32(IPSET_ATTR_HASHSIZE | kNetByteOrder, h.hashsize);
  if (h.has_maxelem) w.Be32(IPSET_ATTR_MAXELEM | kNetByteOrder, h.maxelem);
  if (h.has_netmask) w.U8(IPSET_ATTR_NETMASK, h.netmask);
  if (h.has_bucketsize) w.U8(IPSET_ATTR_BUCKETSIZE, h.bucketsize);
  w.End(data);
}

void EncodeNamed(nl::Batch& b, uint8_t proto, uint8_t cmd, const std::string& name, const std::string& name2) {
  // libipset marks DESTROY exclusive; the kernel ignores the flag there, we keep the bytes equal.
  nl::AttrWriter w = Begin(b, cmd, NLM_F_REQUEST | NLM_F_ACK | (cmd == IPSET_CMD_DESTROY ? NLM_F_EXCL : 0), proto);
  w.Str(IPSET_ATTR_SETNAME, name);
  if (!name2.empty()) w.Str(IPSET_ATTR_SETNAME2, name2);
}

void EncodeAdt(nl::Batch& b, uint8_t proto, uint8_t cmd, const std::string& set, const TypeInfo& t,
               const std::vector<Member>& members, size_t from, size_t to, bool exist,
               std::vector<std::pair<size_t, size_t>>* ranges, size_t max_bytes) {
  size_t i = from;
  while (i < to) {
    const size_t start = i;
    nl::AttrWriter w = Begin(b, cmd, NLM_F_REQUEST | NLM_F_ACK | (exist ? 0 : NLM_F_EXCL), proto);
    const size_t msg_off = b.offset(b.size() - 1);
    w.Str(IPSET_ATTR_SETNAME, set);
    // The kernel requires a command-level LINENO with ATTR_ADT; libipset sends the first line.
    w.Be32(IPSET_ATTR_LINENO | kNetByteOrder, members[i].lineno);
    const size_t adt = w.Begin(IPSET_ATTR_ADT | kNested);
    std::vector<uint8_t>& buf = b.buffer();
    while (i < to) {
      const size_t before = buf.size();
      const size_t data = w.Begin(IPSET_ATTR_DATA | kNested);
      PutMember(w, t, members[i]);
      w.End(data);
      if (i > start && buf.size() - msg_off > max_bytes) {
        buf.resize(before);  // does not fit: it starts the next message
        break;
      }
      i++;
    }
    w.End(adt);
    if (ranges) ranges->emplace_back(start, i);
  }
  b.Seal();
}

void EncodeTest(nl::Batch& b, uint8_t proto, const std::string& set, const TypeInfo& t, const Member& m) {
  nl::AttrWriter w = Begin(b, IPSET_CMD_TEST, NLM_F_REQUEST | NLM_F_ACK, proto);
  w.Str(IPSET_ATTR_SETNAME, set);
  const size_t data = w.Begin(IPSET_ATTR_DATA | kNested);
  Member copy = m;
  copy.lineno = 0;
  PutMember(w, t, copy);
  w.End(data);
}

void EncodeList(nl::Batch& b, uint8_t proto, const std::string& name) {
  nl::AttrWriter w = Begin(b, IPSET_CMD_LIST, NLM_F_REQUEST, proto);
  if (!name.empty()) w.Str(IPSET_ATTR_SETNAME, name);
}

bool DecodeProtocol(const nlmsghdr* h, uint8_t* max, uint8_t* min, std::string* why) {
  if (!DecodeVersions(h, IPSET_CMD_PROTOCOL, IPSET_ATTR_PROTOCOL, IPSET_ATTR_PROTOCOL_MIN,
                      "PROTOCOL reply without ATTR_PROTOCOL", max, min, why))
    return false;
  if (*min == 0) *min = *max;  // kernels before protocol 7 do not send a minimum
  return true;
}

bool DecodeType(const nlmsghdr* h, uint8_t* rev_max, uint8_t* rev_min, std::string* why) {
  return DecodeVersions(h, IPSET_CMD_TYPE, IPSET_ATTR_REVISION, IPSET_ATTR_REVISION_MIN, "TYPE reply without ATTR_REVISION",
                        rev_max, rev_min, why);
}

bool DecodeList(const nlmsghdr* h, SetHeader* header, bool* has_header, std::vector<Member>* members,
                std::string* why) {
  if (h->nlmsg_type != MsgType(IPSET_CMD_LIST) && h->nlmsg_type != MsgType(IPSET_CMD_SAVE) &&
      h->nlmsg_type != MsgType(IPSET_CMD_HEADER))
    return nl::Refuse(why, "not an ipset LIST message");
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return nl::Refuse(why, "message shorter than its nfgenmsg header");
  *has_header = false;
  bool named = false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case IPSET_ATTR_SETNAME: nl::Store(&header->name, r.Str(), &named); break;
      case IPSET_ATTR_TYPENAME: nl::Store(&header->type, r.Str(), has_header); break;
      case IPSET_ATTR_FAMILY: header->family = r.U8(); break;
      case IPSET_ATTR_REVISION: header->revision = r.U8(); break;
      case IPSET_ATTR_INDEX: header->index = r.Be16(); break;
      case IPSET_ATTR_DATA: ReadHeaderData(r.Nested(), header); break;
      case IPSET_ATTR_ADT: {
        nl::AttrReader adt = r.Nested();
        while (adt.Next()) {
          if (adt.type() != IPSET_ATTR_DATA) {
            adt.Fail("ATTR_ADT holds attribute " + std::to_string(adt.type()) + ", not DATA");
            break;
          }
          Member m;
          if (!ReadMember(adt.Nested(), &m)) break;
          members->push_back(std::move(m));
        }
        break;
      }
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!named) return nl::Refuse(why, "LIST message without ATTR_SETNAME");
  return true;
}

bool ListAccumulator::Add(const nlmsghdr* h, std::string* why) {
  SetHeader hdr;
  bool has_header = false;
  std::vector<Member> members;
  if (!DecodeList(h, &hdr, &has_header, &members, why)) return false;
  if (has_header || sets_.empty() || sets_.back().header.name != hdr.name) {
    if (!has_header) return nl::Refuse(why, "members of set " + hdr.name + " arrived before its header");
    sets_.push_back(ListedSet{std::move(hdr), {}});
  }
  std::vector<Member>& dst = sets_.back().members;
  if (dst.empty()) {
    dst = std::move(members);
  } else {
    dst.insert(dst.end(), std::make_move_iterator(members.begin()), std::make_move_iterator(members.end()));
  }
  return true;
}

std::string ErrorName(int code, bool bitmap) {
  switch (code) {
    case IPSET_ERR_PRIVATE: return "IPSET_ERR_PRIVATE";
    case IPSET_ERR_PROTOCOL: return "IPSET_ERR_PROTOCOL";
    case IPSET_ERR_FIND_TYPE: return "IPSET_ERR_FIND_TYPE";
    case IPSET_ERR_MAX_SETS: return "IPSET_ERR_MAX_SETS";
    case IPSET_ERR_BUSY: return "IPSET_ERR_BUSY";
    case IPSET_ERR_EXIST_SETNAME2: return "IPSET_ERR_EXIST_SETNAME2";
    case IPSET_ERR_TYPE_MISMATCH: return "IPSET_ERR_TYPE_MISMATCH";
    case IPSET_ERR_EXIST: return "IPSET_ERR_EXIST";
    case IPSET_ERR_INVALID_CIDR: return "IPSET_ERR_INVALID_CIDR";
    case IPSET_ERR_INVALID_NETMASK: return "IPSET_ERR_INVALID_NETMASK";
    case IPSET_ERR_INVALID_FAMILY: return "IPSET_ERR_INVALID_FAMILY";
    case IPSET_ERR_TIMEOUT: return "IPSET_ERR_TIMEOUT";
    case IPSET_ERR_REFERENCED: return "IPSET_ERR_REFERENCED";
    case IPSET_ERR_IPADDR_IPV4: return "IPSET_ERR_IPADDR_IPV4";
    case IPSET_ERR_IPADDR_IPV6: return "IPSET_ERR_IPADDR_IPV6";
    case IPSET_ERR_COUNTER: return "IPSET_ERR_COUNTER";
    case IPSET_ERR_COMMENT: return "IPSET_ERR_COMMENT";
    case IPSET_ERR_INVALID_MARKMASK: return "IPSET_ERR_INVALID_MARKMASK";
    case IPSET_ERR_SKBINFO: return "IPSET_ERR_SKBINFO";
    default: break;
  }
  if (bitmap) {
    if (code == IPSET_ERR_BITMAP_RANGE) return "IPSET_ERR_BITMAP_RANGE";
    if (code == IPSET_ERR_BITMAP_RANGE_SIZE) return "IPSET_ERR_BITMAP_RANGE_SIZE";
  } else {
    switch (code) {
      case IPSET_ERR_HASH_FULL: return "IPSET_ERR_HASH_FULL";
      case IPSET_ERR_HASH_ELEM: return "IPSET_ERR_HASH_ELEM";
      case IPSET_ERR_INVALID_PROTO: return "IPSET_ERR_INVALID_PROTO";
      case IPSET_ERR_MISSING_PROTO: return "IPSET_ERR_MISSING_PROTO";
      case IPSET_ERR_HASH_RANGE_UNSUPPORTED: return "IPSET_ERR_HASH_RANGE_UNSUPPORTED";
      case IPSET_ERR_HASH_RANGE: return "IPSET_ERR_HASH_RANGE";
      default: break;
    }
  }
  if (code >= IPSET_ERR_PRIVATE) return "IPSET_ERR_" + std::to_string(code);
  return "";
}

std::string ErrorMessage(int code, uint8_t cmd, bool bitmap) {
  // libipset's wording (lib/errcode.c), so messages read as the ipset tool prints them.
  switch (code) {
    case ENOENT: return "The set with the given name does not exist";
    case EMSGSIZE: return "Kernel error received: message could not be created";
    case IPSET_ERR_PROTOCOL: return "Kernel error received: ipset protocol error";
    case EEXIST:
      if (cmd == IPSET_CMD_CREATE) return "Set cannot be created: set with the same name already exists";
      break;
    case IPSET_ERR_FIND_TYPE: return "Kernel error received: set type not supported";
    case IPSET_ERR_MAX_SETS:
      return "Kernel error received: maximal number of sets reached, cannot create more.";
    case IPSET_ERR_INVALID_NETMASK: return "The value of the netmask parameter is invalid";
    case IPSET_ERR_INVALID_MARKMASK: return "The value of the markmask parameter is invalid";
    case IPSET_ERR_INVALID_FAMILY: return "Protocol family not supported by the set type";
    case IPSET_ERR_BUSY: return "Set cannot be destroyed: it is in use by a kernel component";
    case IPSET_ERR_REFERENCED:
      if (cmd == IPSET_CMD_RENAME) return "Set cannot be renamed: it is in use by another system";
      return "Set cannot be destroyed: it is in use by a kernel component";
    case IPSET_ERR_EXIST_SETNAME2:
      if (cmd == IPSET_CMD_RENAME) return "Set cannot be renamed: a set with the new name already exists";
      return "Sets cannot be swapped: the second set does not exist";
    case IPSET_ERR_TYPE_MISMATCH: return "The sets cannot be swapped: their type does not match";
    case IPSET_ERR_EXIST:
      if (cmd == IPSET_CMD_ADD) return "Element cannot be added to the set: it's already added";
      if (cmd == IPSET_CMD_DEL) return "Element cannot be deleted from the set: it's not added";
      if (cmd == IPSET_CMD_TEST) return "The element is NOT in the set";
      break;
    case IPSET_ERR_INVALID_CIDR: return "The value of the CIDR parameter of the IP address is invalid";
    case IPSET_ERR_TIMEOUT: return "Timeout cannot be used: set was created without timeout support";
    case IPSET_ERR_IPADDR_IPV4: return "An IPv4 address is expected, but not received";
    case IPSET_ERR_IPADDR_IPV6: return "An IPv6 address is expected, but not received";
    case IPSET_ERR_COUNTER:
      return "Packet/byte counters cannot be used: set was created without counter support";
    case IPSET_ERR_COMMENT: return "Comment cannot be used: set was created without comment support";
    case IPSET_ERR_SKBINFO: return "Skbinfo mapping cannot be used: set was created without skbinfo support";
    default: break;
  }
  if (bitmap) {
    if (code == IPSET_ERR_BITMAP_RANGE) return "Element is out of the range of the set";
    if (code == IPSET_ERR_BITMAP_RANGE_SIZE)
      return "The range you specified exceeds the size limit of the set type";
  } else {
    switch (code) {
      case IPSET_ERR_HASH_FULL: return "Hash is full, cannot add more elements";
      case IPSET_ERR_HASH_ELEM: return "Null-valued element, cannot be stored in a hash type of set";
      case IPSET_ERR_INVALID_PROTO: return "Invalid protocol specified";
      case IPSET_ERR_MISSING_PROTO: return "Protocol missing, but must be specified";
      case IPSET_ERR_HASH_RANGE_UNSUPPORTED:
        return "Range is not supported in the \"net\" component of the element";
      case IPSET_ERR_HASH_RANGE: return "Invalid range, covers the whole address space";
      default: break;
    }
  }
  return "";
}

const char* CommandName(uint8_t cmd) {
  switch (cmd) {
    case IPSET_CMD_PROTOCOL: return "IPSET_CMD_PROTOCOL";
    case IPSET_CMD_CREATE: return "IPSET_CMD_CREATE";
    case IPSET_CMD_DESTROY: return "IPSET_CMD_DESTROY";
    case IPSET_CMD_FLUSH: return "IPSET_CMD_FLUSH";
    case IPSET_CMD_RENAME: return "IPSET_CMD_RENAME";
    case IPSET_CMD_SWAP: return "IPSET_CMD_SWAP";
    case IPSET_CMD_LIST: return "IPSET_CMD_LIST";
    case IPSET_CMD_SAVE: return "IPSET_CMD_SAVE";
    case IPSET_CMD_ADD: return "IPSET_CMD_ADD";
    case IPSET_CMD_DEL: return "IPSET_CMD_DEL";
    case IPSET_CMD_TEST: return "IPSET_CMD_TEST";
    case IPSET_CMD_HEADER: return "IPSET_CMD_HEADER";
    case IPSET_CMD_TYPE: return "IPSET_CMD_TYPE";
    default: return "IPSET_CMD_UNKNOWN";
  }
}

}  // namespace ipset
