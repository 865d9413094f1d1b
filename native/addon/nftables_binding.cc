// JS surface of nf_tables: class NftHandle (commit transactions, list the ruleset, read the
// generation id) and codec hooks under codec.nftables for golden-byte tests and fuzzing.
// Ops arrive as one op stream (nftables/wire.h, written by src/kernel/nft-wire.ts): decoding,
// validating, encoding, sending and decoding the replies run on the worker.
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "addon/async.h"
#include "addon/bindings.h"
#include "addon/cpu.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "nftables/codec.h"
#include "nftables/wire.h"

namespace addon {

namespace {

using nft::ValueKind;

// Status bytes per op, as src/kernel/nftables.ts reads them.
enum : uint8_t { kOpNotSent = 0, kOpOk = 1, kOpError = 2, kOpUnknown = 3, kOpRolledBack = 4 };

std::string Hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s(b.size() * 2, '0');
  for (size_t i = 0; i < b.size(); i++) {
    s[2 * i] = d[b[i] >> 4];
    s[2 * i + 1] = d[b[i] & 15];
  }
  return s;
}

Napi::Value VerdictToJs(Napi::Env env, const nft::Verdict& v) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("code", NameOr(env, nft::EnumName(nft::VerdictNames(), v.code), v.code));
  if (!v.chain.empty()) o.Set("chain", v.chain);
  return o;
}

Napi::Value ExprToJs(Napi::Env env, const nft::Expr& e) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("type", e.name);
  const nft::ExprSchema* s = nft::FindExprSchema(e.name);
  Napi::Array unknown = Napi::Array::New(env);
  uint32_t nu = 0;
  for (const nft::ExprAttr& a : e.attrs) {
    const nft::FieldSchema* f = nullptr;
    if (s && a.kind != ValueKind::kRaw)
      for (const nft::FieldSchema& x : s->fields)
        if (x.attr == a.type) f = &x;
    if (!f) {
      Napi::Object u = Napi::Object::New(env);
      u.Set("attr", a.type);
      u.Set("hex", Hex(a.bytes));
      unknown.Set(nu++, u);
      continue;
    }
    switch (a.kind) {
      case ValueKind::kVerdict: o.Set("verdict", VerdictToJs(env, a.verdict)); break;
      case ValueKind::kData: o.Set(f->js, Hex(a.bytes)); break;
      case ValueKind::kStr: o.Set(f->js, a.str); break;
      default: {
        if (f->is_bool) {
          o.Set(f->js, (a.num & 1) != 0);
          break;
        }
        const char* n = f->enums ? nft::EnumName(f->enums, static_cast<int64_t>(a.num)) : nullptr;
        o.Set(f->js, NameOr(env, n, static_cast<double>(a.num)));
      }
    }
  }
  if (nu) o.Set("unknown", unknown);
  return o;
}

nft::TxOptions TxOptionsFromJs(Napi::Env env, Napi::Value v) {
  static const std::string kOp = "nftables commit";
  nft::TxOptions t;
  t.max_weight = UIntOpt(env, v, "maxOpsPerTransaction", 1u << 30, 0, kOp);
  t.max_elem_bytes = UIntOpt(env, v, "maxMessageBytes", 60000, 60000, kOp);
  if (t.max_elem_bytes < 256) ThrowInvalid(env, kOp, "maxMessageBytes must be at least 256");
  // ackMode: 'all' | 'last' | 'none'. 'none': only failures are answered (nfnetlink reports
  // every failed message whether or not it asked for an ack), saving one reply per op.
  const Napi::Value am = Opt(v, "ackMode");
  if (!am.IsUndefined()) {
    const std::string m = am.IsString() ? am.As<Napi::String>().Utf8Value() : "";
    if (m == "all") t.ack_mode = nft::AckMode::kAll;
    else if (m == "last") t.ack_mode = nft::AckMode::kLast;
    else if (m == "none") t.ack_mode = nft::AckMode::kNone;
    else ThrowInvalid(env, kOp, "ackMode must be 'all', 'last' or 'none'");
  }
  if (IsSet(Opt(v, "genId"))) {
    t.has_gen_id = true;
    // A stale generation is refused at BATCH_BEGIN and nothing else in the batch is answered;
    // the socket stops waiting once that reply is in.
    t.gen_id = static_cast<uint32_t>(UIntOpt(env, v, "genId", 0xffffffffu, 0, kOp));
  }
  return t;
}

// ---- results -------------------------------------------------------------------------------

struct TxReport {
  size_t first_op = 0, end_op = 0;
  bool sent = false;
  bool committed = false;
};

struct CommitResult {
  std::vector<uint8_t> statuses;  // per op
  std::vector<nl::Error> errors;
  std::vector<TxReport> txs;
  size_t sendmsg_calls = 0;
};

