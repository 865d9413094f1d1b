// Runs kernel work off the main thread and settles a Promise (sharp/watcher "baton" shape):
// inputs are converted to plain C++ values on the main thread before Run, the work function
// makes no N-API calls, and `done` turns the result into JS on the main thread.
#pragma once

#include <napi.h>

#include <functional>
#include <utility>

#include "addon/cpu.h"
#include "addon/errors.h"
#include "netlink/error.h"

namespace addon {

template <class Result>
class PromiseWorker : public Napi::AsyncWorker {
 public:
  using Work = std::function<Result()>;
  using Done = std::function<Napi::Value(Napi::Env, Result&)>;

  static Napi::Promise Run(Napi::Env env, Work work, Done done) {
    auto* w = new PromiseWorker(env, std::move(work), std::move(done));
    Napi::Promise p = w->deferred_.Promise();
    w->Queue();
    return p;
  }

 protected:
  void Execute() override {
    PoolCpuScope cpu;
    try {
      result_ = work_();
    } catch (const nl::Exception& e) {
      failed_ = true;
      error_ = e.error();
    } catch (const std::exception& e) {
      failed_ = true;
      error_ = nl::Error(nl::ErrorKind::kSystem, 0, "EFAULT", "", e.what());
    }
  }

  void OnOK() override {
    JsThreadCpuScope cpu;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (failed_) {
      deferred_.Reject(MakeError(env, error_));
      return;
    }
    try {
      deferred_.Resolve(done_(env, result_));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    } catch (const nl::Exception& e) {
      deferred_.Reject(MakeError(env, e.error()));
    }
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  PromiseWorker(Napi::Env env, Work work, Done done)
      : Napi::AsyncWorker(env, "ipvsync"),
        deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)),
        done_(std::move(done)) {}

  Napi::Promise::Deferred deferred_;
  Work work_;
  Done done_;
  Result result_{};
  bool failed_ = false;
  nl::Error error_;
};

}  // namespace addon
