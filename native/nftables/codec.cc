// Tables, chains, sets, elements and rules <-> nf_tables messages, and the transaction builder.
// Attribute order and message flags follow what nft 1.0.6 (libnftnl) sends, so golden captures
// of `nft` compare byte for byte (test/fixtures/nftables/golden.json).
#include <arpa/inet.h>

#include <cstring>
#include <mutex>

#include "nftables/codec.h"

namespace nft {

namespace {

const char* const kMsgNames[] = {
    "NFT_MSG_NEWTABLE",   "NFT_MSG_GETTABLE",     "NFT_MSG_DELTABLE",      "NFT_MSG_NEWCHAIN",
    "NFT_MSG_GETCHAIN",   "NFT_MSG_DELCHAIN",     "NFT_MSG_NEWRULE",       "NFT_MSG_GETRULE",
    "NFT_MSG_DELRULE",    "NFT_MSG_NEWSET",       "NFT_MSG_GETSET",        "NFT_MSG_DELSET",
    "NFT_MSG_NEWSETELEM", "NFT_MSG_GETSETELEM",   "NFT_MSG_DELSETELEM",    "NFT_MSG_NEWGEN",
    "NFT_MSG_GETGEN",     "NFT_MSG_TRACE",        "NFT_MSG_NEWOBJ",        "NFT_MSG_GETOBJ",
    "NFT_MSG_DELOBJ",     "NFT_MSG_GETOBJ_RESET", "NFT_MSG_NEWFLOWTABLE",  "NFT_MSG_GETFLOWTABLE",
    "NFT_MSG_DELFLOWTABLE", "NFT_MSG_GETRULE_RESET", "NFT_MSG_DESTROYTABLE", "NFT_MSG_DESTROYCHAIN",
    "NFT_MSG_DESTROYRULE", "NFT_MSG_DESTROYSET",  "NFT_MSG_DESTROYSETELEM",
};

const char* FamilyName(uint8_t f) {
  switch (f) {
    case 1: return "inet";
    case 2: return "ip";
    case 10: return "ip6";
    case 0: return "unspec";
    default: return "?";
  }
}

void Begin(nl::Batch& b, uint16_t msg, uint16_t flags, uint8_t family) {
  b.Begin(MsgType(msg), static_cast<uint16_t>(NLM_F_REQUEST | flags));
  b.NfgenHeader(family, NFNETLINK_V0, 0);
}

// A message about one set's elements, its table and set named; the caller adds the rest.
nl::AttrWriter BeginElements(nl::Batch& b, uint16_t msg, uint16_t flags, uint8_t family, const std::string& table,
                             const std::string& set) {
  Begin(b, msg, flags, family);
  nl::AttrWriter w = b.Attrs();
  w.Str(NFTA_SET_ELEM_LIST_TABLE, table);
  w.Str(NFTA_SET_ELEM_LIST_SET, set);
  return w;
}

void EncodeTableMsg(nl::Batch& b, uint16_t msg, uint16_t flags, const Table& t) {
  Begin(b, msg, flags, t.family);
  nl::AttrWriter w = b.Attrs();
  if (!t.name.empty()) w.Str(NFTA_TABLE_NAME, t.name);
  if (msg == NFT_MSG_NEWTABLE) {
    w.Be32(NFTA_TABLE_FLAGS, t.flags);
    if (!t.userdata.empty()) w.Bytes(NFTA_TABLE_USERDATA, t.userdata);
  } else if (t.handle) {
    w.Be64(NFTA_TABLE_HANDLE, t.handle);
  }
}

void EncodeChainMsg(nl::Batch& b, uint16_t msg, uint16_t flags, const Chain& c) {
  Begin(b, msg, flags, c.family);
  nl::AttrWriter w = b.Attrs();
  w.Str(NFTA_CHAIN_TABLE, c.table);
  if (c.handle && msg != NFT_MSG_NEWCHAIN) w.Be64(NFTA_CHAIN_HANDLE, c.handle);
  if (!c.name.empty()) w.Str(NFTA_CHAIN_NAME, c.name);
  if (msg != NFT_MSG_NEWCHAIN || !c.base) return;
  w.Str(NFTA_CHAIN_TYPE, c.type);
  if (c.has_policy) w.Be32(NFTA_CHAIN_POLICY, c.policy);
  const size_t hook = w.Begin(NFTA_CHAIN_HOOK | nl::kNested);
  w.Be32(NFTA_HOOK_HOOKNUM, c.hooknum);
  w.Be32(NFTA_HOOK_PRIORITY, static_cast<uint32_t>(c.priority));
  if (!c.device.empty()) w.Str(NFTA_HOOK_DEV, c.device);
  w.End(hook);
  if (!c.userdata.empty()) w.Bytes(NFTA_CHAIN_USERDATA, c.userdata);
}

void EncodeSetMsg(nl::Batch& b, uint16_t msg, uint16_t flags, const Set& s) {
  Begin(b, msg, flags, s.family);
  nl::AttrWriter w = b.Attrs();
  w.Str(NFTA_SET_TABLE, s.table);
  if (!s.name.empty()) w.Str(NFTA_SET_NAME, s.name);
  if (msg != NFT_MSG_NEWSET) {
    if (s.handle) w.Be64(NFTA_SET_HANDLE, s.handle);
    return;
  }
  w.Be32(NFTA_SET_FLAGS, s.flags);
  w.Be32(NFTA_SET_KEY_TYPE, s.key_type);
  w.Be32(NFTA_SET_KEY_LEN, s.key_len);
  if (s.has_data) {
    w.Be32(NFTA_SET_DATA_TYPE, s.data_type);
    w.Be32(NFTA_SET_DATA_LEN, s.data_len);
  }
  w.Be32(NFTA_SET_ID, s.id);
  if (s.size || !s.concat_lens.empty()) {
    const size_t desc = w.Begin(NFTA_SET_DESC | nl::kNested);
    if (s.size) w.Be32(NFTA_SET_DESC_SIZE, s.size);
    if (!s.concat_lens.empty()) {
      const size_t concat = w.Begin(NFTA_SET_DESC_CONCAT | nl::kNested);
      for (uint8_t len : s.concat_lens) {
        const size_t e = w.Begin(NFTA_LIST_ELEM | nl::kNested);
        w.Be32(NFTA_SET_FIELD_LEN, len);
        w.End(e);
      }
      w.End(concat);
    }
    w.End(desc);
  }
  if (s.timeout_ms) w.Be64(NFTA_SET_TIMEOUT, s.timeout_ms);
  if (s.gc_interval_ms) w.Be32(NFTA_SET_GC_INTERVAL, s.gc_interval_ms);
  if (!s.userdata.empty()) w.Bytes(NFTA_SET_USERDATA, s.userdata);
}

void EncodeData(nl::AttrWriter& w, uint16_t attr, const std::vector<uint8_t>& v) {
  const size_t d = w.Begin(attr | nl::kNested);
  w.Put(NFTA_DATA_VALUE, v.data(), v.size());
  w.End(d);
}

size_t EncodeElement(nl::AttrWriter& w, uint16_t index, const Element& e, bool full) {
  const size_t start = w.buffer().size();
  const size_t tok = w.Begin(index | nl::kNested);
  if (e.has_flags || e.flags) w.Be32(NFTA_SET_ELEM_FLAGS, e.flags);
  if (full && e.timeout_ms) w.Be64(NFTA_SET_ELEM_TIMEOUT, e.timeout_ms);
  EncodeData(w, NFTA_SET_ELEM_KEY, e.key);
  if (!e.key_end.empty()) EncodeData(w, NFTA_SET_ELEM_KEY_END, e.key_end);
  if (full) {
    if (e.has_verdict) EncodeVerdict(w, NFTA_SET_ELEM_DATA, e.verdict);
    else if (!e.data.empty()) EncodeData(w, NFTA_SET_ELEM_DATA, e.data);
    if (!e.comment.empty()) {
      std::vector<uint8_t> ud;
      UdataPutStr(ud, kUdataElemComment, e.comment);
      w.Bytes(NFTA_SET_ELEM_USERDATA, ud);
    }
  }
  w.End(tok);
  return w.buffer().size() - start;
}

void EncodeRuleMsg(nl::Batch& b, uint16_t msg, uint16_t flags, const Rule& r, bool with_exprs) {
  Begin(b, msg, flags, r.family);
  nl::AttrWriter w = b.Attrs();
  w.Str(NFTA_RULE_TABLE, r.table);
  if (!r.chain.empty()) w.Str(NFTA_RULE_CHAIN, r.chain);
  if (r.handle) w.Be64(NFTA_RULE_HANDLE, r.handle);
  if (r.position) w.Be64(NFTA_RULE_POSITION, r.position);
  if (!with_exprs) return;
  if (!r.comment.empty()) {
    std::vector<uint8_t> ud;
    UdataPutStr(ud, kUdataRuleComment, r.comment);
    w.Bytes(NFTA_RULE_USERDATA, ud);
  }
  EncodeExprs(w, NFTA_RULE_EXPRESSIONS, r.exprs);
}

void BatchMarker(nl::Batch& b, uint16_t type, const TxOptions& opt) {
  b.Begin(type, NLM_F_REQUEST);
  b.NfgenHeader(AF_UNSPEC, NFNETLINK_V0, NFNL_SUBSYS_NFTABLES);
  if (type == NFNL_MSG_BATCH_BEGIN && opt.has_gen_id) b.Attrs().Be32(NFNL_BATCH_GENID, opt.gen_id);
}

uint16_t MsgFor(Kind k, Verb v) {
  static const uint16_t table[5][3] = {
      {NFT_MSG_NEWTABLE, NFT_MSG_DELTABLE, kMsgDestroyTable},
      {NFT_MSG_NEWCHAIN, NFT_MSG_DELCHAIN, kMsgDestroyChain},
      {NFT_MSG_NEWSET, NFT_MSG_DELSET, kMsgDestroySet},
      {NFT_MSG_NEWSETELEM, NFT_MSG_DELSETELEM, kMsgDestroySetElem},
      {NFT_MSG_NEWRULE, NFT_MSG_DELRULE, kMsgDestroyRule},
  };
  const int col = v == Verb::kDelete ? 1 : v == Verb::kDestroy ? 2 : 0;
  return table[static_cast<int>(k)][col];
}

}  // namespace

const char* MsgName(uint16_t msg) {
  return msg < sizeof kMsgNames / sizeof kMsgNames[0] ? kMsgNames[msg] : "NFT_MSG_?";
}

std::string OpName(const Op& op, uint16_t msg) {
  std::string s = MsgName(msg);
  switch (op.kind) {
    case Kind::kTable: return s + " " + FamilyName(op.table.family) + " " + op.table.name;
    case Kind::kChain: return s + " " + FamilyName(op.chain.family) + " " + op.chain.table + " " + op.chain.name;
    case Kind::kSet: return s + " " + FamilyName(op.set.family) + " " + op.set.table + " " + op.set.name;
    case Kind::kElements:
      return s + " " + FamilyName(op.ref.family) + " " + op.ref.table + " " + op.ref.set + " (" +
             std::to_string(op.elements.size()) + " elements)";
    case Kind::kRule: {
      s += std::string(" ") + FamilyName(op.rule.family) + " " + op.rule.table;
      if (!op.rule.chain.empty()) s += " " + op.rule.chain;
      if (op.rule.handle) s += " handle " + std::to_string(op.rule.handle);
      return s;
    }
  }
  return s;
}

namespace {
// One spare batch buffer, the largest a commit gave back (kept mapped and faulted in: a 10k
// service table's 8 MB batch written into fresh memory costs ~2,000 page faults per commit).
std::mutex g_spare_mu;
std::vector<uint8_t> g_spare;
constexpr size_t kMaxSpare = size_t{64} << 20;

std::vector<uint8_t> TakeSpareBuffer() {
  std::lock_guard<std::mutex> lock(g_spare_mu);
  return std::move(g_spare);
}
}  // namespace

void RecycleBatchBuffer(std::vector<uint8_t>&& b) {
  if (b.capacity() > kMaxSpare) return;
  b.clear();
  std::lock_guard<std::mutex> lock(g_spare_mu);
  if (b.capacity() > g_spare.capacity()) g_spare.swap(b);
}

TxBuilder::TxBuilder(const TxOptions& opt, size_t reserve_bytes) : opt_(opt), reserve_(reserve_bytes) {}

void TxBuilder::Open(size_t op) {
  out_.emplace_back();
  TxBatch& t = out_.back();
  if (reserve_) {
    t.batch.buffer() = TakeSpareBuffer();
    t.batch.buffer().reserve(reserve_);
    reserve_ = 0;  // only the first (usually the only) transaction
  }
  t.first_op = op;
  t.end_op = op;
  BatchMarker(t.batch, NFNL_MSG_BATCH_BEGIN, opt_);
  t.op_index.push_back(-1);
  weight_ = 0;
}

void TxBuilder::Close() {
  TxBatch& t = out_.back();
  // AckMode::kLast: one ack, on the last op message, confirms that the kernel went through the
  // whole batch (failures are reported per message with or without NLM_F_ACK).
  if (opt_.ack_mode == AckMode::kLast && t.batch.size() > 1) {
    t.batch.Seal();
    t.batch.header(t.batch.size() - 1)->nlmsg_flags |= NLM_F_ACK;
  }
  BatchMarker(t.batch, NFNL_MSG_BATCH_END, opt_);
  t.op_index.push_back(-1);
  t.batch.Seal();
}

// Called before each message: starts a new transaction when the current one is full.
void TxBuilder::Room(size_t op, size_t w) {
  if (out_.empty()) {
    Open(op);
  } else if (opt_.max_weight && weight_ > 0 && weight_ + w > opt_.max_weight) {
    Close();
    Open(op);
  }
  weight_ += w;
  TxBatch& t = out_.back();
  t.op_index.push_back(static_cast<int64_t>(op));
  if (t.end_op < op + 1) t.end_op = op + 1;
  if (t.first_op > op) t.first_op = op;
}

std::vector<TxBatch> TxBuilder::Finish() {
  if (!out_.empty()) Close();
  return std::move(out_);
}

void TxBuilder::Add(const Op& op, size_t i) {
  const uint16_t ack = opt_.ack_mode == AckMode::kAll ? NLM_F_ACK : 0;
  const bool excl = op.verb == Verb::kCreate;
  // What a chain, set or elements op asks of an existing object: add updates it, create refuses.
  const uint16_t create = op.verb == Verb::kAdd ? NLM_F_CREATE : excl ? NLM_F_CREATE | NLM_F_EXCL : 0;
  if (op.kind == Kind::kElements) {
    const uint16_t msg = MsgFor(op.kind, op.verb);
    const bool adding = msg == NFT_MSG_NEWSETELEM;
    const uint16_t f = static_cast<uint16_t>(ack | create);
    size_t e = 0;
    do {  // one message per ~max_elem_bytes of elements (an empty op still sends one)
      Room(i, 1);  // a message weighs 1 + one per element beyond the first
      nl::Batch& b = out_.back().batch;
      nl::AttrWriter w = BeginElements(b, msg, f, op.ref.family, op.ref.table, op.ref.set);
      if (adding && op.ref.set_id) w.Be32(NFTA_SET_ELEM_LIST_SET_ID, op.ref.set_id);
      const size_t list = w.Begin(NFTA_SET_ELEM_LIST_ELEMENTS | nl::kNested);
      size_t bytes = 0;
      uint16_t idx = 0;
      while (e < op.elements.size()) {
        // weight already counts this message as 1: it holds 1 + (idx) elements' worth
        if (opt_.max_weight && idx > 0 && weight_ - 1 + idx >= opt_.max_weight) break;
        const size_t mark = b.buffer().size();
        const size_t n = EncodeElement(w, static_cast<uint16_t>(idx + 1), op.elements[e], adding);
        if (idx > 0 && bytes + n > opt_.max_elem_bytes) {
          b.buffer().resize(mark);  // does not fit: it opens the next message
          break;
        }
        bytes += n;
        idx++;
        e++;
      }
      w.End(list);
      weight_ += idx > 0 ? idx - 1 : 0;
    } while (e < op.elements.size());
    return;
  }
  Room(i, 1);
  nl::Batch& b = out_.back().batch;
  switch (op.kind) {
    case Kind::kTable:
      if (op.verb == Verb::kFlush) {
        Rule r;
        r.family = op.table.family;
        r.table = op.table.name;
        EncodeRuleMsg(b, NFT_MSG_DELRULE, ack, r, false);
      } else {
        // nft sends NEWTABLE without NLM_F_CREATE; the kernel creates or updates either way.
        const uint16_t f = excl ? NLM_F_CREATE | NLM_F_EXCL : 0;
        EncodeTableMsg(b, MsgFor(op.kind, op.verb), static_cast<uint16_t>(ack | f), op.table);
      }
      break;
    case Kind::kChain:
      if (op.verb == Verb::kFlush) {
        Rule r;
        r.family = op.chain.family;
        r.table = op.chain.table;
        r.chain = op.chain.name;
        EncodeRuleMsg(b, NFT_MSG_DELRULE, ack, r, false);
      } else {
        EncodeChainMsg(b, MsgFor(op.kind, op.verb), static_cast<uint16_t>(ack | create), op.chain);
      }
      break;
    case Kind::kSet:
      if (op.verb == Verb::kFlush)
        BeginElements(b, NFT_MSG_DELSETELEM, ack, op.set.family, op.set.table, op.set.name);
      else
        EncodeSetMsg(b, MsgFor(op.kind, op.verb), static_cast<uint16_t>(ack | create), op.set);
      break;
    case Kind::kElements: break;  // above
    case Kind::kRule:
      switch (op.verb) {
        case Verb::kAdd:
        case Verb::kCreate:
          EncodeRuleMsg(b, NFT_MSG_NEWRULE, static_cast<uint16_t>(ack | NLM_F_CREATE | NLM_F_APPEND), op.rule, true);
          break;
        case Verb::kInsert:
          EncodeRuleMsg(b, NFT_MSG_NEWRULE, static_cast<uint16_t>(ack | NLM_F_CREATE), op.rule, true);
          break;
        case Verb::kReplace:
          EncodeRuleMsg(b, NFT_MSG_NEWRULE, static_cast<uint16_t>(ack | NLM_F_REPLACE), op.rule, true);
          break;
        case Verb::kDelete:
        case Verb::kDestroy:
        case Verb::kFlush:
          EncodeRuleMsg(b, op.verb == Verb::kDestroy ? kMsgDestroyRule : static_cast<uint16_t>(NFT_MSG_DELRULE), ack, op.rule, false);
          break;
      }
      break;
  }
}

void EncodeGetGen(nl::Batch& b) { Begin(b, NFT_MSG_GETGEN, 0, AF_UNSPEC); }

bool DecodeGen(const nlmsghdr* h, uint32_t* gen_id, std::string* why) {
  if (h->nlmsg_type != MsgType(NFT_MSG_NEWGEN)) return nl::Refuse(why, "not an NFT_MSG_NEWGEN message");
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  bool found = false;
  while (r.Next())
    if (r.type() == NFTA_GEN_ID) nl::Store(gen_id, r.Be32(), &found);
  if (!r.ok(why)) return false;
  if (!found) return nl::Refuse(why, "no NFTA_GEN_ID");
  return true;
}

void EncodeDump(nl::Batch& b, uint16_t msg, uint8_t family, const std::string& table) {
  Begin(b, msg, 0, family);
  // NFTA_{CHAIN,SET,RULE}_TABLE are all attribute 1: the kernel filters the dump by table.
  if (!table.empty() && msg != NFT_MSG_GETTABLE) b.Attrs().Str(1, table);
}

void EncodeDumpElements(nl::Batch& b, uint8_t family, const std::string& table, const std::string& set) {
  BeginElements(b, NFT_MSG_GETSETELEM, 0, family, table, set);
}

namespace {

bool Header(const nlmsghdr* h, uint16_t msg, uint8_t* family, std::string* why) {
  if (h->nlmsg_type != MsgType(msg)) return nl::Refuse(why, std::string("expected ") + MsgName(msg));
  if (h->nlmsg_len < NLMSG_HDRLEN + sizeof(nfgenmsg)) return nl::Refuse(why, "message shorter than nfgenmsg");
  *family = reinterpret_cast<const nfgenmsg*>(NLMSG_DATA(h))->nfgen_family;
  return true;
}

}  // namespace

bool DecodeTable(const nlmsghdr* h, Table* t, std::string* why) {
  if (!Header(h, NFT_MSG_NEWTABLE, &t->family, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case NFTA_TABLE_NAME: t->name = r.Str(); break;
      case NFTA_TABLE_FLAGS: t->flags = r.Be32(); break;
      case NFTA_TABLE_USE: t->use = r.Be32(); break;
      case NFTA_TABLE_HANDLE: t->handle = r.Be64(); break;
      case NFTA_TABLE_USERDATA: t->userdata = r.Bytes(); break;
    }
  }
  return r.ok(why);
}

bool DecodeChain(const nlmsghdr* h, Chain* c, std::string* why) {
  if (!Header(h, NFT_MSG_NEWCHAIN, &c->family, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case NFTA_CHAIN_TABLE: c->table = r.Str(); break;
      case NFTA_CHAIN_HANDLE: c->handle = r.Be64(); break;
      case NFTA_CHAIN_NAME: c->name = r.Str(); break;
      case NFTA_CHAIN_HOOK: {
        c->base = true;
        nl::AttrReader hk = r.Nested();
        while (hk.Next()) {
          if (hk.type() == NFTA_HOOK_HOOKNUM) c->hooknum = hk.Be32();
          else if (hk.type() == NFTA_HOOK_PRIORITY) c->priority = static_cast<int32_t>(hk.Be32());
          else if (hk.type() == NFTA_HOOK_DEV) c->device = hk.Str();
        }
        break;
      }
      case NFTA_CHAIN_POLICY: nl::Store(&c->policy, r.Be32(), &c->has_policy); break;
      case NFTA_CHAIN_USE: c->use = r.Be32(); break;
      case NFTA_CHAIN_TYPE: c->type = r.Str(); break;
      case NFTA_CHAIN_FLAGS: c->flags = r.Be32(); break;
      case NFTA_CHAIN_USERDATA: c->userdata = r.Bytes(); break;
    }
  }
  return r.ok(why);
}

bool DecodeSet(const nlmsghdr* h, Set* s, std::string* why) {
  if (!Header(h, NFT_MSG_NEWSET, &s->family, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case NFTA_SET_TABLE: s->table = r.Str(); break;
      case NFTA_SET_NAME: s->name = r.Str(); break;
      case NFTA_SET_FLAGS: s->flags = r.Be32(); break;
      case NFTA_SET_KEY_TYPE: s->key_type = r.Be32(); break;
      case NFTA_SET_KEY_LEN: s->key_len = r.Be32(); break;
      case NFTA_SET_DATA_TYPE: nl::Store(&s->data_type, r.Be32(), &s->has_data); break;
      case NFTA_SET_DATA_LEN: s->data_len = r.Be32(); break;
      case NFTA_SET_ID: s->id = r.Be32(); break;
      case NFTA_SET_TIMEOUT: s->timeout_ms = r.Be64(); break;
      case NFTA_SET_GC_INTERVAL: s->gc_interval_ms = r.Be32(); break;
      case NFTA_SET_USERDATA: s->userdata = r.Bytes(); break;
      case NFTA_SET_HANDLE: s->handle = r.Be64(); break;
      case NFTA_SET_DESC: {
        nl::AttrReader d = r.Nested();
        while (d.Next()) {
          if (d.type() == NFTA_SET_DESC_SIZE) s->size = d.Be32();
          else if (d.type() == NFTA_SET_DESC_CONCAT) {
            nl::AttrReader c = d.Nested();
            while (c.Next()) {
              nl::AttrReader f = c.Nested();
              while (f.Next())
                if (f.type() == NFTA_SET_FIELD_LEN) s->concat_lens.push_back(static_cast<uint8_t>(f.Be32()));
            }
          }
        }
        break;
      }
    }
  }
  return r.ok(why);
}

bool DecodeElements(const nlmsghdr* h, ElementsRef* ref, std::vector<Element>* out, std::string* why) {
  if (!Header(h, NFT_MSG_NEWSETELEM, &ref->family, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case NFTA_SET_ELEM_LIST_TABLE: ref->table = r.Str(); break;
      case NFTA_SET_ELEM_LIST_SET: ref->set = r.Str(); break;
      case NFTA_SET_ELEM_LIST_ELEMENTS: {
        nl::AttrReader list = r.Nested();
        while (list.Next()) {
          Element e;
          nl::AttrReader a = list.Nested();
          while (a.Next()) {
            bool is_verdict = false;
            switch (a.type()) {
              case NFTA_SET_ELEM_KEY: DecodeData(a.Nested(), &e.key, &e.verdict, &is_verdict); break;
              case NFTA_SET_ELEM_KEY_END: DecodeData(a.Nested(), &e.key_end, &e.verdict, &is_verdict); break;
              case NFTA_SET_ELEM_DATA:
                DecodeData(a.Nested(), &e.data, &e.verdict, &is_verdict);
                e.has_verdict = is_verdict;
                break;
              case NFTA_SET_ELEM_FLAGS: nl::Store(&e.flags, a.Be32(), &e.has_flags); break;
              case NFTA_SET_ELEM_TIMEOUT: e.timeout_ms = a.Be64(); break;
              case NFTA_SET_ELEM_EXPIRATION: e.expiration_ms = a.Be64(); break;
              case NFTA_SET_ELEM_USERDATA: e.comment = UdataGetStr(a.Bytes(), kUdataElemComment); break;
            }
          }
          out->push_back(std::move(e));
        }
        break;
      }
    }
  }
  return r.ok(why);
}

bool DecodeRule(const nlmsghdr* h, Rule* rule, std::string* why) {
  if (!Header(h, NFT_MSG_NEWRULE, &rule->family, why)) return false;
  nl::AttrReader r = nl::Attributes(h, sizeof(nfgenmsg));
  while (r.Next()) {
    switch (r.type()) {
      case NFTA_RULE_TABLE: rule->table = r.Str(); break;
      case NFTA_RULE_CHAIN: rule->chain = r.Str(); break;
      case NFTA_RULE_HANDLE: rule->handle = r.Be64(); break;
      case NFTA_RULE_POSITION: rule->position = r.Be64(); break;
      case NFTA_RULE_USERDATA: rule->comment = UdataGetStr(r.Bytes(), kUdataRuleComment); break;
      case NFTA_RULE_EXPRESSIONS:
        if (!DecodeExprs(r.Nested(), &rule->exprs, why)) return false;
        break;
    }
  }
  return r.ok(why);
}

void UdataPut(std::vector<uint8_t>& buf, uint8_t type, const void* data, size_t len) {
  buf.push_back(type);
  buf.push_back(static_cast<uint8_t>(len));
  const uint8_t* p = static_cast<const uint8_t*>(data);
  buf.insert(buf.end(), p, p + len);
}

void UdataPutStr(std::vector<uint8_t>& buf, uint8_t type, const std::string& s) {
  std::string v = s;
  v.push_back('\0');
  UdataPut(buf, type, v.data(), v.size());
}

std::string UdataGetStr(const std::vector<uint8_t>& buf, uint8_t type) {
  size_t off = 0;
  while (off + 2 <= buf.size()) {
    const uint8_t t = buf[off], len = buf[off + 1];
    if (off + 2 + len > buf.size()) return "";
    if (t == type) {
      std::string s(reinterpret_cast<const char*>(&buf[off + 2]), len);
      const size_t nul = s.find('\0');
      if (nul != std::string::npos) s.resize(nul);
      return s;
    }
    off += 2 + len;
  }
  return "";
}

}  // namespace nft