// Sends the batches; op_name(op index, message type) names a failed op.
template <class OpName>
CommitResult RunCommit(nl::Socket& sock, std::vector<nft::TxBatch>& txs, size_t n_ops, OpName op_name) {
  CommitResult out;
  out.statuses.assign(n_ops, kOpNotSent);
  nl::TransactOptions to;
  to.atomic = true;
  to.stop_on_error = true;
  bool failed = false;
  for (nft::TxBatch& tx : txs) {
    TxReport rep{tx.first_op, tx.end_op, false, false};
    if (failed) {
      out.txs.push_back(rep);
      continue;
    }
    nl::TransactResult res = sock.Transact(tx.batch, to);
    out.sendmsg_calls += res.sendmsg_calls;
    rep.sent = true;
    bool tx_error = false, unknown = false;
    for (size_t m = 0; m < res.results.size(); m++) {
      const nl::RequestResult& r = res.results[m];
      const int64_t opi = tx.op_index[m];
      if (r.outcome == nl::Outcome::kError ||
          (r.outcome == nl::Outcome::kNoReply && r.status.error != 0)) {
        tx_error = tx_error || r.outcome == nl::Outcome::kError;
        unknown = unknown || r.outcome == nl::Outcome::kNoReply;
        std::string name;
        if (opi >= 0) {
          const nl::Batch& b = tx.batch;
          name = op_name(static_cast<size_t>(opi), static_cast<uint16_t>(b.header(m)->nlmsg_type & 0xff));
        } else {
          name = m == 0 ? "NFT_COMMIT" : "NFNL_MSG_BATCH_END";
        }
        nl::Error e = KernelError(name, opi, r.status);
        out.errors.push_back(std::move(e));
        if (opi >= 0) out.statuses[static_cast<size_t>(opi)] = r.outcome == nl::Outcome::kError ? kOpError : kOpUnknown;
      } else if (r.outcome == nl::Outcome::kNoReply && opi >= 0) {
        unknown = true;
      }
    }
    rep.committed = !tx_error && !unknown;
    for (size_t m = 0; m < res.results.size(); m++) {
      const int64_t opi = tx.op_index[m];
      if (opi < 0) continue;
      uint8_t& st = out.statuses[static_cast<size_t>(opi)];
      if (st == kOpError || st == kOpUnknown) continue;
      // Any error aborts the whole batch in the kernel: the other ops were rolled back.
      if (tx_error) st = kOpRolledBack;
      else st = unknown ? kOpUnknown : kOpOk;
    }
    if (!rep.committed) failed = true;
    out.txs.push_back(rep);
  }
  return out;
}

Napi::Value CommitResultToJs(Napi::Env env, CommitResult& r) {
  Napi::Object o = Napi::Object::New(env);
  Napi::Uint8Array st = Napi::Uint8Array::New(env, r.statuses.size());
  for (size_t i = 0; i < r.statuses.size(); i++) st[i] = r.statuses[i];
  o.Set("statuses", st);
  o.Set("errors", ArrayOf(env, r.errors, [&](const nl::Error& e) { return MakeError(env, e); }));
  o.Set("transactions", ArrayOf(env, r.txs, [&](const TxReport& tx) {
          Napi::Object t = Napi::Object::New(env);
          t.Set("firstOp", static_cast<double>(tx.first_op));
          t.Set("endOp", static_cast<double>(tx.end_op));
          t.Set("sent", tx.sent);
          t.Set("committed", tx.committed);
          return t;
        }));
  o.Set("sendmsgCalls", static_cast<double>(r.sendmsg_calls));
  return o;
}

// ---- listing -------------------------------------------------------------------------------

// Values appended in blocks of a fixed size, each its own allocation: a growing listing is
// never reallocated (a vector's doubling copies everything and holds the old and the new
// storage at once), and each block is freed as soon as it is copied out to JavaScript. A block
// of 256 KiB is above glibc's mmap threshold as the daemon runs it, so a freed block goes back
// to the system at once, and its pages not written to were never resident.
template <class T>
class Blocks {
 public:
  static constexpr size_t kPerBlock = (256u << 10) / sizeof(T);

  size_t size() const { return size_; }

  void Append(const T* p, size_t n) {
    while (n > 0) {
      const size_t at = size_ % kPerBlock;
      if (at == 0) blocks_.emplace_back(new T[kPerBlock]);
      const size_t k = std::min(n, kPerBlock - at);
      std::memcpy(blocks_.back().get() + at, p, k * sizeof(T));
      size_ += k;
      p += k;
      n -= k;
    }
  }
  void Push(T v) { Append(&v, 1); }

