// nf_tables over nfnetlink: plain structs for tables, chains, sets, elements and rules, a
// schema-driven expression codec (expr.cc), and the transaction builder that lays ops out as
// NFNL_MSG_BATCH_BEGIN … BATCH_END batches (codec.cc). No syscalls, no napi.h.
#pragma once

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "netlink/message.h"

namespace nft {

// Message types newer than the 6.1 uapi headers (kernel 6.3+): DESTROY is DELETE that does not
// fail with ENOENT. A 6.1 kernel answers them with EINVAL ("unknown message type").
constexpr uint16_t kMsgGetRuleReset = 25;
constexpr uint16_t kMsgDestroyTable = 26;
constexpr uint16_t kMsgDestroyChain = 27;
constexpr uint16_t kMsgDestroyRule = 28;
constexpr uint16_t kMsgDestroySet = 29;
constexpr uint16_t kMsgDestroySetElem = 30;

inline uint16_t MsgType(uint16_t msg) { return static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | msg); }
const char* MsgName(uint16_t msg);  // "NFT_MSG_NEWRULE"

// ---- expressions ---------------------------------------------------------------------------

struct Verdict {
  int32_t code = 0;   // NF_ACCEPT, NF_DROP, NFT_JUMP …
  std::string chain;  // jump / goto target
};

enum class ValueKind : uint8_t {
  kU8,
  kBe16,
  kBe32,
  kBe64,
  kStr,
  kData,     // nested NFTA_DATA_VALUE
  kVerdict,  // nested NFTA_DATA_VERDICT
  kRaw,      // an attribute the schema does not know, kept verbatim (type includes NLA_F_*)
};

struct ExprAttr {
  uint16_t type = 0;
  ValueKind kind = ValueKind::kBe32;
  uint64_t num = 0;
  std::string str;
  std::vector<uint8_t> bytes;  // kData / kRaw
  Verdict verdict;
};

struct Expr {
  std::string name;             // "payload", "cmp" …
  std::vector<ExprAttr> attrs;  // in wire order
};

// How a JS field maps to an expression attribute. Enum fields carry a name table.
struct EnumEntry {
  const char* name;
  int64_t value;
};
struct FieldSchema {
  const char* js;  // field name in the TypeScript model
  uint16_t attr;
  ValueKind kind;
  const EnumEntry* enums = nullptr;  // null-terminated table, or null for numbers
  bool is_register = false;
  bool is_bool = false;  // u32 1/absent (lookup invert)
};
struct ExprSchema {
  const char* name;
  std::vector<FieldSchema> fields;  // in the order nft (libnftnl) writes them
};

const ExprSchema* FindExprSchema(const std::string& name);
const std::vector<ExprSchema>& ExprSchemas();
const EnumEntry* VerdictNames();
const char* EnumName(const EnumEntry* t, int64_t v);  // null if absent

void EncodeExprs(nl::AttrWriter& w, uint16_t list_attr, const std::vector<Expr>& exprs);
bool DecodeExprs(nl::AttrReader r, std::vector<Expr>* out, std::string* why);
void EncodeVerdict(nl::AttrWriter& w, uint16_t attr, const Verdict& v);
bool DecodeVerdict(nl::AttrReader r, Verdict* v);
bool DecodeData(nl::AttrReader r, std::vector<uint8_t>* out, Verdict* v, bool* is_verdict);

// ---- objects -------------------------------------------------------------------------------

struct Table {
  uint8_t family = 0;
  std::string name;
  uint32_t flags = 0;
  uint64_t handle = 0;
  uint32_t use = 0;
  std::vector<uint8_t> userdata;
};

struct Chain {
  uint8_t family = 0;
  std::string table;
  std::string name;
  uint64_t handle = 0;
  bool base = false;  // has a hook
  std::string type;   // filter / nat / route
  uint32_t hooknum = 0;
  int32_t priority = 0;
  bool has_policy = false;
  uint32_t policy = 1;  // NF_ACCEPT
  std::string device;
  uint32_t use = 0;
  uint32_t flags = 0;
  std::vector<uint8_t> userdata;
};

struct Set {
  uint8_t family = 0;
  std::string table;
  std::string name;
  uint64_t handle = 0;
  uint32_t flags = 0;  // NFT_SET_*
  uint32_t key_type = 0;
  uint32_t key_len = 0;
  bool has_data = false;  // map
  uint32_t data_type = 0;
  uint32_t data_len = 0;
  uint32_t id = 0;  // NFTA_SET_ID: lets later ops of the same transaction refer to it
  uint64_t timeout_ms = 0;
  uint32_t gc_interval_ms = 0;
  uint32_t size = 0;                      // NFTA_SET_DESC_SIZE
  std::vector<uint8_t> concat_lens;       // NFTA_SET_DESC_CONCAT field lengths (bytes)
  std::vector<uint8_t> userdata;          // NFTA_SET_USERDATA (nftnl udata TLVs)
};

