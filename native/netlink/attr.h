// Netlink attribute writer and reader (libmnl-sized, no protocol knowledge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nl {

inline constexpr size_t Align(size_t n) { return (n + 3u) & ~size_t(3); }

constexpr uint16_t kNested = 1u << 15;        // NLA_F_NESTED
constexpr uint16_t kNetByteOrder = 1u << 14;  // NLA_F_NET_BYTEORDER
constexpr uint16_t kTypeMask = static_cast<uint16_t>(~(kNested | kNetByteOrder));
constexpr size_t kAttrHeader = 4;
// An attribute's length (header included) is a u16.
constexpr size_t kMaxAttrLen = 0xffff;
// The op name of the error AttrWriter throws; a caller that knows the op being encoded names it.
inline constexpr const char* kAttrWriterOp = "netlink attribute";

// Appends attributes to a buffer the caller owns. Lengths are patched when a nest ends, so a
// writer can be used on a buffer that already holds message headers. An attribute or a nest
// longer than kMaxAttrLen throws a kInvalid nl::Exception (libmnl's mnl_attr_put_check and
// nest checks): never a length silently cut to 16 bits. A Put that throws writes nothing; an
// End that throws leaves the nest open (the batch is abandoned).
class AttrWriter {
 public:
  explicit AttrWriter(std::vector<uint8_t>& buf) : buf_(buf) {}

  void Put(uint16_t type, const void* data, size_t len);
  void Flag(uint16_t type) { Put(type, nullptr, 0); }
  void U8(uint16_t type, uint8_t v) { Put(type, &v, 1); }
  void U16(uint16_t type, uint16_t v) { Put(type, &v, 2); }
  void U32(uint16_t type, uint32_t v) { Put(type, &v, 4); }
  void U64(uint16_t type, uint64_t v) { Put(type, &v, 8); }
  // Network byte order values. The NLA_F_NET_BYTEORDER flag is the caller's choice (ipset wants
  // it, IPVS does not), so it is never added implicitly.
  void Be16(uint16_t type, uint16_t v);
  void Be32(uint16_t type, uint32_t v);
  void Be64(uint16_t type, uint64_t v);
  // NUL-terminated string, as the kernel's NLA_NUL_STRING / NLA_STRING policies accept.
  void Str(uint16_t type, std::string_view s);
  void Bytes(uint16_t type, const std::vector<uint8_t>& b) { Put(type, b.data(), b.size()); }

  // Opens a nest; `type` carries NLA_F_NESTED when the family wants it. Returns a token for End.
  size_t Begin(uint16_t type);
  void End(size_t token);

  std::vector<uint8_t>& buffer() { return buf_; }

 private:
  std::vector<uint8_t>& buf_;
};

// Iterates attributes with strict lengths and a sticky error shared with nested readers
// (mdlayher/netlink's AttributeDecoder shape): loop on Next(), read with typed getters, check
// ok() once at the end. Never reads outside [data, data+len).
class AttrReader {
 public:
  AttrReader(const uint8_t* data, size_t len);

  bool Next();
  uint16_t type() const { return type_ & kTypeMask; }
  bool nested_flag() const { return (type_ & kNested) != 0; }
  bool net_byteorder_flag() const { return (type_ & kNetByteOrder) != 0; }
  const uint8_t* data() const { return cur_; }
  size_t len() const { return cur_len_; }

  uint8_t U8();
  uint16_t U16();
  uint32_t U32();
  uint64_t U64();
  uint16_t Be16();
  uint32_t Be32();
  uint64_t Be64();
  // Accepts NLA_STRING and NLA_NUL_STRING: the value stops at the first NUL.
  std::string Str();
  std::vector<uint8_t> Bytes() const { return std::vector<uint8_t>(cur_, cur_ + cur_len_); }
  // Copies exactly n bytes; a different length is an error.
  bool Fixed(void* out, size_t n);
  // Copies at most n bytes and zero-fills the rest; a longer attribute is an error.
  bool AtMost(void* out, size_t n);
  AttrReader Nested() const;

  bool ok() const { return err_->empty(); }
  // ok(), the error copied into *why when not: a decoder's check once its loop is done.
  bool ok(std::string* why) const {
    if (!ok()) *why = error();
    return ok();
  }
  const std::string& error() const { return *err_; }
  void Fail(const std::string& why);

 private:
  AttrReader(const uint8_t* data, size_t len, std::shared_ptr<std::string> err);
  bool Want(size_t n, const char* what);

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* cur_ = nullptr;
  size_t cur_len_ = 0;
  uint16_t type_ = 0;
  std::shared_ptr<std::string> err_;
};

// An optional field read from its attribute: the value, and that the attribute came.
template <class T, class V>
void Store(T* field, V&& value, bool* came) {
  *field = std::forward<V>(value);
  *came = true;
}

// How a decoder or validator says no: `reason` into *why, and false, its return value.
inline bool Refuse(std::string* why, std::string reason) {
  *why = std::move(reason);
  return false;
}

}  // namespace nl
