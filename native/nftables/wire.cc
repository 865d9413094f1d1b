// Op stream decoder (layout in wire.h): the one place an op's fields are range-checked before
// they are encoded (names, registers, enum values, data lengths, verdicts).
#include "nftables/wire.h"

#include <linux/netfilter.h>

#include <cmath>
#include <cstring>
#include <string>

#include "netlink/error.h"

namespace nft {

namespace {

std::string KeyOf(const char* k) { return k; }
template <size_t N>
std::string KeyOf(const char (&k)[N]) {
  return k;
}
template <class F>
std::string KeyOf(const F& f) {
  return f();
}

class Cursor {
 public:
  Cursor(const uint8_t*& p, const uint8_t* end, size_t index) : p_(p), end_(end), index_(index) {}

  [[noreturn]] void Fail(const std::string& why) const {
    nl::ThrowInvalid("nftables op " + std::to_string(index_), why, static_cast<int64_t>(index_), member);
  }
  // The element being read (its index in the op's elements), named by Fail; -1 outside them.
  int64_t member = -1;
  void Need(size_t n) const {
    if (static_cast<size_t>(end_ - p_) < n) Fail("truncated op stream");
  }
  uint8_t U8() {
    Need(1);
    return *p_++;
  }
  uint16_t U16() {
    Need(2);
    uint16_t v;
    std::memcpy(&v, p_, 2);
    p_ += 2;
    return v;
  }
  uint32_t U32() {
    Need(4);
    uint32_t v;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return v;
  }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  // A number field: absent is tag 2. key: a const char* or a callable building the name (only
  // called to report an error).
  template <class K>
  bool Num(const K& key, uint64_t max, uint64_t* out) {
    const uint8_t tag = U8();
    if (tag == 2) return false;  // undefined / null
    Need(8);
    if (tag == 1) {
      uint64_t x;
      std::memcpy(&x, p_, 8);
      p_ += 8;
      if (x > max) Fail(KeyOf(key) + " is out of range");
      *out = x;
      return true;
    }
    if (tag != 0) Fail("bad number tag in op stream");
    double d;
    std::memcpy(&d, p_, 8);
    p_ += 8;
    if (!(d >= 0) || d != std::floor(d) || d > static_cast<double>(max) || d > 9007199254740991.0)
      Fail(KeyOf(key) + " must be an integer in 0.." + std::to_string(max));
    *out = static_cast<uint64_t>(d);
    return true;
  }
  template <class K>
  uint64_t NumOr(const K& key, uint64_t max, uint64_t dflt) {
    uint64_t v;
    return Num(key, max, &v) ? v : dflt;
  }
  double Double() {
    const uint8_t tag = U8();
    if (tag == 2) return NAN;
    Need(8);
    if (tag == 1) {
      uint64_t x;
      std::memcpy(&x, p_, 8);
      p_ += 8;
      return static_cast<double>(x);
    }
    double d;
    std::memcpy(&d, p_, 8);
    p_ += 8;
    return d;
  }
  // Strings: a NUL byte is rejected; empty means absent.
  void Str(const char* key, bool required, size_t max, std::string* out) {
    const uint16_t n = U16();
    Need(n);
    out->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    if (required && n == 0) Fail(std::string(key) + " is required");
    if (n > max) Fail(std::string(key) + " is longer than " + std::to_string(max) + " bytes");
    if (std::memchr(out->data(), 0, n)) Fail(std::string(key) + " contains a NUL byte");
  }
  void Take(size_t n, std::vector<uint8_t>* out) {
    Need(n);
    out->assign(p_, p_ + n);
    p_ += n;
  }
  template <class K>
  void Name(const K& key, std::string* out) {
    const uint16_t n = U16();
    Need(n);
    out->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    if (n > 255 || std::memchr(out->data(), 0, n)) Fail(KeyOf(key) + " is not a valid name");
  }
  template <class K>
  void Bytes(const K& key, size_t max, std::vector<uint8_t>* out) {
    const uint16_t n = U16();
    Need(n);
    out->assign(p_, p_ + n);
    p_ += n;
    if (n == 0) Fail(KeyOf(key) + " must not be empty");
    if (n > max) Fail(KeyOf(key) + " is longer than " + std::to_string(max) + " bytes");
  }