  // Copies everything to `out` (size() values) and frees each block once copied.
  void MoveTo(T* out) {
    size_t left = size_;
    for (std::unique_ptr<T[]>& b : blocks_) {
      const size_t k = std::min(left, kPerBlock);
      std::memcpy(out, b.get(), k * sizeof(T));
      out += k;
      left -= k;
      b.reset();
    }
    blocks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> blocks_;
  size_t size_ = 0;
};

// A set's elements as the listing hands them to JS: their key, key-end and data bytes back to
// back; where they are: when every element has the same three lengths (a set's keys and values
// have one size, so nearly always), those lengths alone, else `spans`, six numbers per element
// (offset and length of each; length 0: absent); and the rarer parts (flags, verdict, timeouts,
// comment) of the elements that have any, with their index. Each dumped message's elements are
// packed as they are decoded: a listing of 170k elements as nft::Element (three vectors each)
// took ~40 MB at once. (Spans for a 110k-element map are as large as its bytes.)
struct ElementExtra {
  uint32_t index = 0;
  bool has_flags = false;
  uint32_t flags = 0;
  bool has_verdict = false;
  nft::Verdict verdict;
  uint64_t timeout_ms = 0;
  uint64_t expiration_ms = 0;
  std::string comment;
};

struct PackedElements {
  uint32_t count = 0;
  Blocks<uint8_t> bytes;
  // Every element's key, key end and data lengths, while they are all the same (`uniform`);
  // spans only once one differs.
  bool uniform = true;
  uint32_t widths[3] = {0, 0, 0};
  Blocks<uint32_t> spans;
  std::vector<ElementExtra> extras;

  // a verdict wins over data where both came, as the listing reads them
  void Append(nft::Element& e) {
    const std::vector<uint8_t>* parts[3] = {&e.key, &e.key_end, &e.data};
    const uint32_t lens[3] = {static_cast<uint32_t>(e.key.size()), static_cast<uint32_t>(e.key_end.size()),
                              static_cast<uint32_t>(e.data.size())};
    if (count == 0) std::copy(lens, lens + 3, widths);
    if (uniform && !std::equal(lens, lens + 3, widths)) {
      // the elements so far, laid out one after the other with the same lengths
      uniform = false;
      uint32_t off = 0;
      for (uint32_t j = 0; j < count; j++)
        for (uint32_t w : widths) {
          spans.Push(off);
          spans.Push(w);
          off += w;
        }
    }
    const uint32_t i = count++;
    for (int k = 0; k < 3; k++) {
      if (!uniform) {
        spans.Push(static_cast<uint32_t>(bytes.size()));
        spans.Push(lens[k]);
      }
      bytes.Append(parts[k]->data(), parts[k]->size());
    }
    if (!e.has_flags && !e.has_verdict && !e.timeout_ms && !e.expiration_ms && e.comment.empty()) return;
    ElementExtra x;
    x.index = i;
    x.has_flags = e.has_flags;
    x.flags = e.flags;
    x.has_verdict = e.has_verdict;
    x.verdict = std::move(e.verdict);
    x.timeout_ms = e.timeout_ms;
    x.expiration_ms = e.expiration_ms;
    x.comment = std::move(e.comment);
    extras.push_back(std::move(x));
  }
  void AppendAll(std::vector<nft::Element>& elems) {
    for (nft::Element& e : elems) Append(e);
    elems.clear();
  }
};

struct SetWithElements {
  nft::Set set;
  PackedElements elements;
};

struct Listing {
  uint32_t gen_id = 0;
  std::vector<nft::Table> tables;
  std::vector<nft::Chain> chains;
  std::vector<SetWithElements> sets;
  std::vector<nft::Rule> rules;
  bool want_elements = true;
};

uint32_t GetGen(nl::Socket& sock) {
  nl::Batch b;
  nft::EncodeGetGen(b);
  b.header(0)->nlmsg_flags |= NLM_F_ACK;
  nl::TransactResult res = sock.Transact(b, nl::TransactOptions{});
  if (res.results[0].outcome == nl::Outcome::kError) {
    const nl::Status& st = res.results[0].status;
    nl::Error e = KernelError("NFT_MSG_GETGEN", -1, st);
    // nfnetlink answers a message for a subsystem it does not have (nf_tables neither built in
    // nor loadable: the module autoload, request_module("nfnetlink-subsys-10"), failed) with
    // EINVAL (EOPNOTSUPP in a batch). A well-formed GETGEN draws no other EINVAL; EPERM stays the
    // caller's missing CAP_NET_ADMIN (kind 'kernel'), as for every other handle.
    if (st.error == EINVAL || st.error == EOPNOTSUPP) {
      e.kind = nl::ErrorKind::kUnsupported;
      e.message = "NFT_MSG_GETGEN: the kernel has no nftables support (module nf_tables is not loaded): " + e.code;
    }
    throw nl::Exception(std::move(e));
  }
  if (!res.data.empty()) return Decoded(Msg(res.data[0].bytes), nft::DecodeGen, "NFT_MSG_GETGEN");
  nl::ThrowDecode("NFT_MSG_GETGEN", "no generation in the reply");
}

template <class T>
std::vector<T> DumpKind(nl::Socket& sock, uint16_t msg, uint8_t family, const std::string& table,
                        bool (*decode)(const nlmsghdr*, T*, std::string*)) {
  nl::Batch b;
  nft::EncodeDump(b, msg, family, table);
  return DumpAll(sock, b, nft::MsgName(msg), decode);
}

// One set's elements (one NFT_MSG_GETSETELEM dump), packed as each message is decoded.
void DumpElements(nl::Socket& sock, uint8_t family, const std::string& table, const std::string& set, PackedElements* out) {
  nl::Batch b;
  nft::EncodeDumpElements(b, family, table, set);
  std::vector<nft::Element> decoded;
  sock.Dump(b, "NFT_MSG_GETSETELEM", [&](const nlmsghdr* h) {
    nft::ElementsRef ref;
    DecodeReply(h, "NFT_MSG_GETSETELEM", nft::DecodeElements, &ref, &decoded);
    out->AppendAll(decoded);
  });
}

Listing RunList(nl::Socket& sock, uint8_t family, const std::string& table, bool elements) {
  for (int attempt = 0;; attempt++) {
    Listing l;
    try {
      l.gen_id = GetGen(sock);
      l.tables = DumpKind(sock, NFT_MSG_GETTABLE, family, "", nft::DecodeTable);
      if (!table.empty()) {
        std::vector<nft::Table> keep;
        for (auto& t : l.tables)
          if (t.name == table) keep.push_back(std::move(t));
        l.tables.swap(keep);
      }
      l.chains = DumpKind(sock, NFT_MSG_GETCHAIN, family, table, nft::DecodeChain);
      // A GETSET dump resolves its table filter by (family, name): without a family it fails
      // with ENOENT, so filter by name here instead.
      std::vector<nft::Set> sets = DumpKind(sock, NFT_MSG_GETSET, family, family ? table : "", nft::DecodeSet);
      if (!table.empty() && !family) {
        std::vector<nft::Set> keep;
        for (auto& s : sets)
          if (s.table == table) keep.push_back(std::move(s));
        sets.swap(keep);
      }
      for (nft::Set& s : sets) {
        SetWithElements sw;
        sw.set = std::move(s);
        if (elements) DumpElements(sock, sw.set.family, sw.set.table, sw.set.name, &sw.elements);
        l.sets.push_back(std::move(sw));
      }
      l.rules = DumpKind(sock, NFT_MSG_GETRULE, family, table, nft::DecodeRule);
      if (GetGen(sock) == l.gen_id) return l;
    } catch (const nl::Exception& e) {
      if (e.error().kind != nl::ErrorKind::kDumpInterrupted || attempt >= 4) throw;
      continue;
    }
    if (attempt >= 4) {
      throw nl::Exception(nl::Error(nl::ErrorKind::kDumpInterrupted, EINTR, "DUMP_INTR", "nftables list",
                                    "nftables list: the ruleset kept changing (generation id moved on every attempt)"));
    }
  }
}

Napi::Value TableToJs(Napi::Env env, const nft::Table& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", t.family);
  o.Set("name", t.name);
  o.Set("flags", t.flags);
  o.Set("handle", static_cast<double>(t.handle));
  o.Set("use", t.use);
  return o;
}

Napi::Value ChainToJs(Napi::Env env, const nft::Chain& c) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", c.family);
  o.Set("table", c.table);
  o.Set("name", c.name);
  o.Set("handle", static_cast<double>(c.handle));
  if (c.base) {
    Napi::Object h = Napi::Object::New(env);
    h.Set("type", c.type);
    h.Set("hooknum", c.hooknum);
    h.Set("priority", c.priority);
    if (c.has_policy) h.Set("policy", c.policy);
    if (!c.device.empty()) h.Set("device", c.device);
    o.Set("hook", h);
  }
  o.Set("use", c.use);
  o.Set("flags", c.flags);
  return o;
}

