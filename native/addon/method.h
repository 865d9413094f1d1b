// How every binding method is defined: Function<F>(env, name) for a free function,
// Wrapped<T>::Method<&T::M>(name) for a handle's method. Both run the call inside a
// JsThreadCpuScope (the addon's CPU counters, cpu.h) and let a C++ exception leave it as the
// typed JS error the addon throws everywhere: an nl::Exception as its NetlinkError, any other
// std::exception as a NetlinkError of kind 'system' (as a pool task's); a NetlinkError already
// thrown (ThrowInvalid) passes as it is, as does a Napi::TypeError the binding throws itself
// (only calls outside netlink do: memoryPressure), and any other JS error (what reading an
// argument ran into: a throwing getter, a value N-API could not read as the type asked for)
// leaves as a NetlinkError of kind 'invalid'. A method cannot forget either.
#pragma once

#include <napi.h>

#include <exception>

#include "addon/cpu.h"
#include "addon/errors.h"
#include "netlink/error.h"

namespace addon {

using Callback = Napi::Value (*)(const Napi::CallbackInfo&);

template <class F>
Napi::Value Guarded(const Napi::CallbackInfo& info, F&& f) {
  JsThreadCpuScope cpu;
  try {
    return f();
  } catch (const Napi::TypeError&) {
    throw;  // thrown by the binding itself, outside netlink (memoryPressure's bad level)
  } catch (const Napi::Error& e) {
    RethrowAtOp(info.Env(), e, -1, -1);
  } catch (const nl::Exception& e) {
    throw Napi::Error(info.Env(), MakeError(info.Env(), e.error()));
  } catch (const std::exception& e) {
    throw Napi::Error(info.Env(), MakeError(info.Env(), nl::Error(nl::ErrorKind::kSystem, 0, "EFAULT", "", e.what())));
  }
}

template <Callback F>
Napi::Value GuardedCall(const Napi::CallbackInfo& info) {
  return Guarded(info, [&] { return F(info); });
}

// A free function as a JS function.
template <Callback F>
Napi::Function Function(Napi::Env env, const char* name) {
  return Napi::Function::New(env, GuardedCall<F>, name);
}

// The base of every wrapped class (class T : public Wrapped<T>): its methods are registered with
// Method<&T::M>("name") in DefineClass; M may be a member of a base of T (ChannelHandle's).
template <class T>
class Wrapped : public Napi::ObjectWrap<T> {
 public:
  using Napi::ObjectWrap<T>::ObjectWrap;

 protected:
  using Member = Napi::Value (T::*)(const Napi::CallbackInfo&);

  template <auto M>
  static Napi::ClassPropertyDescriptor<T> Method(const char* name) {
    return Napi::ObjectWrap<T>::InstanceMethod(name, static_cast<Member>(&Wrapped::template Call<M>));
  }

 private:
  template <auto M>
  Napi::Value Call(const Napi::CallbackInfo& info) {
    return Guarded(info, [&] { return (static_cast<T*>(this)->*M)(info); });
  }
};

}  // namespace addon
