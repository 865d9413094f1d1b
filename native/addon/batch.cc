#include "addon/batch.h"

#include "addon/errors.h"

namespace addon {

Napi::Value BatchOutcomeToJs(Napi::Env env, BatchOutcome& out) {
  const size_t n = out.res.results.size();
  Napi::Uint8Array statuses = Napi::Uint8Array::New(env, n);
  Napi::Array errors = Napi::Array::New(env);
  uint32_t ne = 0;
  for (size_t i = 0; i < n; i++) {
    const nl::RequestResult& r = out.res.results[i];
    const int64_t op = out.op_index.empty() ? static_cast<int64_t>(i) : out.op_index[i];
    const std::string& name = i < out.op_names.size() ? out.op_names[i] : std::string("request");
    auto error = [&] {
      nl::Error e = KernelError(name, op, r.status);
      if (i < out.hints.size() && !out.hints[i].empty()) e.message += ": " + out.hints[i];
      return MakeError(env, e);
    };
    switch (r.outcome) {
      case nl::Outcome::kNotSent: statuses[i] = kStatusNotSent; break;
      case nl::Outcome::kOk: statuses[i] = kStatusOk; break;
      case nl::Outcome::kError:
        statuses[i] = kStatusError;
        errors.Set(ne++, error());
        break;
      case nl::Outcome::kNoReply:
        statuses[i] = kStatusNoReply;
        if (r.status.error) errors.Set(ne++, error());
        break;
    }
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("statuses", statuses);
  o.Set("errors", errors);
  o.Set("sendmsgCalls", static_cast<double>(out.res.sendmsg_calls));
  return o;
}

}  // namespace addon