// One Buffer for a set's bytes instead of a Buffer per key and value: a listing of 170k
// elements made ~300k Buffers, each several times the size of its bytes. The elements are
// moved out of `p` (its blocks freed as they are copied).
Napi::Value ElementsToJs(Napi::Env env, PackedElements& p) {
  Napi::Buffer<uint8_t> bytes = Napi::Buffer<uint8_t>::New(env, p.bytes.size());
  p.bytes.MoveTo(bytes.Data());
  Napi::Object o = Napi::Object::New(env);
  if (p.uniform) {
    Napi::Array w = Napi::Array::New(env, 3);
    for (uint32_t k = 0; k < 3; k++) w.Set(k, p.widths[k]);
    o.Set("widths", w);
  } else {
    Napi::Uint32Array spans = Napi::Uint32Array::New(env, p.spans.size());
    p.spans.MoveTo(spans.Data());
    o.Set("spans", spans);
  }
  Napi::Array extras = ArrayOf(env, p.extras, [&](const ElementExtra& e) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("index", static_cast<double>(e.index));
    if (e.has_flags) o.Set("flags", e.flags);
    if (e.has_verdict) o.Set("verdict", VerdictToJs(env, e.verdict));
    if (e.timeout_ms) o.Set("timeout", static_cast<double>(e.timeout_ms));
    if (e.expiration_ms) o.Set("expiration", static_cast<double>(e.expiration_ms));
    if (!e.comment.empty()) o.Set("comment", e.comment);
    return o;
  });
  o.Set("count", static_cast<double>(p.count));
  o.Set("bytes", bytes);
  o.Set("extras", extras);
  return o;
}

