#include "netlink/message.h"

#include <linux/genetlink.h>
#include <linux/netfilter/nfnetlink.h>
#include <arpa/inet.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace nl {

size_t Batch::Begin(uint16_t type, uint16_t flags) {
  Seal();
  const size_t off = buf_.size();
  offsets_.push_back(off);
  buf_.resize(off + NLMSG_HDRLEN, 0);
  nlmsghdr h{};
  h.nlmsg_len = NLMSG_HDRLEN;
  h.nlmsg_type = type;
  h.nlmsg_flags = flags;
  std::memcpy(&buf_[off], &h, sizeof h);
  open_ = true;
  return offsets_.size() - 1;
}

void Batch::Header(const void* hdr, size_t len) {
  const size_t off = buf_.size();
  buf_.resize(off + Align(len), 0);
  std::memcpy(&buf_[off], hdr, len);
}

void Batch::GenlHeader(uint8_t cmd, uint8_t version) {
  genlmsghdr g{};
  g.cmd = cmd;
  g.version = version;
  Header(&g, sizeof g);
}

void Batch::NfgenHeader(uint8_t family, uint8_t version, uint16_t res_id) {
  nfgenmsg g{};
  g.nfgen_family = family;
  g.version = version;
  g.res_id = htons(res_id);
  Header(&g, sizeof g);
}

void Batch::Seal() {
  if (!open_) return;
  const size_t off = offsets_.back();
  const uint32_t len = static_cast<uint32_t>(buf_.size() - off);
  std::memcpy(&buf_[off], &len, 4);
  open_ = false;
}

int ErrorFromWire(int32_t wire) {
  // The kernel sends -errno; anything it could not have sent (INT_MIN, which cannot be
  // negated) is reported as a protocol error rather than trusted.
  if (wire == INT32_MIN) return EPROTO;
  return wire < 0 ? -wire : wire;
}

bool ParseError(const nlmsghdr* h, Status* out, uint32_t* echoed_seq) {
  const size_t payload = h->nlmsg_len - NLMSG_HDRLEN;
  if (payload < sizeof(nlmsgerr)) return false;
  const auto* e = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(h));
  out->error = ErrorFromWire(e->error);
  *echoed_seq = e->msg.nlmsg_seq;
  if (out->error != 0 && !(h->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len > NLMSG_HDRLEN &&
      e->msg.nlmsg_len <= payload - (sizeof(nlmsgerr) - sizeof(nlmsghdr))) {
    const auto* p = reinterpret_cast<const uint8_t*>(&e->msg);
    out->echoed.assign(p, p + e->msg.nlmsg_len);
  }
  if (!(h->nlmsg_flags & NLM_F_ACK_TLVS)) return true;
  // With NLM_F_CAPPED only the request's header is echoed, otherwise the whole request.
  size_t tlv_off = NLMSG_HDRLEN + sizeof(nlmsgerr);
  if (!(h->nlmsg_flags & NLM_F_CAPPED)) tlv_off += NLMSG_ALIGN(e->msg.nlmsg_len) - NLMSG_HDRLEN;
  if (tlv_off > h->nlmsg_len) return false;
  AttrReader r(reinterpret_cast<const uint8_t*>(h) + tlv_off, h->nlmsg_len - tlv_off);
  while (r.Next()) {
    switch (r.type()) {
      case NLMSGERR_ATTR_MSG:
        out->extack = r.Str();
        break;
      case NLMSGERR_ATTR_OFFS:
        out->extack_offset = r.U32();
        break;
      default:
        break;
    }
  }
  return r.ok();
}

}  // namespace nl
