// Reading the arguments and options objects of binding calls, one way for every binding. A
// value of the wrong type or out of range throws a kInvalid NetlinkError naming the call and
// the field ("open: netns must be a path string"); an unset (undefined or null) optional value
// takes its default.
#pragma once

#include <linux/netlink.h>
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "netlink/socket.h"

namespace addon {

// Neither undefined nor null.
bool IsSet(const Napi::Value& v);
// opts[key] of an options argument; undefined when `opts` is not an object.
Napi::Value Opt(const Napi::Value& opts, const char* key);

// An integer 0..max (a number, or a bigint): "<what> must be a number", "<what> is out of
// range 0-<max> (got <v>)".
uint64_t UIntArg(Napi::Env env, const Napi::Value& v, uint64_t max, const std::string& op, const std::string& what);
// opts[key] as UIntArg reads it, or `dflt` when unset.
uint64_t UIntOpt(Napi::Env env, const Napi::Value& opts, const char* key, uint64_t max, uint64_t dflt,
                 const std::string& op);
// A string: "<what> must be a string".
std::string StrArg(Napi::Env env, const Napi::Value& v, const std::string& op, const std::string& what);
// opts[key] as a name of at most `max` bytes without NUL, or "" when unset.
std::string NameOpt(Napi::Env env, const Napi::Value& opts, const char* key, size_t max, const std::string& op);
// opts[key] when it is a boolean, else `dflt`.
bool BoolOpt(const Napi::Value& opts, const char* key, bool dflt);
// A boolean: "<what> must be a boolean"; `dflt` when unset.
bool BoolArg(Napi::Env env, const Napi::Value& v, bool dflt, const std::string& op, const std::string& what);
// 'inet' or 'inet6' as AF_INET or AF_INET6: "family must be 'inet' or 'inet6'".
uint8_t InetFamilyArg(Napi::Env env, const Napi::Value& v, const std::string& op);
// An array: "<op>: <why>" otherwise.
Napi::Array ArrayArg(Napi::Env env, const Napi::Value& v, const std::string& op, const char* why);
// As codec hooks read their optional numbers: v's uint32 value when it is a number, else `dflt`.
uint32_t NumberOr(const Napi::Value& v, uint32_t dflt);

// The optional { netns } option of a handle constructor (argument `arg`): a namespace path, or
// "" for the caller's.
std::string NetnsOption(const Napi::CallbackInfo& info, size_t arg);
// The options every batch-taking method accepts: { stopOnError?: boolean (default true),
// maxBatchMessages?: number }.
nl::TransactOptions BatchOptions(const Napi::Value& opts);

// Codec hooks' inputs: a Buffer's bytes; one netlink message, bounds-checked (`storage` keeps
// the bytes alive).
std::vector<uint8_t> BufferArg(const Napi::CallbackInfo& info, size_t i);
const nlmsghdr* MessageArg(const Napi::CallbackInfo& info, size_t i, std::vector<uint8_t>* storage,
                           const char* op);

}  // namespace addon