Napi::Value SetToJs(Napi::Env env, const nft::Set& s, PackedElements* elems) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", s.family);
  o.Set("table", s.table);
  o.Set("name", s.name);
  o.Set("handle", static_cast<double>(s.handle));
  o.Set("flags", s.flags);
  o.Set("keyType", s.key_type);
  o.Set("keyLen", s.key_len);
  if (s.has_data) {
    o.Set("dataType", s.data_type);
    o.Set("dataLen", s.data_len);
  }
  if (s.timeout_ms) o.Set("timeout", static_cast<double>(s.timeout_ms));
  if (s.gc_interval_ms) o.Set("gcInterval", s.gc_interval_ms);
  if (s.size) o.Set("size", s.size);
  if (!s.concat_lens.empty()) o.Set("concat", ArrayOf(env, s.concat_lens, [&](uint32_t n) { return Napi::Number::New(env, n); }));
  const std::string comment = nft::UdataGetStr(s.userdata, nft::kUdataSetComment);
  if (!comment.empty()) o.Set("comment", comment);
  if (elems) o.Set("elements", ElementsToJs(env, *elems));
  return o;
}

Napi::Value RuleToJs(Napi::Env env, const nft::Rule& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", r.family);
  o.Set("table", r.table);
  o.Set("chain", r.chain);
  o.Set("handle", static_cast<double>(r.handle));
  if (r.position) o.Set("position", static_cast<double>(r.position));
  o.Set("exprs", ArrayOf(env, r.exprs, [&](const nft::Expr& e) { return ExprToJs(env, e); }));
  if (!r.comment.empty()) o.Set("comment", r.comment);
  return o;
}

Napi::Value ListingToJs(Napi::Env env, Listing& l) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("genId", l.gen_id);
  Napi::Array t = ArrayOf(env, l.tables, [&](const nft::Table& x) { return TableToJs(env, x); });
  Napi::Array c = ArrayOf(env, l.chains, [&](const nft::Chain& x) { return ChainToJs(env, x); });
  Napi::Array s = Napi::Array::New(env, l.sets.size());
  for (size_t i = 0; i < l.sets.size(); i++) {
    // handed over set by set: one set's elements in both places at a time
    s.Set(i, SetToJs(env, l.sets[i].set, l.want_elements ? &l.sets[i].elements : nullptr));
    l.sets[i].elements = PackedElements();
  }
  Napi::Array r = ArrayOf(env, l.rules, [&](const nft::Rule& x) { return RuleToJs(env, x); });
  o.Set("tables", t);
  o.Set("chains", c);
  o.Set("sets", s);
  o.Set("rules", r);
  return o;
}

// ---- the pipelined encoder -------------------------------------------------------------------

// NftWireEncoder: the netlink encoding of an op stream that is still being written.
// NftTransaction feeds it each run of whole ops it queues (feed(chunk)) and the handle's
// commitWire takes it with the finished stream: the encoding of the first pieces ran on the
// thread pool while the rest was being queued. A piece is copied when it is fed (~1 ms per
// 8 MB, on the main thread, into a buffer of an earlier piece where there is one), so no JS
// reference outlives the call. One async work item at a time drains the queue in order: a feed
// queues one only when none is queued or draining (creating and waking one per piece cost more
// than copying the piece), and the item checks the queue again after letting go of the encoder,
// so a piece queued meanwhile is not left behind. It only try_locks the encoder: the one other
// holder is the commit, which drains everything itself (pool threads never wait for each
// other). The first bad op poisons the encoder: its error is what commitWire rejects with,
// before anything is sent.
constexpr napi_type_tag kEncoderTag = {0x6970767379e0c0deULL, 0x6e66747769726531ULL};

struct EncoderState {
  std::mutex queue_mu;  // queue, spare, queued_bytes, taken, feeding
  std::vector<std::vector<uint8_t>> queue;
  bool feeding = false;  // a FeedWorker is queued or draining
  // Pieces already encoded, kept for the next feeds to copy into: a fresh 256 KiB buffer is
  // an mmap and 64 page faults per piece (~0.2 ms each, 32 pieces for a 10k-service table).
  std::vector<std::vector<uint8_t>> spare;
  size_t queued_bytes = 0;
  bool taken = false;  // handed to a commit

  std::mutex enc_mu;  // enc, failed, error
  std::unique_ptr<nft::WireTxEncoder> enc;
  bool failed = false;
  nl::Error error;

