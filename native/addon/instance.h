// Per-environment addon state (worker threads each load their own instance).
#pragma once

#include <napi.h>

namespace addon {

struct Instance {
  Napi::FunctionReference error_factory;
  static Instance& Get(Napi::Env env) { return *env.GetInstanceData<Instance>(); }
};

}  // namespace addon
