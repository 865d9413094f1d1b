// The packed form of a batch of IPVS ops: what src/kernel/ipvs-pack.ts writes from the JS op
// objects in one pass, so that reading a batch costs one N-API call instead of ~15 per op. It
// is the only form IpvsHandle.apply takes. It is the same objects, values and all, not a wire
// format: ParseOp (op_parse.h) reads it with every check and error text of the API.
//
//   batch := value*                       one top-level value (an op object) per op
//   value := 0x01 u32 len, len bytes      a string (UTF-8)
//          | 0x02 f64                     a number
//          | 0x03 u8 n, n × (u8 key, value)   an object; key: the property's ipvs::K (op_parse.h;
//                                         src/kernel/ipvs-pack.ts has the same list, compared by
//                                         a unit test through codec.ipvs.packedKeys)
//          | 0x04 u32 n, n × value        an array
//          | 0x05                         the previous op's `service` value itself (only as a
//                                         `service`): the same JS object
//          | 0x06                         null
//          | 0x07                         a value of another type (boolean, bigint, …)
// Integers are little-endian. Undefined properties are left out; an array where an op takes an
// object is written as an object with no properties (which is what reading one finds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipvs/op_parse.h"

namespace ipvs {

class PackedOps;

// A value of a packed batch, with the interface ParseOp reads (op_parse.h).
class PackedValue {
 public:
  PackedValue() = default;
  PackedValue(const PackedOps* p, int32_t node) : p_(p), node_(node) {}
  bool IsUndefined() const;
  bool IsNull() const;
  bool IsString() const;
  bool IsNumber() const;
  bool IsArray() const;
  bool IsObject() const;
  std::string Text() const;
  double Num() const;
  std::string Shown() const;
  uint32_t Length() const;
  PackedValue At(uint32_t i) const;
  PackedValue Get(K key) const;
  bool Same(const PackedValue& o) const { return node_ >= 0 && node_ == o.node_ && p_ == o.p_; }

 private:
  const PackedOps* p_ = nullptr;
  int32_t node_ = -1;  // -1: undefined
};

// A decoded batch: the values' tree over the bytes (which must outlive it).
class PackedOps {
 public:
  // False with `why` set when the bytes are not a well-formed batch.
  bool Decode(const uint8_t* data, size_t size, std::string* why);
  size_t size() const { return roots_.size(); }
  PackedValue op(size_t i) const { return PackedValue(this, static_cast<int32_t>(roots_[i])); }

 private:
  friend class PackedValue;
  enum class Kind : uint8_t { kString, kNumber, kObject, kArray, kNull, kOther };
  struct Node {
    Kind kind;
    uint32_t count = 0;     // object entries / array elements
    uint32_t first = 0;     // string: byte offset; object / array: index into kids_
    uint32_t len = 0;       // string length
    double num = 0;
  };
  struct Kid {
    uint8_t key;  // objects only
    uint32_t node;
  };
  // Reads one value at data[*pos]; returns its node index, or -1 with why_ set.
  int32_t Value(size_t* pos, int depth, bool as_service);

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<Node> nodes_;
  std::vector<Kid> kids_;
  std::vector<uint32_t> roots_;
  int32_t prev_service_ = -1;  // the previous op's `service` value
  int32_t this_service_ = -1;  // the current op's
  std::string why_;
};

}  // namespace ipvs