  // Encodes one piece unless an earlier one failed; the first error is kept. Caller holds
  // enc_mu.
  void Encode(const uint8_t* data, size_t len) {
    if (failed) return;
    try {
      enc->Feed(data, len);
    } catch (const nl::Exception& e) {
      failed = true;
      error = e.error();
    }
  }

  // Encodes everything queued. Caller holds enc_mu.
  void Drain() {
    std::vector<std::vector<uint8_t>> got;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(queue_mu);
        got.swap(queue);
      }
      if (got.empty()) return;
      for (const std::vector<uint8_t>& piece : got) Encode(piece.data(), piece.size());
      std::lock_guard<std::mutex> lock(queue_mu);
      for (std::vector<uint8_t>& piece : got)
        if (spare.size() < 4) spare.push_back(std::move(piece));
      got.clear();
    }
  }
};

class FeedWorker : public Napi::AsyncWorker {
 public:
  FeedWorker(Napi::Env env, std::shared_ptr<EncoderState> st) : Napi::AsyncWorker(env, "ipvsync"), st_(std::move(st)) {}
  void Execute() override {
    PoolCpuScope cpu;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(st_->enc_mu, std::try_to_lock);
        if (lock.owns_lock()) st_->Drain();  // else the commit holds it and drains everything
      }
      std::lock_guard<std::mutex> lock(st_->queue_mu);
      if (st_->queue.empty() || st_->taken) {
        st_->feeding = false;
        return;
      }
    }
  }

 private:
  std::shared_ptr<EncoderState> st_;
};

class NftWireEncoder : public Wrapped<NftWireEncoder> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    exports.Set("NftWireEncoder", DefineClass(env, "NftWireEncoder",
                                              {
                                                  Method<&NftWireEncoder::Feed>("feed"),
                                                  Method<&NftWireEncoder::Fed>("fed"),
                                              }));
  }

  // new NftWireEncoder(opts?): opts as commitWire's; the commit that takes it must pass the same.
  explicit NftWireEncoder(const Napi::CallbackInfo& info) : Wrapped<NftWireEncoder>(info) {
    st_ = std::make_shared<EncoderState>();
    st_->enc = std::make_unique<nft::WireTxEncoder>(TxOptionsFromJs(info.Env(), info[0]), size_t{1} << 20);
    info.This().As<Napi::Object>().TypeTag(&kEncoderTag);
  }

  static std::shared_ptr<EncoderState> From(Napi::Env env, Napi::Value v) {
    if (!v.IsObject() || !v.As<Napi::Object>().CheckTypeTag(&kEncoderTag))
      ThrowInvalid(env, "nftables commit", "expected an NftWireEncoder");
    return Unwrap(v.As<Napi::Object>())->st_;
  }

 private:
  // feed(chunk: Uint8Array): the next run of whole ops (the first starting with the magic),
  // copied.
  Napi::Value Feed(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray()) ThrowInvalid(env, "nftables commit", "expected an op stream piece (Uint8Array)");
    auto a = info[0].As<Napi::Uint8Array>();
    bool start = false;
    {
      std::lock_guard<std::mutex> lock(st_->queue_mu);
      if (st_->taken) ThrowInvalid(env, "nftables commit", "the encoder was already committed");
      std::vector<uint8_t> piece;
      if (!st_->spare.empty()) {
        piece = std::move(st_->spare.back());
        st_->spare.pop_back();
      }
      piece.assign(a.Data(), a.Data() + a.ByteLength());
      st_->queue.push_back(std::move(piece));
      st_->queued_bytes += a.ByteLength();
      start = !st_->feeding;
      st_->feeding = true;
    }
    if (start) (new FeedWorker(env, st_))->Queue();
    return env.Undefined();
  }

  // fed() -> stream bytes handed over so far.
  Napi::Value Fed(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(st_->queue_mu);
    return Napi::Number::New(info.Env(), static_cast<double>(st_->queued_bytes));
  }

  std::shared_ptr<EncoderState> st_;
};

// Takes an encoder for one commit (main thread): it must not have been taken, and it must have
// been fed no more than the stream holds (its pieces are the stream's first bytes).
std::shared_ptr<EncoderState> TakeEncoder(Napi::Env env, Napi::Value v, size_t stream_len) {
  if (v.IsUndefined()) return nullptr;
  std::shared_ptr<EncoderState> enc = NftWireEncoder::From(env, v);
  std::lock_guard<std::mutex> lock(enc->queue_mu);
  if (enc->taken) ThrowInvalid(env, "nftables commit", "the encoder was already committed");
  if (enc->queued_bytes > stream_len) ThrowInvalid(env, "nftables commit", "the encoder was fed more than the stream holds");
  enc->taken = true;
  return enc;
}

