#include "ipvs/packed.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ipvs {

namespace {
constexpr uint8_t kTagString = 0x01, kTagNumber = 0x02, kTagObject = 0x03, kTagArray = 0x04, kTagSame = 0x05,
                  kTagNull = 0x06, kTagOther = 0x07;
// Containers nest two deep below an op (op -> dest -> tunnel, op -> service -> flags).
constexpr int kMaxDepth = 2;
constexpr uint8_t kServiceKey = static_cast<uint8_t>(K::service);

uint32_t U32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

// A number as JavaScript's String() writes it (ECMA-262 Number::toString): the shortest digits
// that read back as the same double, in positional notation from 1e-6 up to 1e21.
std::string JsNumber(double d) {
  if (std::isnan(d)) return "NaN";
  if (d == 0) return "0";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  std::string sign = d < 0 ? "-" : "";
  d = std::fabs(d);
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf: "D[.DDD]e[+-]X"
  std::string digits;
  const char* p = buf;
  for (; *p != 'e'; p++)
    if (*p != '.') digits += *p;
  const int exp = std::atoi(p + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp + 1;  // the decimal point's position after the first digit
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  std::string m = digits.substr(0, 1);
  if (k > 1) m += "." + digits.substr(1);
  return sign + m + "e" + (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
}
}  // namespace

bool PackedOps::Decode(const uint8_t* data, size_t size, std::string* why) {
  data_ = data;
  size_ = size;
  nodes_.clear();
  kids_.clear();
  roots_.clear();
  prev_service_ = -1;
  why_.clear();
  // ~10 values an op, an op per ~40 bytes
  nodes_.reserve(size / 4 + 1);
  kids_.reserve(size / 4 + 1);
  size_t pos = 0;
  while (pos < size) {
    this_service_ = -1;
    const int32_t n = Value(&pos, 0, false);
    if (n < 0) return nl::Refuse(why, "malformed packed ops at byte " + std::to_string(pos) + ": " + why_);
    roots_.push_back(static_cast<uint32_t>(n));
    if (this_service_ >= 0) prev_service_ = this_service_;
  }
  return true;
}

int32_t PackedOps::Value(size_t* pos, int depth, bool as_service) {
  if (*pos >= size_) return why_ = "truncated", -1;
  const uint8_t tag = data_[(*pos)++];
  Node n{};
  switch (tag) {
    case kTagString: {
      if (size_ - *pos < 4) return why_ = "truncated string", -1;
      n.kind = Kind::kString;
      n.len = U32(data_ + *pos);
      *pos += 4;
      if (size_ - *pos < n.len) return why_ = "truncated string", -1;
      n.first = static_cast<uint32_t>(*pos);
      *pos += n.len;
      break;
    }
    case kTagNumber: {
      if (size_ - *pos < 8) return why_ = "truncated number", -1;
      uint64_t bits = 0;
      for (int i = 7; i >= 0; i--) bits = (bits << 8) | data_[*pos + i];
      std::memcpy(&n.num, &bits, 8);
      *pos += 8;
      n.kind = Kind::kNumber;
      break;
    }
    case kTagObject:
    case kTagArray: {
      if (depth > kMaxDepth) return why_ = "nested too deep", -1;
      n.kind = tag == kTagObject ? Kind::kObject : Kind::kArray;
      if (n.kind == Kind::kObject) {
        if (*pos >= size_) return why_ = "truncated", -1;
        n.count = data_[(*pos)++];
      } else {
        if (size_ - *pos < 4) return why_ = "truncated", -1;
        n.count = U32(data_ + *pos);
        *pos += 4;
        // every element takes a byte at least
        if (n.count > size_ - *pos) return why_ = "truncated array", -1;
      }
      n.first = static_cast<uint32_t>(kids_.size());
      kids_.resize(kids_.size() + n.count);
      for (uint32_t i = 0; i < n.count; i++) {
        uint8_t key = 0;
        if (n.kind == Kind::kObject) {
          if (*pos >= size_) return why_ = "truncated object", -1;
          key = data_[(*pos)++];
          if (key >= kKeyCount) return why_ = "unknown key " + std::to_string(key), -1;
        }
        const bool service = n.kind == Kind::kObject && depth == 0 && key == kServiceKey;
        const int32_t v = Value(pos, depth + 1, service);
        if (v < 0) return -1;
        kids_[n.first + i] = Kid{key, static_cast<uint32_t>(v)};
        if (service) this_service_ = v;
      }
      break;
    }
    case kTagNull:
      n.kind = Kind::kNull;
      break;
    case kTagOther:
      n.kind = Kind::kOther;
      break;
    case kTagSame:
      if (!as_service) return why_ = "a back-reference outside an op's service", -1;
      if (prev_service_ < 0) return why_ = "a back-reference with no service before it", -1;
      return prev_service_;
    default:
      return why_ = "unknown tag " + std::to_string(tag), -1;
  }
  nodes_.push_back(n);
  return static_cast<int32_t>(nodes_.size() - 1);
}

bool PackedValue::IsUndefined() const { return node_ < 0; }
bool PackedValue::IsNull() const { return node_ >= 0 && p_->nodes_[node_].kind == PackedOps::Kind::kNull; }
bool PackedValue::IsString() const { return node_ >= 0 && p_->nodes_[node_].kind == PackedOps::Kind::kString; }
bool PackedValue::IsNumber() const { return node_ >= 0 && p_->nodes_[node_].kind == PackedOps::Kind::kNumber; }
bool PackedValue::IsArray() const { return node_ >= 0 && p_->nodes_[node_].kind == PackedOps::Kind::kArray; }
// As JS: an array is an object too.
bool PackedValue::IsObject() const {
  return node_ >= 0 && (p_->nodes_[node_].kind == PackedOps::Kind::kObject || p_->nodes_[node_].kind == PackedOps::Kind::kArray);
}

std::string PackedValue::Text() const {
  if (!IsString()) return std::string();
  const PackedOps::Node& n = p_->nodes_[node_];
  return std::string(reinterpret_cast<const char*>(p_->data_ + n.first), n.len);
}

double PackedValue::Num() const { return IsNumber() ? p_->nodes_[node_].num : NAN; }

// What JS's String() shows of a string or a number (ParseOp shows only those).
std::string PackedValue::Shown() const {
  if (IsString()) return Text();
  if (IsNumber()) return JsNumber(Num());
  if (IsNull()) return "null";
  if (IsArray()) return "[array]";
  if (IsObject()) return "[object Object]";
  return IsUndefined() ? "undefined" : "[value]";
}

uint32_t PackedValue::Length() const { return IsArray() ? p_->nodes_[node_].count : 0; }

PackedValue PackedValue::At(uint32_t i) const {
  if (!IsArray() || i >= p_->nodes_[node_].count) return PackedValue(p_, -1);
  return PackedValue(p_, static_cast<int32_t>(p_->kids_[p_->nodes_[node_].first + i].node));
}


PackedValue PackedValue::Get(K key) const {
  if (node_ < 0 || p_->nodes_[node_].kind != PackedOps::Kind::kObject) return PackedValue(p_, -1);
  const uint8_t id = static_cast<uint8_t>(key);
  const PackedOps::Node& n = p_->nodes_[node_];
  // the last entry of a key wins, as the last assignment of a JS property would
  int32_t hit = -1;
  for (uint32_t i = 0; i < n.count; i++) {
    const PackedOps::Kid& k = p_->kids_[n.first + i];
    if (k.key == id) hit = static_cast<int32_t>(k.node);
  }
  return PackedValue(p_, hit);
}

}  // namespace ipvs
