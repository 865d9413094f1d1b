// One netlink socket per JS handle, opened lazily on a worker thread and serialised by a mutex
// (several promises may be in flight on one handle; the kernel conversation is sequential).
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "netlink/genl.h"
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

  std::mutex mu;
  const int protocol;
  const std::string netns;
  int rcvbuf_bytes = 0;  // 0: as large as the kernel allows (SO_RCVBUFFORCE, 16 MiB)
  std::unique_ptr<nl::Socket> sock;
  std::atomic<nl::Socket*> opened{nullptr};  // for lock-free reads of the socket's counters
  nl::GenlResolver genl;
  // rtnetlink: NETLINK_GET_STRICT_CHK asked for (on the first route dump) and granted.
  bool strict_check_tried = false;
  bool strict_check = false;
};

// Reads the optional { netns } option of a handle constructor.
std::string NetnsOption(const Napi::CallbackInfo& info, size_t arg);

}  // namespace addon
