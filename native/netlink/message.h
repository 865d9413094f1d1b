// Netlink message framing: building requests into one contiguous batch buffer and parsing the
// kernel's replies (acks, errors with extended-ack TLVs, multipart dumps).
#pragma once

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "netlink/attr.h"

namespace nl {

// Many requests laid out back to back, exactly as they go to sendmsg. Sequence numbers and the
// port id are stamped by the socket when the batch is sent.
class Batch {
 public:
  // Starts a message; family headers and attributes are appended to buffer() until the next
  // Begin (or Seal). Returns the message's index in the batch.
  size_t Begin(uint16_t type, uint16_t flags);
  // Appends a fixed family header (genlmsghdr, nfgenmsg, ifinfomsg ...), padded to 4 bytes.
  void Header(const void* hdr, size_t len);
  void GenlHeader(uint8_t cmd, uint8_t version);
  void NfgenHeader(uint8_t family, uint8_t version, uint16_t res_id_host_order);
  AttrWriter Attrs() { return AttrWriter(buf_); }
  // Patches the length of the message being built. Called by Begin and by the socket.
  void Seal();

  size_t size() const { return offsets_.size(); }
  bool empty() const { return offsets_.empty(); }
  size_t bytes() const { return buf_.size(); }
  std::vector<uint8_t>& buffer() { return buf_; }
  const std::vector<uint8_t>& buffer() const { return buf_; }
  size_t offset(size_t i) const { return offsets_[i]; }
  size_t end(size_t i) const { return i + 1 < offsets_.size() ? offsets_[i + 1] : buf_.size(); }
  nlmsghdr* header(size_t i) { return reinterpret_cast<nlmsghdr*>(&buf_[offsets_[i]]); }
  const nlmsghdr* header(size_t i) const {
    return reinterpret_cast<const nlmsghdr*>(&buf_[offsets_[i]]);
  }
  // Room for `bytes` more bytes and `messages` more messages, grown once instead of attribute
  // by attribute.
  void Reserve(size_t bytes, size_t messages) {
    buf_.reserve(buf_.size() + bytes);
    offsets_.reserve(offsets_.size() + messages);
  }
  void Clear() {
    buf_.clear();
    offsets_.clear();
    open_ = false;
  }

 private:
  std::vector<uint8_t> buf_;
  std::vector<size_t> offsets_;
  bool open_ = false;
};

// What the kernel said about one request.
struct Status {
  int error = 0;            // positive errno (or an ipset code >= 4096); 0 = success
  std::string extack;       // NLMSGERR_ATTR_MSG
  int64_t extack_offset = -1;  // NLMSGERR_ATTR_OFFS, byte offset into the request
  // The request as the kernel echoed it, when it echoed it whole (not capped). ipset patches
  // the failing element's line number into this copy.
  std::vector<uint8_t> echoed;
};

// A wire error code (-errno) as a positive number, defensively.
int ErrorFromWire(int32_t wire);

// Parses an NLMSG_ERROR payload (ack when error == 0), including the extended-ack TLVs that
// follow the echoed request (capped to its header with NETLINK_CAP_ACK, or complete).
// Returns false if the message is malformed.
bool ParseError(const nlmsghdr* h, Status* out, uint32_t* echoed_seq);

// Walks the messages in a received datagram with bounds checks. Returns false on a truncated or
// malformed header (the caller reports a decode error).
template <class Fn>
bool ForEachMessage(const uint8_t* data, size_t len, Fn&& fn) {
  size_t off = 0;
  while (off + sizeof(nlmsghdr) <= len) {
    const nlmsghdr* h = reinterpret_cast<const nlmsghdr*>(data + off);
    if (h->nlmsg_len < sizeof(nlmsghdr) || h->nlmsg_len > len - off) return false;
    if (!fn(h)) return true;
    off += NLMSG_ALIGN(h->nlmsg_len);
  }
  return off >= len || len - off < sizeof(nlmsghdr);
}

// Payload of a message after its nlmsghdr and a fixed family header of `hdr_len` bytes.
inline AttrReader Attributes(const nlmsghdr* h, size_t hdr_len) {
  const size_t start = NLMSG_HDRLEN + Align(hdr_len);
  if (h->nlmsg_len < start) {
    AttrReader r(nullptr, 0);
    r.Fail("message shorter than its family header");
    return r;
  }
  return AttrReader(reinterpret_cast<const uint8_t*>(h) + start, h->nlmsg_len - start);
}

}  // namespace nl
