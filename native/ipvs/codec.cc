#include "ipvs/codec.h"

#include <linux/genetlink.h>
#include <linux/ip_vs.h>

namespace ipvs {

void EncodeGetInfo(nl::Batch& b, uint16_t family_id) {
  b.Begin(family_id, NLM_F_REQUEST | NLM_F_ACK);
  b.GenlHeader(IPVS_CMD_GET_INFO, IPVS_GENL_VERSION);
}

bool DecodeInfo(const nlmsghdr* h, Info* out, std::string* why) {
  nl::AttrReader r = nl::Attributes(h, GENL_HDRLEN);
  bool have_version = false;
  while (r.Next()) {
    switch (r.type()) {
      case IPVS_INFO_ATTR_VERSION:
        out->version = r.U32();
        have_version = true;
        break;
      case IPVS_INFO_ATTR_CONN_TAB_SIZE: out->conn_table_size = r.U32(); break;
      default: break;
    }
  }
  if (!r.ok()) {
    *why = r.error();
    return false;
  }
  if (!have_version) {
    *why = "no IPVS_INFO_ATTR_VERSION";
    return false;
  }
  return true;
}

std::string FormatVersion(uint32_t v) {
  return std::to_string((v >> 16) & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string(v & 0xff);
}

}  // namespace ipvs