// The batches for a whole stream (worker thread): with an encoder, only what it was not fed is
// encoded here (after it has encoded every piece it was fed); its options are the ones it was
// built with. Throws kInvalid for a bad op.
std::vector<nft::TxBatch> BuildFromStream(const uint8_t* data, size_t len, const nft::TxOptions& opt,
                                          EncoderState* enc, std::vector<size_t>* offsets) {
  if (!enc) return nft::BuildTransactionsFromWire(data, len, opt, offsets);
  std::lock_guard<std::mutex> lock(enc->enc_mu);
  enc->Drain();
  if (enc->enc->fed() < len) enc->Encode(data + enc->enc->fed(), len - enc->enc->fed());
  if (enc->failed) throw nl::Exception(enc->error);
  *offsets = std::move(enc->enc->offsets());
  return enc->enc->Finish();
}

// ---- the handle ----------------------------------------------------------------------------

class NftHandle : public ChannelHandle<NftHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "NftHandle",
           {Method<&NftHandle::CommitWire>("commitWire"), Method<&NftHandle::List>("list"),
            Method<&NftHandle::ListElements>("listElements"), Method<&NftHandle::GenId>("genId")});
  }

  explicit NftHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_NETFILTER) {}

 private:
  // commitWire(stream: Uint8Array, opts?, encoder?) -> { statuses, errors, transactions, sendmsgCalls }. The op stream (nftables/wire.h) is
  // decoded, validated and encoded on the worker, in place: the main thread only takes a
  // reference to the buffer (src/kernel/nft-wire.ts never touches a stream once written), which
  // is released on the main thread when the worker object goes. A bad op rejects with a
  // kInvalid NetlinkError before anything is sent.
  Napi::Value CommitWire(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray()) ThrowInvalid(env, "nftables commit", "expected an op stream (Uint8Array)");
    auto a = info[0].As<Napi::Uint8Array>();
    const uint8_t* data = a.Data();
    const size_t len = a.ByteLength();
    auto keep = std::make_shared<Napi::ObjectReference>(Napi::Persistent(a.As<Napi::Object>()));
    const nft::TxOptions opt = TxOptionsFromJs(env, info[1]);
    // A pipelined encoder fed the stream's first bytes with commit's default options (the
    // caller passes one only with those).
    std::shared_ptr<EncoderState> enc = TakeEncoder(env, info[2], len);
    auto ch = ch_;
    // Its own job, not OnChannel's: the batches are built before the channel is locked, so that
    // encoding one commit overlaps another job's time in the kernel on this handle.
    return PromiseWorker<CommitResult>::Run(
        env,
        [ch, keep, data, len, opt, enc]() {
          std::vector<size_t> offsets;
          std::vector<nft::TxBatch> txs = BuildFromStream(data, len, opt, enc.get(), &offsets);
          std::lock_guard<std::mutex> lock(ch->mu);
          CommitResult res = RunCommit(ch->Sock(), txs, offsets.size(), [&](size_t i, uint16_t msg) {
            return nft::OpName(nft::WireOpAt(data, len, offsets[i], i), msg);
          });
          for (nft::TxBatch& t : txs) nft::RecycleBatchBuffer(std::move(t.batch.buffer()));
          return res;
        },
        [](Napi::Env env, CommitResult& r) { return CommitResultToJs(env, r); });
  }

  // list({ family?, table?, elements? }) -> { genId, tables, chains, sets, rules }
  Napi::Value List(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const std::string op = "nftables list";
    const uint8_t family = static_cast<uint8_t>(UIntOpt(env, info[0], "family", 255, 0, op));
    const std::string table = NameOpt(env, info[0], "table", NFT_TABLE_MAXNAMELEN - 1, op);
    const bool elements = BoolOpt(info[0], "elements", true);
    return OnChannel<Listing>(env, [family, table, elements](Channel& ch) {
          Listing l = RunList(ch.Sock(), family, table, elements);
          l.want_elements = elements;
          return l;
        },
        [](Napi::Env env, Listing& l) { return ListingToJs(env, l); });
  }

  // listElements({ family, table, set }) -> { count, bytes, spans, extras }: one set's elements,
  // one dump (an interrupted dump rejects with kind 'dump-interrupted'; no generation: the
  // caller reads it around its dumps).
  Napi::Value ListElements(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const std::string op = "nftables list elements";
    const uint8_t family = static_cast<uint8_t>(UIntOpt(env, info[0], "family", 255, 0, op));
    const std::string table = NameOpt(env, info[0], "table", NFT_TABLE_MAXNAMELEN - 1, op);
    const std::string set = NameOpt(env, info[0], "set", NFT_SET_MAXNAMELEN - 1, op);
    if (!family || table.empty() || set.empty()) ThrowInvalid(env, op, "family, table and set are required");
    return OnChannel<PackedElements>(env, [family, table, set](Channel& ch) {
          PackedElements p;
          DumpElements(ch.Sock(), family, table, set, &p);
          return p;
        },
        [](Napi::Env env, PackedElements& p) { return ElementsToJs(env, p); });
  }

  Napi::Value GenId(const Napi::CallbackInfo& info) {
    return OnChannel<uint32_t>(info.Env(), [](Channel& ch) { return GetGen(ch.Sock()); },
        [](Napi::Env env, uint32_t& g) -> Napi::Value { return Napi::Number::New(env, g); });
  }
};

