// One netlink socket per JS handle, opened lazily on a worker thread and serialised by a mutex
// (several promises may be in flight on one handle; the kernel conversation is sequential).
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "netlink/genl.h"
#include "netlink/multidump.h"
#include "netlink/socket.h"

namespace addon {

struct Channel {
  Channel(int protocol, std::string netns) : protocol(protocol), netns(std::move(netns)) {}

  // Call with `mu` held.
  nl::Socket& Sock() {
    if (!sock) {
      sock = std::make_unique<nl::Socket>(protocol, netns, rcvbuf_bytes);
      opened.store(sock.get());
    }
    return *sock;
  }

  // Many dumps at once over io_uring (netlink/multidump.h), set up on first use. Call with `mu`
  // held. nullptr when disabled for this handle or unusable here (multi_why says why): the
  // caller then dumps one at a time with Sock().Dump, with identical results.
  nl::MultiDump* Multi() {
    if (!multi && multi_state.load() == kMultiUntried) {
      std::string why;
      if (multi_sockets == 0) {
        why = "disabled for this handle";
      } else {
        multi = nl::MultiDump::Open(protocol, netns, multi_sockets, &why);
      }
      if (multi) {
        multi_opened.store(multi.get());
        multi_state.store(kMultiOn);
      } else {
        multi_why = why;
        multi_state.store(kMultiOff);
      }
    }
    return multi.get();
  }
  // io_uring failed under a running Run: keep the broken ring (its buffers may still be targeted)
  // out of use for good and fall back.
  void DropMulti(const std::string& why) {
    multi_why = why;
    multi_state.store(kMultiOff);
    retired_multi = std::move(multi);
  }
  static constexpr int kMultiUntried = 0, kMultiOn = 1, kMultiOff = 2;

  std::mutex mu;
  const int protocol;
  const std::string netns;
  int rcvbuf_bytes = 0;  // 0: as large as the kernel allows (SO_RCVBUFFORCE, 16 MiB)
  std::unique_ptr<nl::Socket> sock;
  std::atomic<nl::Socket*> opened{nullptr};  // for lock-free reads of the socket's counters
  nl::GenlResolver genl;
  size_t multi_sockets = nl::MultiDump::kDefaultSockets;  // 0: never use io_uring
  std::unique_ptr<nl::MultiDump> multi;
  std::unique_ptr<nl::MultiDump> retired_multi;
  std::atomic<nl::MultiDump*> multi_opened{nullptr};  // for lock-free reads of its counters
  std::atomic<int> multi_state{kMultiUntried};
  std::string multi_why;  // written before multi_state becomes kMultiOff
  // rtnetlink: NETLINK_GET_STRICT_CHK asked for (on the first route dump) and granted.
  bool strict_check_tried = false;
  bool strict_check = false;
};

// Reads the optional { netns } option of a handle constructor.
std::string NetnsOption(const Napi::CallbackInfo& info, size_t arg);

}  // namespace addon
