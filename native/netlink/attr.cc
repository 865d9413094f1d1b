#include "netlink/attr.h"

#include <arpa/inet.h>
#include <endian.h>

#include <cstring>

#include "netlink/error.h"

namespace nl {

namespace {

// The attribute's length as its header says it, or kInvalid when it does not fit.
uint16_t CheckedLen(uint16_t type, size_t len) {
  if (len > kMaxAttrLen)
    ThrowInvalid(kAttrWriterOp, "attribute " + std::to_string(type & kTypeMask) + " would be " + std::to_string(len) +
                                    " bytes, more than a netlink attribute holds (" + std::to_string(kMaxAttrLen) + ")");
  return static_cast<uint16_t>(len);
}

}  // namespace

void AttrWriter::Put(uint16_t type, const void* data, size_t len) {
  const size_t off = buf_.size();
  const uint16_t alen = CheckedLen(type, kAttrHeader + len);
  buf_.resize(off + Align(alen), 0);
  std::memcpy(&buf_[off], &alen, 2);
  std::memcpy(&buf_[off + 2], &type, 2);
  if (len) std::memcpy(&buf_[off + kAttrHeader], data, len);
}

void AttrWriter::Be16(uint16_t type, uint16_t v) { U16(type, htons(v)); }
void AttrWriter::Be32(uint16_t type, uint32_t v) { U32(type, htonl(v)); }
void AttrWriter::Be64(uint16_t type, uint64_t v) { U64(type, htobe64(v)); }

void AttrWriter::Str(uint16_t type, std::string_view s) {
  const size_t off = buf_.size();
  const uint16_t alen = CheckedLen(type, kAttrHeader + s.size() + 1);
  buf_.resize(off + Align(alen), 0);
  std::memcpy(&buf_[off], &alen, 2);
  std::memcpy(&buf_[off + 2], &type, 2);
  if (!s.empty()) std::memcpy(&buf_[off + kAttrHeader], s.data(), s.size());
}

size_t AttrWriter::Begin(uint16_t type) {
  const size_t off = buf_.size();
  buf_.resize(off + kAttrHeader, 0);
  std::memcpy(&buf_[off + 2], &type, 2);
  return off;
}

void AttrWriter::End(size_t token) {
  // Nests are always 4-byte aligned at their end because every attribute pads itself.
  uint16_t type;
  std::memcpy(&type, &buf_[token + 2], 2);
  const uint16_t len = CheckedLen(type, buf_.size() - token);
  std::memcpy(&buf_[token], &len, 2);
}

AttrReader::AttrReader(const uint8_t* data, size_t len)
    : AttrReader(data, len, std::make_shared<std::string>()) {}

AttrReader::AttrReader(const uint8_t* data, size_t len, std::shared_ptr<std::string> err)
    : p_(data), end_(data + len), err_(std::move(err)) {}

void AttrReader::Fail(const std::string& why) {
  if (err_->empty()) *err_ = why;
}

bool AttrReader::Next() {
  if (!ok()) return false;
  const size_t left = static_cast<size_t>(end_ - p_);
  if (left < kAttrHeader) {
    // Trailing padding shorter than a header is legal; anything else is garbage.
    for (size_t i = 0; i < left; i++) {
      if (p_[i] != 0) {
        Fail("trailing bytes after the last attribute");
        break;
      }
    }
    p_ = end_;
    return false;
  }
  uint16_t alen, atype;
  std::memcpy(&alen, p_, 2);
  std::memcpy(&atype, p_ + 2, 2);
  if (alen < kAttrHeader || alen > left) {
    Fail("attribute " + std::to_string(atype & kTypeMask) + " has length " + std::to_string(alen) +
         " but " + std::to_string(left) + " bytes remain");
    return false;
  }
  type_ = atype;
  cur_ = p_ + kAttrHeader;
  cur_len_ = alen - kAttrHeader;
  const size_t step = Align(alen);
  p_ = step >= left ? end_ : p_ + step;
  return true;
}

bool AttrReader::Want(size_t n, const char* what) {
  if (cur_len_ == n) return true;
  Fail("attribute " + std::to_string(type()) + " is not a " + what + " (" + std::to_string(cur_len_) +
       " bytes)");
  return false;
}

uint8_t AttrReader::U8() { return Want(1, "u8") ? cur_[0] : 0; }
uint16_t AttrReader::U16() {
  uint16_t v = 0;
  if (Want(2, "u16")) std::memcpy(&v, cur_, 2);
  return v;
}
uint32_t AttrReader::U32() {
  uint32_t v = 0;
  if (Want(4, "u32")) std::memcpy(&v, cur_, 4);
  return v;
}
uint64_t AttrReader::U64() {
  uint64_t v = 0;
  if (Want(8, "u64")) std::memcpy(&v, cur_, 8);
  return v;
}
uint16_t AttrReader::Be16() { return ntohs(U16()); }
uint32_t AttrReader::Be32() { return ntohl(U32()); }
uint64_t AttrReader::Be64() { return be64toh(U64()); }

std::string AttrReader::Str() {
  const void* nul = std::memchr(cur_, 0, cur_len_);
  const size_t n = nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - cur_) : cur_len_;
  return std::string(reinterpret_cast<const char*>(cur_), n);
}

bool AttrReader::Fixed(void* out, size_t n) {
  if (!Want(n, "fixed-size value")) return false;
  std::memcpy(out, cur_, n);
  return true;
}

bool AttrReader::AtMost(void* out, size_t n) {
  if (cur_len_ > n) {
    Fail("attribute " + std::to_string(type()) + " is longer than " + std::to_string(n) + " bytes");
    return false;
  }
  std::memset(out, 0, n);
  std::memcpy(out, cur_, cur_len_);
  return true;
}

AttrReader AttrReader::Nested() const { return AttrReader(cur_, cur_len_, err_); }

}  // namespace nl
