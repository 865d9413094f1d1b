// IPVS generic netlink codec (include/uapi/linux/ip_vs.h): structs <-> attributes.
// Pure: builds requests into an nl::Batch and decodes reply messages; no syscalls.
// Attribute order and nest flags follow what ipvsadm 1.31 (libipvs over libnl) sends, so the
// golden fixtures in test/fixtures/ipvs compare byte for byte.
#pragma once

#include <cstdint>
#include <string>

#include "ipvs/model.h"
#include "netlink/message.h"

namespace ipvs {

struct Info {
  uint32_t version = 0;        // 0x010201 for 1.2.1
  uint32_t conn_table_size = 0;
};

void EncodeGetInfo(nl::Batch& b, uint16_t family_id);
// Returns false with `why` set when the message is not a valid GET_INFO reply.
bool DecodeInfo(const nlmsghdr* h, Info* out, std::string* why);
// "1.2.1"
std::string FormatVersion(uint32_t v);

// Checks an op against the rules the kernel (or ipvsadm) would reject it for, so a bad op fails
// before anything is sent. Returns false with `why` set.
bool Validate(const Op& op, std::string* why);

// Appends the one request that carries `op` (NLM_F_REQUEST | NLM_F_ACK).
void EncodeOp(nl::Batch& b, uint16_t family_id, const Op& op);
// The IPVS_CMD_* name of an op's request, for error messages.
const char* CommandName(OpKind k);
// "tcp 10.0.0.1:80", "udp [fd00::1]:53", "fwmark 5 (inet6)"
std::string DescribeService(const ServiceKey& k);
std::string DescribeDest(const ServiceKey& k, const Dest& d);

// Requests for reads. Dumps are sent with NLM_F_DUMP by nl::Socket::Dump.
void EncodeGetServices(nl::Batch& b, uint16_t family_id);             // dump
void EncodeGetService(nl::Batch& b, uint16_t family_id, const ServiceKey& k);  // one
void EncodeGetDests(nl::Batch& b, uint16_t family_id, const ServiceKey& k);    // dump
void EncodeGetConfig(nl::Batch& b, uint16_t family_id);
void EncodeGetDaemons(nl::Batch& b, uint16_t family_id);              // dump

// Decoders of reply messages (genlmsghdr + attributes). False + `why` on malformed input.
bool DecodeService(const nlmsghdr* h, Service* out, std::string* why);
bool DecodeDest(const nlmsghdr* h, Dest* out, std::string* why);
bool DecodeConfig(const nlmsghdr* h, Timeouts* out, std::string* why);
bool DecodeDaemon(const nlmsghdr* h, Daemon* out, std::string* why);

}  // namespace ipvs
