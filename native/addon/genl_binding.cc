// JS surface of generic netlink control (nlctrl): class GenlHandle. Resolving many families in
// one call exercises the batch path (many requests per sendmsg, acks mapped back).
#include <linux/genetlink.h>

#include <memory>

#include "addon/batch.h"
#include "addon/bindings.h"
#include "addon/channel.h"
#include "addon/errors.h"
#include "netlink/genl.h"

namespace addon {

namespace {

struct FamiliesResult {
  BatchOutcome outcome;
  std::vector<nl::GenlFamily> families;  // one per request; id 0 where it failed
};

class GenlHandle : public ChannelHandle<GenlHandle> {
 public:
  static void Init(Napi::Env env, Napi::Object exports) {
    Define(env, exports, "GenlHandle", {Method<&GenlHandle::Families>("families")});
  }

  explicit GenlHandle(const Napi::CallbackInfo& info) : ChannelHandle(info, NETLINK_GENERIC) {
    ch_->rcvbuf_bytes = static_cast<int>(UIntOpt(info.Env(), info[0], "rcvbufBytes", INT32_MAX, 0, "open"));
  }

 private:
  // families(names: string[], opts?) -> { statuses, errors, sendmsgCalls, families }
  Napi::Value Families(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Array names = ArrayArg(env, info[0], "families", "expected an array of family names");
    auto batch = std::make_shared<nl::Batch>();
    std::vector<std::string> ops;
    for (uint32_t i = 0; i < names.Length(); i++) {
      Napi::Value v = names.Get(i);
      if (!v.IsString()) ThrowInvalid(env, "families", "name " + std::to_string(i) + " is not a string");
      std::string name = v.As<Napi::String>().Utf8Value();
      if (name.empty() || name.size() >= GENL_NAMSIZ)
        ThrowInvalid(env, "families", "name " + std::to_string(i) + " must be 1-15 characters");
      batch->Begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK);
      batch->GenlHeader(CTRL_CMD_GETFAMILY, 1);
      batch->Attrs().Str(CTRL_ATTR_FAMILY_NAME, name);
      ops.push_back("CTRL_CMD_GETFAMILY " + name);
    }
    // Lookups are independent: unlike writes, they continue past a failure unless asked not to.
    nl::TransactOptions opts = BatchOptions(info[1]);
    opts.stop_on_error = BoolOpt(info[1], "stopOnError", false);
    return OnChannel<FamiliesResult>(env, [batch, ops, opts](Channel& ch) {
          FamiliesResult r;
          r.outcome.res = ch.Sock().Transact(*batch, opts);
          r.outcome.op_names = ops;
          r.families.resize(batch->size());
          for (const nl::DataReply& d : r.outcome.res.data)
            r.families[d.index] = Decoded(Msg(d.bytes), nl::GenlResolver::ParseFamily, "CTRL_CMD_GETFAMILY");
          return r;
        },
        [](Napi::Env env, FamiliesResult& r) -> Napi::Value {
          Napi::Object o = BatchOutcomeToJs(env, r.outcome).As<Napi::Object>();
          Napi::Array fams = Napi::Array::New(env, r.families.size());
          for (size_t i = 0; i < r.families.size(); i++) {
            const nl::GenlFamily& f = r.families[i];
            if (f.id == 0) {
              fams.Set(i, env.Null());
              continue;
            }
            Napi::Object fo = Napi::Object::New(env);
            fo.Set("name", f.name);
            fo.Set("id", f.id);
            fo.Set("version", f.version);
            fo.Set("maxAttr", f.max_attr);
            fams.Set(i, fo);
          }
          o.Set("families", fams);
          return o;
        });
  }
};

}  // namespace

void InitGenl(Napi::Env env, Napi::Object exports) { GenlHandle::Init(env, exports); }

}  // namespace addon
