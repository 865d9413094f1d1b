// The addon's own CPU time, counted where it runs: on a JavaScript thread inside a binding's
// call (and in the completions that turn a kernel reply into JS values), and on the libuv pool
// where the kernel work runs, split there into user time (the addon encoding and decoding
// netlink) and system time (the kernel doing what the messages ask). A benchmark subtracts
// these from the threads' totals to tell the addon from V8 and the kernel (docs/performance.md: where the
// time goes). Process-wide counters; two clock reads per call, per batch, not per object.
#pragma once

#include <atomic>
#include <cstdint>

namespace addon {

struct CpuAccount {
  /** CPU (user + system) of binding calls and completions on JavaScript threads. */
  std::atomic<uint64_t> js_thread_ns{0};
  std::atomic<uint64_t> js_thread_calls{0};
  /** The libuv pool's tasks: user and system time, and how many ran. */
  std::atomic<uint64_t> pool_user_ns{0};
  std::atomic<uint64_t> pool_sys_ns{0};
  std::atomic<uint64_t> pool_tasks{0};
};

CpuAccount& Cpu();

/** Counts a binding call's CPU on the calling (JavaScript) thread; nested scopes count once. */
class JsThreadCpuScope {
 public:
  JsThreadCpuScope();
  ~JsThreadCpuScope();
  JsThreadCpuScope(const JsThreadCpuScope&) = delete;
  JsThreadCpuScope& operator=(const JsThreadCpuScope&) = delete;

 private:
  uint64_t start_ = 0;
  bool outer_ = false;
};

/** Counts a pool task's user and system time (getrusage RUSAGE_THREAD). */
class PoolCpuScope {
 public:
  PoolCpuScope();
  ~PoolCpuScope();
  PoolCpuScope(const PoolCpuScope&) = delete;
  PoolCpuScope& operator=(const PoolCpuScope&) = delete;

 private:
  uint64_t user_ = 0;
  uint64_t sys_ = 0;
};

}  // namespace addon