 private:
  const uint8_t*& p_;
  const uint8_t* end_;
  size_t index_;
};

template <class K>
void VerdictFrom(Cursor& c, const K& where, Verdict* v) {
  v->code = c.I32();
  const char* name = EnumName(VerdictNames(), v->code);
  if (!name) c.Fail("unknown verdict " + std::to_string(v->code));
  c.Str("chain", false, 255, &v->chain);
  if (v->code == NFT_JUMP || v->code == NFT_GOTO) {
    if (v->chain.empty()) c.Fail(KeyOf(where) + ": " + name + " needs a chain");
    if (v->chain.size() >= NFT_CHAIN_MAXNAMELEN) c.Fail(KeyOf(where) + ": chain name too long");
  } else if (!v->chain.empty()) {
    c.Fail("only jump and goto take a chain");
  }
}

void ExprFrom(Cursor& c, Expr* e) {
  e->attrs.clear();
  const uint8_t idx = c.U8();
  const ExprSchema* s = nullptr;
  if (idx == 255) {
    c.Str("type", true, 15, &e->name);
    s = FindExprSchema(e->name);
  } else {
    const std::vector<ExprSchema>& all = ExprSchemas();
    if (idx >= all.size()) c.Fail("unknown expression schema " + std::to_string(idx));
    s = &all[idx];
    e->name = s->name;
  }
  const uint16_t mask = c.U16();
  const bool has_verdict = (mask & 0x8000) != 0;
  if (s) {
    const size_t nf = s->fields.size();
    const bool immediate = std::strcmp(s->name, "immediate") == 0;
    e->attrs.reserve(nf);
    if (mask & 0x7fff & ~((1u << nf) - 1)) c.Fail("bad field mask in op stream");
    for (size_t i = 0; i < nf; i++) {
      const FieldSchema& f = s->fields[i];
      const bool present = (mask >> i) & 1;
      if (immediate && f.attr == NFTA_IMMEDIATE_DATA && has_verdict) {
        if (present) c.Fail("immediate takes data or verdict, not both");
        ExprAttr a;
        a.type = f.attr;
        a.kind = ValueKind::kVerdict;
        VerdictFrom(c, "verdict", &a.verdict);
        e->attrs.push_back(std::move(a));
        continue;
      }
      if (!present) continue;
      auto key = [&] { return e->name + "." + f.js; };
      ExprAttr a;
      a.type = f.attr;
      a.kind = f.kind;
      if (f.is_bool) {
        a.num = 1;
      } else {
        switch (f.kind) {
          case ValueKind::kU8: c.Num(key, 0xff, &a.num); break;
          case ValueKind::kBe16: c.Num(key, 0xffff, &a.num); break;
          case ValueKind::kBe32:
            c.Num(key, f.is_register ? static_cast<uint64_t>(NFT_REG32_15) : 0xffffffffu, &a.num);
            break;
          case ValueKind::kBe64: c.Num(key, UINT64_MAX, &a.num); break;
          case ValueKind::kStr: c.Name(key, &a.str); break;
          case ValueKind::kData: c.Bytes(key, 64, &a.bytes); break;
          default: c.Fail(key() + ": unsupported field");
        }
      }
      e->attrs.push_back(std::move(a));
    }
    if (has_verdict && !immediate) c.Fail(e->name + " takes no verdict");
  } else if (mask != 0) {
    c.Fail("unknown expression type " + e->name);
  }
  const uint16_t nraw = c.U16();
  if (!s && nraw == 0) c.Fail("unknown expression type " + e->name);
  for (uint16_t i = 0; i < nraw; i++) {
    ExprAttr a;
    a.kind = ValueKind::kRaw;
    a.type = c.U16();
    const uint16_t n = c.U16();
    if (n > 4096) c.Fail("unknown.hex is longer than 4096 bytes");
    c.Take(n, &a.bytes);
    e->attrs.push_back(std::move(a));
  }
}

uint8_t FamilyFrom(Cursor& c) {
  const uint8_t f = c.U8();
  if (f != NFPROTO_INET && f != NFPROTO_IPV4 && f != NFPROTO_IPV6 && f != NFPROTO_ARP && f != NFPROTO_BRIDGE &&
      f != NFPROTO_NETDEV)
    c.Fail("unknown family " + std::to_string(f));
  return f;
}

const char* VerbName(Verb v) {
  static const char* const names[] = {"add", "create", "delete", "destroy", "flush", "insert", "replace"};
  return names[static_cast<int>(v)];
}

}  // namespace

WireReader::WireReader(const uint8_t* data, size_t len) : begin_(data), p_(data), end_(data + len) {
  uint32_t magic = 0;
  if (len < 4 || (std::memcpy(&magic, data, 4), magic != kWireMagic))
    nl::ThrowInvalid("nftables commit", "not an op stream");
  p_ += 4;
}

void WireReader::Next(Op* op, size_t index) {
  Cursor c(p_, end_, index);
  const uint8_t kind = c.U8();
  const uint8_t verb = c.U8();
  if (kind > static_cast<uint8_t>(Kind::kRule)) c.Fail("unknown kind");
  if (verb > static_cast<uint8_t>(Verb::kReplace)) c.Fail("unknown verb");
  op->kind = static_cast<Kind>(kind);
  op->verb = static_cast<Verb>(verb);
  auto vname = [op] { return std::string(VerbName(op->verb)); };
  const bool is_new = op->verb == Verb::kAdd || op->verb == Verb::kCreate;
  if ((op->verb == Verb::kInsert || op->verb == Verb::kReplace) && op->kind != Kind::kRule)
    c.Fail(vname() + " applies to rules only");
  const uint8_t family = FamilyFrom(c);
  switch (op->kind) {
    case Kind::kTable: {
      Table& t = op->table;
      t.family = family;
      c.Str("name", false, NFT_TABLE_MAXNAMELEN - 1, &t.name);
      t.handle = c.NumOr("handle", UINT64_MAX, 0);
      if (t.handle == 0 && t.name.empty()) c.Fail("name is required");
      t.flags = static_cast<uint32_t>(c.NumOr("flags", 0xffffffffu, 0));
      t.userdata.clear();
      break;
    }
    case Kind::kChain: {
      Chain& ch = op->chain;
      ch.family = family;
      c.Str("table", true, NFT_TABLE_MAXNAMELEN - 1, &ch.table);
      c.Str("name", false, NFT_CHAIN_MAXNAMELEN - 1, &ch.name);
      ch.handle = c.NumOr("handle", UINT64_MAX, 0);
      if ((ch.handle == 0 || is_new) && ch.name.empty()) c.Fail("name is required");
      ch.base = false;
      ch.type.clear();
      ch.has_policy = false;
      ch.policy = 1;
      ch.device.clear();
      ch.hooknum = 0;
      ch.priority = 0;
      ch.userdata.clear();
      if (c.U8()) {
        std::string type, device;
        c.Str("type", true, 15, &type);
        uint64_t hooknum = 0;
        if (!c.Num("hook.hooknum", 16, &hooknum)) c.Fail("hook.hooknum is required");
        const double p = c.Double();
        if (std::isnan(p)) c.Fail("hook.priority must be a number");
        if (p != std::floor(p) || p < INT32_MIN || p > INT32_MAX) c.Fail("hook.priority must be a 32-bit integer");
        uint64_t policy = 1;
        const bool has_policy = c.U8() != 0;
        if (has_policy) policy = c.NumOr("policy", 1, 1);
        c.Str("device", false, 15, &device);
        if (is_new) {
          ch.base = true;
          ch.type = std::move(type);
          ch.hooknum = static_cast<uint32_t>(hooknum);
          ch.priority = static_cast<int32_t>(p);
          ch.has_policy = has_policy;
          ch.policy = static_cast<uint32_t>(policy);
          ch.device = std::move(device);
        }
      }
      break;
    }
    case Kind::kSet: {
      Set& s = op->set;
      s = Set{};
      s.family = family;
      c.Str("table", true, NFT_TABLE_MAXNAMELEN - 1, &s.table);
      c.Str("name", false, NFT_SET_MAXNAMELEN - 1, &s.name);
      s.handle = c.NumOr("handle", UINT64_MAX, 0);
      if ((s.handle == 0 || is_new) && s.name.empty()) c.Fail("name is required");
      if (c.U8()) {
        const uint32_t flags = static_cast<uint32_t>(c.NumOr("flags", 0xffffffffu, 0));
        const uint32_t key_type = static_cast<uint32_t>(c.NumOr("keyType", 0xffffffffu, 0));
        const uint32_t key_len = static_cast<uint32_t>(c.NumOr("keyLen", 64, 0));
        const uint32_t kbo = static_cast<uint32_t>(c.NumOr("keyByteorder", 2, 0));
        const bool has_data = c.U8() != 0;
        uint32_t data_type = 0, data_len = 0, dbo = 0;
        if (has_data) {
          data_type = static_cast<uint32_t>(c.NumOr("dataType", 0xffffffffu, 0));
          data_len = static_cast<uint32_t>(c.NumOr("dataLen", 64, 0));
          dbo = static_cast<uint32_t>(c.NumOr("dataByteorder", 2, 0));
        }
        const uint32_t id = static_cast<uint32_t>(c.NumOr("id", 0xffffffffu, 0));
        const uint64_t timeout = c.NumOr("timeout", UINT64_MAX / 2, 0);
        const uint32_t gc = static_cast<uint32_t>(c.NumOr("gcInterval", 0xffffffffu, 0));
        const uint32_t size = static_cast<uint32_t>(c.NumOr("size", 0xffffffffu, 0));
        const uint8_t nconcat = c.U8();
        std::vector<uint8_t> concat;
        for (uint8_t i = 0; i < nconcat; i++) {
          const uint8_t l = c.U8();
          if (l > 64) c.Fail("concat must be an integer in 0..64");
          concat.push_back(l);
        }
        std::string comment;
        c.Str("comment", false, 127, &comment);
        if (is_new) {
          s.flags = flags;
          s.key_type = key_type;
          s.key_len = key_len;
          if (s.key_len == 0) c.Fail("keyLen must be 1..64");
          s.has_data = has_data;
          s.data_type = data_type;
          s.data_len = data_len;
          s.id = id;
          s.timeout_ms = timeout;
          s.gc_interval_ms = gc;
          s.size = size;
          s.concat_lens = std::move(concat);
          UdataPut(s.userdata, kUdataSetKeyByteorder, &kbo, 4);
          if (s.has_data) {
            const uint32_t zero = 0;
            UdataPut(s.userdata, kUdataSetDataByteorder, &dbo, 4);
            UdataPut(s.userdata, kUdataSetDataInterval, &zero, 4);
          }
          if (!comment.empty()) UdataPutStr(s.userdata, kUdataSetComment, comment);
        }
      } else if (is_new) {
        c.Fail("keyLen must be 1..64");
      }
      break;
    }
    case Kind::kElements: {
      if (op->verb == Verb::kFlush) c.Fail("flush a set with kind 'set'");
      ElementsRef& r = op->ref;
      r.family = family;
      c.Str("table", true, NFT_TABLE_MAXNAMELEN - 1, &r.table);
      c.Str("set", true, NFT_SET_MAXNAMELEN - 1, &r.set);
      r.set_id = static_cast<uint32_t>(c.NumOr("setId", 0xffffffffu, 0));
      const uint32_t n = c.U32();
      // Each element takes at least 3 bytes of stream: a count beyond that is garbage.
      c.Need(static_cast<size_t>(n) * 3);
      op->elements.resize(n);
      for (uint32_t i = 0; i < n; i++) {
        Element& e = op->elements[i];
        c.member = i;
        auto where = [i] { return "elements[" + std::to_string(i) + "]"; };
        const uint8_t m = c.U8();
        c.Bytes([&] { return where() + ".key"; }, 64, &e.key);
        e.flags = 0;
        e.has_flags = false;
        e.has_verdict = false;
        e.verdict = Verdict{};
        e.data.clear();
        e.timeout_ms = 0;
        e.comment.clear();
        e.key_end.clear();
        if (m & 1) {
          e.flags = static_cast<uint32_t>(c.NumOr([&] { return where() + ".flags"; }, 0xffffffffu, 0));
          e.has_flags = true;
        }
        if (m & 2) {
          e.has_verdict = true;
          VerdictFrom(c, where, &e.verdict);
        }
        if (m & 4) {
          if (e.has_verdict) c.Fail(where() + ": a verdict or data, not both");
          c.Bytes([&] { return where() + ".data"; }, 64, &e.data);
        }
        if (m & 8) e.timeout_ms = c.NumOr([&] { return where() + ".timeout"; }, UINT64_MAX / 2, 0);
        if (m & 16) c.Str("comment", false, 127, &e.comment);
        if (m & 32) c.Bytes([&] { return where() + ".keyEnd"; }, 64, &e.key_end);
      }
      c.member = -1;
      break;
    }
    case Kind::kRule: {
      Rule& r = op->rule;
      r.family = family;
      c.Str("table", true, NFT_TABLE_MAXNAMELEN - 1, &r.table);
      c.Str("chain", op->verb != Verb::kFlush, NFT_CHAIN_MAXNAMELEN - 1, &r.chain);
      r.handle = c.NumOr("handle", UINT64_MAX, 0);
      r.position = c.NumOr("position", UINT64_MAX, 0);
      c.Str("comment", false, 127, &r.comment);
      if ((op->verb == Verb::kReplace || op->verb == Verb::kDelete || op->verb == Verb::kDestroy) && r.handle == 0)
        c.Fail(vname() + " rule needs a handle");
      if ((op->verb == Verb::kAdd || op->verb == Verb::kCreate || op->verb == Verb::kInsert) && r.handle)
        c.Fail("a new rule has no handle (use position)");
      const bool with_exprs = op->verb == Verb::kAdd || op->verb == Verb::kCreate ||
                              op->verb == Verb::kInsert || op->verb == Verb::kReplace;
      if (c.U8()) {
        const uint16_t n = c.U16();
        if (n > 128) c.Fail("more than 128 expressions in a rule");
        // Reuse the Expr objects (and their attribute vectors) of the previous rule.
        r.exprs.resize(n);
        for (uint16_t i = 0; i < n; i++) ExprFrom(c, &r.exprs[i]);
        if (!with_exprs) {
          r.exprs.clear();
          r.comment.clear();
        }
      } else {
        if (with_exprs) c.Fail("exprs must be an array");
        r.exprs.clear();
        r.comment.clear();
      }
      break;
    }
  }
}

void WireTxEncoder::Feed(const uint8_t* data, size_t len) {
  WireReader r = fed_ == 0 ? WireReader(data, len) : WireReader(data, len, WireReader::Continued{});
  while (!r.AtEnd()) {
    offsets_.push_back(fed_ + r.offset());
    r.Next(&op_, index_);
    try {
      tb_.Add(op_, index_);
    } catch (const nl::Exception& e) {
      // an attribute too long for netlink (AttrWriter): the op it belongs to is this one
      if (e.error().kind != nl::ErrorKind::kInvalid) throw;
      nl::ThrowInvalid("nftables op " + std::to_string(index_), e.error().message, static_cast<int64_t>(index_));
    }
    index_++;
  }
  fed_ += len;
}

std::vector<TxBatch> BuildTransactionsFromWire(const uint8_t* data, size_t len, const TxOptions& opt,
                                               std::vector<size_t>* op_offsets) {
  // The netlink batch is a little larger than the stream (attribute headers, padding).
  WireTxEncoder enc(opt, 2 * len + 4096);
  enc.Feed(data, len);
  *op_offsets = std::move(enc.offsets());
  return enc.Finish();
}

Op WireOpAt(const uint8_t* data, size_t len, size_t offset, size_t index) {
  WireReader r(data, len);
  r.Seek(offset);
  Op op;
  r.Next(&op, index);
  return op;
}

}  // namespace nft