// ---- codec hooks ---------------------------------------------------------------------------

// encodeWire(stream, opts?, encoder?) -> Buffer[]: the batches commitWire would send (seq and
// port id 0).
Napi::Value EncodeWire(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsTypedArray()) ThrowInvalid(env, "nftables commit", "expected an op stream (Uint8Array)");
  auto a = info[0].As<Napi::Uint8Array>();
  const nft::TxOptions opt = TxOptionsFromJs(env, info[1]);
  std::shared_ptr<EncoderState> enc = TakeEncoder(env, info[2], a.ByteLength());
  std::vector<size_t> offsets;
  std::vector<nft::TxBatch> txs = BuildFromStream(a.Data(), a.ByteLength(), opt, enc.get(), &offsets);
  return ArrayOf(env, txs, [&](nft::TxBatch& t) { return ToBuffer(env, t.batch.buffer()); });
}

Napi::Value DecodeRuleJs(const Napi::CallbackInfo& info) {
  return RuleToJs(info.Env(), DecodedArg(info, "decodeRule", nft::DecodeRule));
}
Napi::Value DecodeChainJs(const Napi::CallbackInfo& info) {
  return ChainToJs(info.Env(), DecodedArg(info, "decodeChain", nft::DecodeChain));
}
Napi::Value DecodeTableJs(const Napi::CallbackInfo& info) {
  return TableToJs(info.Env(), DecodedArg(info, "decodeTable", nft::DecodeTable));
}
Napi::Value DecodeSetJs(const Napi::CallbackInfo& info) {
  return SetToJs(info.Env(), DecodedArg(info, "decodeSet", nft::DecodeSet), nullptr);
}
Napi::Value DecodeGenJs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), DecodedArg(info, "decodeGen", nft::DecodeGen));
}
Napi::Value DecodeElementsJs(const Napi::CallbackInfo& info) {
  nft::ElementsRef ref;
  std::vector<nft::Element> elems;
  DecodeMessageArg(info, "decodeElements", nft::DecodeElements, &ref, &elems);
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", ref.family);
  o.Set("table", ref.table);
  o.Set("set", ref.set);
  PackedElements packed;
  packed.AppendAll(elems);
  o.Set("elements", ElementsToJs(env, packed));
  return o;
}

}  // namespace

// { types: [{ name, fields: [{ name, kind: 'num'|'str'|'data'|'bool', enums? }] }], verdicts }:
// what src/kernel/nft-wire.ts needs to write expressions into the op stream (the schema index
// is the position in types).
Napi::Value ExprWireJs(Napi::Env env) {
  auto enums = [&](const nft::EnumEntry* t) {
    Napi::Object o = Napi::Object::New(env);
    for (; t && t->name; t++) o.Set(t->name, static_cast<double>(t->value));
    return o;
  };
  Napi::Array types = Napi::Array::New(env);
  uint32_t i = 0;
  for (const nft::ExprSchema& s : nft::ExprSchemas()) {
    Napi::Object t = Napi::Object::New(env);
    t.Set("name", s.name);
    Napi::Array fields = Napi::Array::New(env, s.fields.size());
    for (size_t k = 0; k < s.fields.size(); k++) {
      const nft::FieldSchema& f = s.fields[k];
      Napi::Object fo = Napi::Object::New(env);
      fo.Set("name", f.js);
      const char* kind = f.is_bool ? "bool"
                         : f.kind == ValueKind::kStr ? "str"
                         : f.kind == ValueKind::kData ? "data"
                                                      : "num";
      fo.Set("kind", kind);
      if (f.enums) fo.Set("enums", enums(f.enums));
      fields.Set(k, fo);
    }
    t.Set("fields", fields);
    types.Set(i++, t);
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("types", types);
  o.Set("verdicts", enums(nft::VerdictNames()));
  return o;
}

void InitNftables(Napi::Env env, Napi::Object exports) {
  NftHandle::Init(env, exports);
  NftWireEncoder::Init(env, exports);
  Napi::Object codec = CodecNamespace(env, exports, "nftables");
  codec.Set("exprWire", ExprWireJs(env));
  codec.Set("encodeWire", Function<EncodeWire>(env, "encodeWire"));
  codec.Set("decodeRule", Function<DecodeRuleJs>(env, "decodeRule"));
  codec.Set("decodeChain", Function<DecodeChainJs>(env, "decodeChain"));
  codec.Set("decodeTable", Function<DecodeTableJs>(env, "decodeTable"));
  codec.Set("decodeSet", Function<DecodeSetJs>(env, "decodeSet"));
  codec.Set("decodeElements", Function<DecodeElementsJs>(env, "decodeElements"));
  codec.Set("decodeGen", Function<DecodeGenJs>(env, "decodeGen"));
}

}  // namespace addon
