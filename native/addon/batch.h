// Shared by every family binding: run an nl::Batch on a channel and hand the per-request
// outcome to JS compactly (a status byte per request, NetlinkError objects only for failures),
// so a 100k-request batch costs one N-API crossing and no per-request JS objects when it works.
#pragma once

#include <napi.h>

#include <functional>
#include <string>
#include <vector>

#include "netlink/socket.h"

namespace addon {

// Status bytes, as src/native.ts's BatchStatus.
enum : uint8_t { kStatusNotSent = 0, kStatusOk = 1, kStatusError = 2, kStatusNoReply = 3 };

struct BatchOutcome {
  nl::TransactResult res;
  // Names the op of request i for error messages ("IPVS_CMD_NEW_SERVICE 10.0.0.1:80/tcp").
  std::vector<std::string> op_names;
  // Maps request index -> caller's op index when requests and ops are not 1:1 (empty = 1:1).
  std::vector<int64_t> op_index;
  // What the error of request i means beyond its errno, appended to its message when not empty
  // (IPVS: an unknown scheduler's ENOENT names the ip_vs_<name> module).
  std::vector<std::string> hints;
};

// { statuses: Uint8Array, errors: NetlinkError[], sendmsgCalls: number }. errors[i].index is
// the caller's op index.
Napi::Value BatchOutcomeToJs(Napi::Env env, BatchOutcome& out);

}  // namespace addon
