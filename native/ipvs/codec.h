// IPVS generic netlink codec (include/uapi/linux/ip_vs.h): structs <-> attributes.
// Pure: builds requests into an nl::Batch and decodes reply messages; no syscalls.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace ipvs
