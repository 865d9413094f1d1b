// memoryPressure(level): tells V8 the process should give memory back. The one binding that
// talks to V8 rather than to the kernel: after a full resync at 10k+ services (listings of
// ~100k objects read, diffed and dropped), the heap has grown by what that sync allocated and,
// left alone, stays there until allocation reaches the next limit. 'moderate' starts an
// incremental, memory-reducing mark-compact (concurrent marking, a short final pause; no long
// blocking collection); 'critical' collects synchronously; 'none' clears the level. Either of
// the first two also returns the C heap's free pages to the kernel (glibc's malloc_trim: the
// listings' native buffers are freed by the libuv pool's threads, into arenas glibc otherwise
// keeps).
#include <napi.h>
#include <v8.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <string>

#include "addon/bindings.h"

namespace addon {
namespace {

Napi::Value MemoryPressure(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const std::string level = info.Length() > 0 && info[0].IsString() ? info[0].As<Napi::String>().Utf8Value() : "";
  v8::MemoryPressureLevel l;
  if (level == "none") l = v8::MemoryPressureLevel::kNone;
  else if (level == "moderate") l = v8::MemoryPressureLevel::kModerate;
  else if (level == "critical") l = v8::MemoryPressureLevel::kCritical;
  else throw Napi::TypeError::New(env, "memoryPressure: level must be 'none', 'moderate' or 'critical'");
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) throw Napi::Error::New(env, "memoryPressure: no current isolate");
  isolate->MemoryPressureNotification(l);
#if defined(__GLIBC__)
  if (l != v8::MemoryPressureLevel::kNone) malloc_trim(0);
#endif
  return env.Undefined();
}

// detachArrayBuffer(buffer): frees an ArrayBuffer's memory now instead of at the collection
// that finds it unreachable (an ArrayBuffer that outlived two young-generation collections
// keeps its memory until the next full one). Its views read as empty after.
Napi::Value DetachArrayBuffer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArrayBuffer()) throw Napi::TypeError::New(env, "detachArrayBuffer: expected an ArrayBuffer");
  Napi::ArrayBuffer ab = info[0].As<Napi::ArrayBuffer>();
  if (!ab.IsDetached()) ab.Detach();
  return env.Undefined();
}

}  // namespace

void InitMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("memoryPressure", Function<MemoryPressure>(env, "memoryPressure"));
  exports.Set("detachArrayBuffer", Function<DetachArrayBuffer>(env, "detachArrayBuffer"));
}

}  // namespace addon
