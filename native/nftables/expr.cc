// Expression codec. Each expression kind is a schema: the attributes nft (libnftnl) writes, in
// the order it writes them, each mapped to a field of the TypeScript model. Encoding walks the
// attrs the binding built from the schema; decoding maps attributes back through the schema and
// keeps anything unknown verbatim (kRaw), so foreign rules list and round-trip losslessly.
#include <linux/netfilter.h>

#include "nftables/codec.h"

namespace nft {

namespace {

const EnumEntry kPayloadBase[] = {{"ll", 0}, {"network", 1}, {"transport", 2}, {"inner", 3}, {nullptr, 0}};
const EnumEntry kMetaKeys[] = {
    {"len", 0},          {"protocol", 1},     {"priority", 2},    {"mark", 3},         {"iif", 4},
    {"oif", 5},          {"iifname", 6},      {"oifname", 7},     {"iiftype", 8},      {"oiftype", 9},
    {"skuid", 10},       {"skgid", 11},       {"nftrace", 12},    {"rtclassid", 13},   {"secmark", 14},
    {"nfproto", 15},     {"l4proto", 16},     {"bri_iifname", 17}, {"bri_oifname", 18}, {"pkttype", 19},
    {"cpu", 20},         {"iifgroup", 21},    {"oifgroup", 22},   {"cgroup", 23},      {"random", 24},
    {"secpath", 25},     {"iifkind", 26},     {"oifkind", 27},    {"bri_iifpvid", 28}, {"bri_iifvproto", 29},
    {"time", 30},        {"day", 31},         {"hour", 32},       {"sdif", 33},        {"sdifname", 34},
    {nullptr, 0}};
const EnumEntry kCmpOps[] = {{"eq", 0}, {"neq", 1}, {"lt", 2}, {"lte", 3}, {"gt", 4}, {"gte", 5}, {nullptr, 0}};
const EnumEntry kBitwiseOps[] = {{"bool", 0}, {"lshift", 1}, {"rshift", 2}, {nullptr, 0}};
const EnumEntry kCtKeys[] = {
    {"state", 0},      {"direction", 1}, {"status", 2},    {"mark", 3},       {"secmark", 4},
    {"expiration", 5}, {"helper", 6},    {"l3protocol", 7}, {"src", 8},       {"dst", 9},
    {"protocol", 10},  {"proto-src", 11}, {"proto-dst", 12}, {"label", 13},   {"packets", 14},
    {"bytes", 15},     {"avgpkt", 16},   {"zone", 17},     {"event", 18},     {"ip saddr", 19},
    {"ip daddr", 20},  {"ip6 saddr", 21}, {"ip6 daddr", 22}, {"id", 23},      {nullptr, 0}};
const EnumEntry kCtDir[] = {{"original", 0}, {"reply", 1}, {nullptr, 0}};
const EnumEntry kNatTypes[] = {{"snat", 0}, {"dnat", 1}, {nullptr, 0}};
const EnumEntry kNfproto[] = {{"inet", 1}, {"ip", 2}, {"ip6", 10}, {nullptr, 0}};
const EnumEntry kRejectTypes[] = {{"icmp", 0}, {"tcp-reset", 1}, {"icmpx", 2}, {nullptr, 0}};
const EnumEntry kFibResults[] = {{"oif", 1}, {"oifname", 2}, {"type", 3}, {nullptr, 0}};
const EnumEntry kLimitTypes[] = {{"packets", 0}, {"bytes", 1}, {nullptr, 0}};
const EnumEntry kDynsetOps[] = {{"add", NFT_DYNSET_OP_ADD}, {"update", NFT_DYNSET_OP_UPDATE}, {"delete", NFT_DYNSET_OP_DELETE}, {nullptr, 0}};
const EnumEntry kNgTypes[] = {{"incremental", NFT_NG_INCREMENTAL}, {"random", NFT_NG_RANDOM}, {nullptr, 0}};
const EnumEntry kHashTypes[] = {{"jhash", NFT_HASH_JENKINS}, {"symhash", NFT_HASH_SYM}, {nullptr, 0}};
const EnumEntry kVerdicts[] = {{"drop", NF_DROP},        {"accept", NF_ACCEPT},     {"stolen", NF_STOLEN},
                               {"queue", NF_QUEUE},      {"repeat", NF_REPEAT},     {"continue", NFT_CONTINUE},
                               {"break", NFT_BREAK},     {"jump", NFT_JUMP},        {"goto", NFT_GOTO},
                               {"return", NFT_RETURN},   {nullptr, 0}};

FieldSchema Reg(const char* js, uint16_t attr) {
  FieldSchema f{js, attr, ValueKind::kBe32};
  f.is_register = true;
  return f;
}
FieldSchema Num(const char* js, uint16_t attr, ValueKind k = ValueKind::kBe32) { return FieldSchema{js, attr, k}; }
FieldSchema En(const char* js, uint16_t attr, const EnumEntry* t, ValueKind k = ValueKind::kBe32) {
  return FieldSchema{js, attr, k, t};
}
FieldSchema Bool(const char* js, uint16_t attr) {
  FieldSchema f{js, attr, ValueKind::kBe32};
  f.is_bool = true;
  return f;
}

std::vector<ExprSchema> MakeSchemas() {
  using K = ValueKind;
  return {
      {"payload",
       {Reg("dreg", NFTA_PAYLOAD_DREG), En("base", NFTA_PAYLOAD_BASE, kPayloadBase), Num("offset", NFTA_PAYLOAD_OFFSET),
        Num("len", NFTA_PAYLOAD_LEN), Reg("sreg", NFTA_PAYLOAD_SREG), Num("csumType", NFTA_PAYLOAD_CSUM_TYPE),
        Num("csumOffset", NFTA_PAYLOAD_CSUM_OFFSET), Num("csumFlags", NFTA_PAYLOAD_CSUM_FLAGS)}},
      {"meta", {En("key", NFTA_META_KEY, kMetaKeys), Reg("dreg", NFTA_META_DREG), Reg("sreg", NFTA_META_SREG)}},
      {"cmp", {Reg("sreg", NFTA_CMP_SREG), En("op", NFTA_CMP_OP, kCmpOps), Num("data", NFTA_CMP_DATA, K::kData)}},
      {"bitwise",
       {Reg("sreg", NFTA_BITWISE_SREG), Reg("dreg", NFTA_BITWISE_DREG), En("op", NFTA_BITWISE_OP, kBitwiseOps),
        Num("len", NFTA_BITWISE_LEN), Num("mask", NFTA_BITWISE_MASK, K::kData), Num("xor", NFTA_BITWISE_XOR, K::kData),
        Num("data", NFTA_BITWISE_DATA, K::kData)}},
      {"lookup",
       {Reg("sreg", NFTA_LOOKUP_SREG), Reg("dreg", NFTA_LOOKUP_DREG), Num("set", NFTA_LOOKUP_SET, K::kStr),
        Num("setId", NFTA_LOOKUP_SET_ID), Bool("invert", NFTA_LOOKUP_FLAGS)}},
      // "data" and "verdict" share NFTA_IMMEDIATE_DATA; the binding picks whichever is set.
      {"immediate", {Reg("dreg", NFTA_IMMEDIATE_DREG), Num("data", NFTA_IMMEDIATE_DATA, K::kData)}},
      {"counter", {Num("bytes", NFTA_COUNTER_BYTES, K::kBe64), Num("packets", NFTA_COUNTER_PACKETS, K::kBe64)}},
      {"ct",
       {En("key", NFTA_CT_KEY, kCtKeys), Reg("dreg", NFTA_CT_DREG), En("direction", NFTA_CT_DIRECTION, kCtDir, K::kU8),
        Reg("sreg", NFTA_CT_SREG)}},
      {"nat",
       {En("nat", NFTA_NAT_TYPE, kNatTypes), En("family", NFTA_NAT_FAMILY, kNfproto),
        Reg("addrMin", NFTA_NAT_REG_ADDR_MIN), Reg("addrMax", NFTA_NAT_REG_ADDR_MAX),
        Reg("protoMin", NFTA_NAT_REG_PROTO_MIN), Reg("protoMax", NFTA_NAT_REG_PROTO_MAX), Num("flags", NFTA_NAT_FLAGS)}},
      {"masq",
       {Num("flags", NFTA_MASQ_FLAGS), Reg("protoMin", NFTA_MASQ_REG_PROTO_MIN),
        Reg("protoMax", NFTA_MASQ_REG_PROTO_MAX)}},
      {"reject", {En("rejectType", NFTA_REJECT_TYPE, kRejectTypes), Num("code", NFTA_REJECT_ICMP_CODE, K::kU8)}},
      {"fib", {Num("flags", NFTA_FIB_FLAGS), En("result", NFTA_FIB_RESULT, kFibResults), Reg("dreg", NFTA_FIB_DREG)}},
      {"numgen",
       {Reg("dreg", NFTA_NG_DREG), Num("modulus", NFTA_NG_MODULUS), En("ngType", NFTA_NG_TYPE, kNgTypes),
        Num("offset", NFTA_NG_OFFSET)}},
      {"hash",
       {Reg("sreg", NFTA_HASH_SREG), Reg("dreg", NFTA_HASH_DREG), Num("len", NFTA_HASH_LEN),
        Num("modulus", NFTA_HASH_MODULUS), Num("seed", NFTA_HASH_SEED), Num("offset", NFTA_HASH_OFFSET),
        En("hashType", NFTA_HASH_TYPE, kHashTypes)}},
      // libnftnl's order; NFTA_DYNSET_EXPR(ESSIONS), the per-element statements, stay raw
      {"dynset",
       {Reg("sregKey", NFTA_DYNSET_SREG_KEY), Reg("sregData", NFTA_DYNSET_SREG_DATA), En("op", NFTA_DYNSET_OP, kDynsetOps),
        Num("timeout", NFTA_DYNSET_TIMEOUT, K::kBe64), Num("set", NFTA_DYNSET_SET_NAME, K::kStr),
        Num("setId", NFTA_DYNSET_SET_ID), Num("flags", NFTA_DYNSET_FLAGS)}},
      {"limit",
       {Num("rate", NFTA_LIMIT_RATE, K::kBe64), Num("unit", NFTA_LIMIT_UNIT, K::kBe64), Num("burst", NFTA_LIMIT_BURST),
        En("limitType", NFTA_LIMIT_TYPE, kLimitTypes), Num("flags", NFTA_LIMIT_FLAGS)}},
      {"log",
       {Num("prefix", NFTA_LOG_PREFIX, K::kStr), Num("group", NFTA_LOG_GROUP, K::kBe16),
        Num("snaplen", NFTA_LOG_SNAPLEN), Num("qthreshold", NFTA_LOG_QTHRESHOLD, K::kBe16),
        Num("level", NFTA_LOG_LEVEL), Num("flags", NFTA_LOG_FLAGS)}},
  };
}

}  // namespace

const std::vector<ExprSchema>& ExprSchemas() {
  static const std::vector<ExprSchema> s = MakeSchemas();
  return s;
}

const ExprSchema* FindExprSchema(const std::string& name) {
  for (const ExprSchema& s : ExprSchemas())
    if (name == s.name) return &s;
  return nullptr;
}

const EnumEntry* VerdictNames() { return kVerdicts; }

const char* EnumName(const EnumEntry* t, int64_t v) {
  for (; t && t->name; t++)
    if (t->value == v) return t->name;
  return nullptr;
}

void EncodeVerdict(nl::AttrWriter& w, uint16_t attr, const Verdict& v) {
  const size_t outer = w.Begin(attr | nl::kNested);
  const size_t inner = w.Begin(NFTA_DATA_VERDICT | nl::kNested);
  w.Be32(NFTA_VERDICT_CODE, static_cast<uint32_t>(v.code));
  if (v.code == NFT_JUMP || v.code == NFT_GOTO) w.Str(NFTA_VERDICT_CHAIN, v.chain);
  w.End(inner);
  w.End(outer);
}

bool DecodeVerdict(nl::AttrReader r, Verdict* v) {
  while (r.Next()) {
    if (r.type() == NFTA_VERDICT_CODE) v->code = static_cast<int32_t>(r.Be32());
    else if (r.type() == NFTA_VERDICT_CHAIN) v->chain = r.Str();
  }
  return r.ok();
}

bool DecodeData(nl::AttrReader r, std::vector<uint8_t>* out, Verdict* v, bool* is_verdict) {
  *is_verdict = false;
  while (r.Next()) {
    if (r.type() == NFTA_DATA_VALUE) {
      *out = r.Bytes();
    } else if (r.type() == NFTA_DATA_VERDICT) {
      *is_verdict = true;
      if (!DecodeVerdict(r.Nested(), v)) return false;
    }
  }
  return r.ok();
}

void EncodeExprs(nl::AttrWriter& w, uint16_t list_attr, const std::vector<Expr>& exprs) {
  const size_t list = w.Begin(list_attr | nl::kNested);
  for (const Expr& e : exprs) {
    const size_t elem = w.Begin(NFTA_LIST_ELEM | nl::kNested);
    w.Str(NFTA_EXPR_NAME, e.name);
    const size_t data = w.Begin(NFTA_EXPR_DATA | nl::kNested);
    for (const ExprAttr& a : e.attrs) {
      switch (a.kind) {
        case ValueKind::kU8: w.U8(a.type, static_cast<uint8_t>(a.num)); break;
        case ValueKind::kBe16: w.Be16(a.type, static_cast<uint16_t>(a.num)); break;
        case ValueKind::kBe32: w.Be32(a.type, static_cast<uint32_t>(a.num)); break;
        case ValueKind::kBe64: w.Be64(a.type, a.num); break;
        case ValueKind::kStr: w.Str(a.type, a.str); break;
        case ValueKind::kData: {
          const size_t d = w.Begin(a.type | nl::kNested);
          w.Put(NFTA_DATA_VALUE, a.bytes.data(), a.bytes.size());
          w.End(d);
          break;
        }
        case ValueKind::kVerdict: EncodeVerdict(w, a.type, a.verdict); break;
        case ValueKind::kRaw: w.Put(a.type, a.bytes.data(), a.bytes.size()); break;
      }
    }
    w.End(data);
    w.End(elem);
  }
  w.End(list);
}

namespace {

bool DecodeExpr(nl::AttrReader r, Expr* e, std::string* why) {
  bool have_data = false;
  nl::AttrReader data(nullptr, 0);
  while (r.Next()) {
    if (r.type() == NFTA_EXPR_NAME) e->name = r.Str();
    else if (r.type() == NFTA_EXPR_DATA) {
      data = r.Nested();
      have_data = true;
    }
  }
  if (!r.ok(why)) return false;
  if (e->name.empty()) return nl::Refuse(why, "expression without a name");
  if (!have_data) return true;
  const ExprSchema* s = FindExprSchema(e->name);
  while (data.Next()) {
    ExprAttr a;
    a.type = data.type();
    const FieldSchema* f = nullptr;
    if (s)
      for (const FieldSchema& x : s->fields)
        if (x.attr == a.type) f = &x;
    if (!f) {
      a.kind = ValueKind::kRaw;
      a.type = static_cast<uint16_t>(a.type | (data.nested_flag() ? nl::kNested : 0) |
                                     (data.net_byteorder_flag() ? nl::kNetByteOrder : 0));
      a.bytes = data.Bytes();
      e->attrs.push_back(std::move(a));
      continue;
    }
    a.kind = f->kind;
    switch (f->kind) {
      case ValueKind::kU8: a.num = data.U8(); break;
      case ValueKind::kBe16: a.num = data.Be16(); break;
      case ValueKind::kBe32: a.num = data.Be32(); break;
      case ValueKind::kBe64: a.num = data.Be64(); break;
      case ValueKind::kStr: a.str = data.Str(); break;
      case ValueKind::kData:
      case ValueKind::kVerdict: {
        bool is_verdict = false;
        if (!DecodeData(data.Nested(), &a.bytes, &a.verdict, &is_verdict)) break;
        a.kind = is_verdict ? ValueKind::kVerdict : ValueKind::kData;
        break;
      }
      case ValueKind::kRaw: a.bytes = data.Bytes(); break;
    }
    e->attrs.push_back(std::move(a));
  }
  if (!data.ok()) return nl::Refuse(why, e->name + ": " + data.error());
  return true;
}

}  // namespace

bool DecodeExprs(nl::AttrReader r, std::vector<Expr>* out, std::string* why) {
  while (r.Next()) {
    if (r.type() != NFTA_LIST_ELEM) continue;
    Expr e;
    if (!DecodeExpr(r.Nested(), &e, why)) return false;
    out->push_back(std::move(e));
  }
  if (!r.ok(why)) return false;
  return true;
}

}  // namespace nft