struct Element {
  std::vector<uint8_t> key;
  std::vector<uint8_t> key_end;  // NFTA_SET_ELEM_KEY_END (concatenated ranges)
  uint32_t flags = 0;            // NFT_SET_ELEM_INTERVAL_END
  bool has_flags = false;
  std::vector<uint8_t> data;     // map value
  bool has_verdict = false;
  Verdict verdict;
  uint64_t timeout_ms = 0;
  uint64_t expiration_ms = 0;  // replies only
  std::string comment;         // NFTA_SET_ELEM_USERDATA, NFTNL_UDATA_SET_ELEM_COMMENT
};

struct Rule {
  uint8_t family = 0;
  std::string table;
  std::string chain;
  uint64_t handle = 0;
  uint64_t position = 0;
  std::vector<Expr> exprs;
  std::string comment;  // NFTA_RULE_USERDATA, NFTNL_UDATA_RULE_COMMENT
};

struct ElementsRef {
  uint8_t family = 0;
  std::string table;
  std::string set;
  uint32_t set_id = 0;
};

// ---- transactions --------------------------------------------------------------------------

enum class Verb : uint8_t { kAdd, kCreate, kDelete, kDestroy, kFlush, kInsert, kReplace };
enum class Kind : uint8_t { kTable, kChain, kSet, kElements, kRule };

struct Op {
  Verb verb = Verb::kAdd;
  Kind kind = Kind::kTable;
  Table table;
  Chain chain;
  Set set;
  ElementsRef ref;
  std::vector<Element> elements;
  Rule rule;
};

enum class AckMode : uint8_t {
  kAll,   // NLM_F_ACK on every op message
  kLast,  // only on the last op message of each transaction (confirms the batch was processed)
  kNone,  // none: only failures are answered
};

struct TxOptions {
  // 0: everything in one atomic transaction. Otherwise a transaction is closed once it holds
  // this much work (one per message, one per element); atomicity is then per transaction.
  size_t max_weight = 0;
  // NFTA_SET_ELEM_LIST_ELEMENTS is a nest and nla_len is 16 bits: keep each message's element
  // list well below 64 KiB.
  size_t max_elem_bytes = 60000;
  bool has_gen_id = false;  // NFNL_BATCH_GENID: fail with ERESTART if the ruleset changed
  uint32_t gen_id = 0;
  AckMode ack_mode = AckMode::kAll;
};

struct TxBatch {
  nl::Batch batch;
  std::vector<int64_t> op_index;  // message -> op (-1 for BATCH_BEGIN / BATCH_END)
  size_t first_op = 0, end_op = 0;  // ops [first_op, end_op) have messages in this batch
};

// Gives a sent batch's buffer back for the next large commit (TxBuilder with reserve_bytes).
void RecycleBatchBuffer(std::vector<uint8_t>&& buffer);

// Lays ops out as one or more batches (one per transaction), op by op: the caller may reuse
// one Op for every Add (the op stream decoder does).
class TxBuilder {
 public:
  explicit TxBuilder(const TxOptions& opt, size_t reserve_bytes = 0);
  void Add(const Op& op, size_t index);
  std::vector<TxBatch> Finish();

 private:
  void Open(size_t op);
  void Close();
  void Room(size_t op, size_t w);
  TxOptions opt_;
  size_t reserve_ = 0;
  size_t weight_ = 0;
  std::vector<TxBatch> out_;
};

// The op's readable name for errors: "NFT_MSG_NEWRULE ip filter input".
std::string OpName(const Op& op, uint16_t msg);

// ---- dumps and replies ---------------------------------------------------------------------

void EncodeGetGen(nl::Batch& b);
bool DecodeGen(const nlmsghdr* h, uint32_t* gen_id, std::string* why);
// Dump requests; family 0 (NFPROTO_UNSPEC) = every family, table "" = every table.
void EncodeDump(nl::Batch& b, uint16_t msg, uint8_t family, const std::string& table);
void EncodeDumpElements(nl::Batch& b, uint8_t family, const std::string& table, const std::string& set);

bool DecodeTable(const nlmsghdr* h, Table* out, std::string* why);
bool DecodeChain(const nlmsghdr* h, Chain* out, std::string* why);
bool DecodeSet(const nlmsghdr* h, Set* out, std::string* why);
bool DecodeElements(const nlmsghdr* h, ElementsRef* ref, std::vector<Element>* out, std::string* why);
bool DecodeRule(const nlmsghdr* h, Rule* out, std::string* why);

// nftnl udata TLVs (u8 type, u8 len, value): what nft writes into *_USERDATA.
constexpr uint8_t kUdataRuleComment = 0;     // NFTNL_UDATA_RULE_COMMENT
constexpr uint8_t kUdataElemComment = 0;     // NFTNL_UDATA_SET_ELEM_COMMENT
constexpr uint8_t kUdataSetKeyByteorder = 0; // NFTNL_UDATA_SET_KEYBYTEORDER
constexpr uint8_t kUdataSetDataByteorder = 1;
constexpr uint8_t kUdataSetDataInterval = 6;
constexpr uint8_t kUdataSetComment = 7;
void UdataPut(std::vector<uint8_t>& buf, uint8_t type, const void* data, size_t len);
void UdataPutStr(std::vector<uint8_t>& buf, uint8_t type, const std::string& s);  // with NUL
// Returns the string value of a TLV type (NUL stripped), "" if absent or malformed.
std::string UdataGetStr(const std::vector<uint8_t>& buf, uint8_t type);

}  // namespace nft
