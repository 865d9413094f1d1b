// The op stream: a compact binary form of a transaction that src/kernel/nft-wire.ts writes in
// one pass and hands across N-API as one buffer (instead of an object graph per op): the only
// form ops reach the addon in. Decoding validates every field; a bad op throws a kInvalid
// nl::Exception naming it ("nftables op 3: …"). No syscalls, no napi.h.
//
// Layout (little endian). str/bytes: u16 length + bytes. num: u8 tag (0: f64, 1: u64) + 8 bytes.
//   stream   := u32 magic "NFW1" , op*
//   op       := u8 kind (Kind) , u8 verb (Verb) , u8 family , body
//   table    := str name , num handle , num flags
//   chain    := str table , str name , num handle , u8 hook? [str type , num hooknum ,
//               num priority (signed) , u8 policy? [num policy] , str device]
//   set      := str table , str name , num handle , u8 attrs? [num flags , num keyType ,
//               num keyLen , num keyByteorder , u8 data? [num dataType , num dataLen ,
//               num dataByteorder] , num id , num timeout , num gcInterval , num size ,
//               u8 n , u8 concat[n] , str comment]
//   elements := str table , str set , num setId , u32 count , element*
//   element  := u8 mask (1 flags, 2 verdict, 4 data, 8 timeout, 16 comment, 32 keyEnd) ,
//               bytes key , [num flags] , [i32 code , str chain] , [bytes data] , [num timeout] ,
//               [str comment] , [bytes keyEnd]
//   rule     := str table , str chain , num handle , num position , str comment ,
//               u8 exprs? [u16 n , expr*]
//   expr     := u8 schema index (255: str name, no schema) , u16 mask (bit i: schema field i
//               present; bit 15: verdict) , field values in schema order (num; str; bytes;
//               nothing for a boolean) , [i32 code , str chain] , u16 n , raw*
//   raw      := u16 attr type , bytes
#pragma once

#include <cstddef>
#include <cstdint>

#include "nftables/codec.h"

namespace nft {

constexpr uint32_t kWireMagic = 0x3157464e;  // "NFW1"

class WireReader {
 public:
  // Throws kInvalid if the stream does not start with the magic.
  WireReader(const uint8_t* data, size_t len);
  // A later piece of a stream (whole ops, no magic): see WireTxEncoder.
  struct Continued {};
  WireReader(const uint8_t* data, size_t len, Continued) : begin_(data), p_(data), end_(data + len) {}
  bool AtEnd() const { return p_ == end_; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  // Decodes the next op into *op (reusing its storage). Throws kInvalid.
  void Next(Op* op, size_t index);
  // Positions the reader at a byte offset previously returned by offset().
  void Seek(size_t off) { p_ = begin_ + off; }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

// Decodes and lays out a stream that arrives in pieces, each a run of whole ops (the first
// starting with the magic): what a transaction hands the addon while it is still being queued,
// so the netlink encoding overlaps the building. Feed throws kInvalid for a bad op (named by its
// index in the whole stream); an encoder that threw is not fed again.
class WireTxEncoder {
 public:
  WireTxEncoder(const TxOptions& opt, size_t reserve_bytes) : tb_(opt, reserve_bytes) {}
  void Feed(const uint8_t* data, size_t len);
  // Closes the last transaction; the encoder is spent.
  std::vector<TxBatch> Finish() { return tb_.Finish(); }
  // Each op's offset in the whole stream (for error names).
  std::vector<size_t>& offsets() { return offsets_; }
  size_t fed() const { return fed_; }

 private:
  TxBuilder tb_;
  Op op_;
  size_t index_ = 0;
  size_t fed_ = 0;
  std::vector<size_t> offsets_;
};

// Decodes and lays out every op of the stream (validating all of them before returning).
// op_offsets receives each op's offset in the stream (for error names).
std::vector<TxBatch> BuildTransactionsFromWire(const uint8_t* data, size_t len, const TxOptions& opt,
                                               std::vector<size_t>* op_offsets);
// Decodes the op at a given stream offset (to name it in an error).
Op WireOpAt(const uint8_t* data, size_t len, size_t offset, size_t index);

}  // namespace nft
