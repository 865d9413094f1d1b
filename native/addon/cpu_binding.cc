// cpuUsage(): the addon's CPU counters (cpu.h) as numbers of nanoseconds.
#include "addon/cpu.h"

#include <napi.h>
#include <sys/resource.h>
#include <time.h>

#include "addon/bindings.h"

namespace addon {

CpuAccount& Cpu() {
  static CpuAccount account;
  return account;
}

namespace {

thread_local int js_depth = 0;

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t Ns(const timeval& tv) { return static_cast<uint64_t>(tv.tv_sec) * 1000000000ull + static_cast<uint64_t>(tv.tv_usec) * 1000ull; }

void ThreadUsage(uint64_t* user, uint64_t* sys) {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  *user = Ns(ru.ru_utime);
  *sys = Ns(ru.ru_stime);
}

Napi::Value CpuUsage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const CpuAccount& c = Cpu();
  Napi::Object o = Napi::Object::New(env);
  o.Set("jsThreadNs", Napi::Number::New(env, static_cast<double>(c.js_thread_ns.load(std::memory_order_relaxed))));
  o.Set("jsThreadCalls", Napi::Number::New(env, static_cast<double>(c.js_thread_calls.load(std::memory_order_relaxed))));
  o.Set("poolUserNs", Napi::Number::New(env, static_cast<double>(c.pool_user_ns.load(std::memory_order_relaxed))));
  o.Set("poolSysNs", Napi::Number::New(env, static_cast<double>(c.pool_sys_ns.load(std::memory_order_relaxed))));
  o.Set("poolTasks", Napi::Number::New(env, static_cast<double>(c.pool_tasks.load(std::memory_order_relaxed))));
  return o;
}

}  // namespace

JsThreadCpuScope::JsThreadCpuScope() : outer_(js_depth++ == 0) {
  if (outer_) start_ = ThreadCpuNs();
}

JsThreadCpuScope::~JsThreadCpuScope() {
  --js_depth;
  if (!outer_) return;
  Cpu().js_thread_ns.fetch_add(ThreadCpuNs() - start_, std::memory_order_relaxed);
  Cpu().js_thread_calls.fetch_add(1, std::memory_order_relaxed);
}

PoolCpuScope::PoolCpuScope() { ThreadUsage(&user_, &sys_); }

PoolCpuScope::~PoolCpuScope() {
  uint64_t user = 0;
  uint64_t sys = 0;
  ThreadUsage(&user, &sys);
  // getrusage splits a thread's exact runtime by its ticks: a share can step back a little
  if (user > user_) Cpu().pool_user_ns.fetch_add(user - user_, std::memory_order_relaxed);
  if (sys > sys_) Cpu().pool_sys_ns.fetch_add(sys - sys_, std::memory_order_relaxed);
  Cpu().pool_tasks.fetch_add(1, std::memory_order_relaxed);
}

// The one function not defined through method.h: reading the counters does not count as a call
// (a caller reads them before and after a piece of work and subtracts).
void InitCpu(Napi::Env env, Napi::Object exports) { exports.Set("cpuUsage", Napi::Function::New(env, CpuUsage, "cpuUsage")); }

}  // namespace addon
