// One netlink socket per JS handle, opened lazily on a worker thread and serialised by a mutex
// (several promises may be in flight on one handle; the kernel conversation is sequential).
// Requests that must reach the kernel in the order they were made take turns (below).
#pragma once

#include <napi.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "addon/async.h"
#include "netlink/genl.h"
#include "netlink/multidump.h"
#include "netlink/socket.h"

namespace addon {

struct Channel {
  Channel(int protocol, std::string netns) : protocol(protocol), netns(std::move(netns)) {}

  // Call with `mu` held. Throws (kInvalid, EBADF) once the handle is closed.
  nl::Socket& Sock() {
    if (closed) ThrowClosed();
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
    if (closed) ThrowClosed();
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

  // close(): with `mu` held, on a worker, after the requests made before it. Every later request
  // fails (Sock() and Multi() throw). The sockets are handed out to be destroyed on the main
  // thread (Retire), the only thread that reads their counters lock-free.
  struct Sockets {
    std::unique_ptr<nl::Socket> sock;
    std::unique_ptr<nl::MultiDump> multi, retired_multi;
  };
  std::shared_ptr<Sockets> CloseLocked() {
    closed = true;
    auto s = std::make_shared<Sockets>();
    s->sock = std::move(sock);
    s->multi = std::move(multi);
    s->retired_multi = std::move(retired_multi);
    return s;
  }
  void Retire(Sockets& s) {  // main thread
    opened.store(nullptr);
    multi_opened.store(nullptr);
    s = Sockets{};
  }
  [[noreturn]] static void ThrowClosed() {
    throw nl::Exception(nl::Error(nl::ErrorKind::kInvalid, EBADF, "EBADF", "handle", "handle: closed (close() was called)"));
  }

  // Turns: a ticket taken on the main thread when a request is made (TakeTicket), waited for on
  // the worker with `mu` held (WaitTurn), passed on when the request is done (EndTurn) or when
  // it never ran (SkipTurn). libuv's pool starts its jobs in the order they were queued, so the
  // holder of the next turn is always running or done: a job waiting for its turn never waits
  // on a job queued behind it.
  uint64_t TakeTicket() { return next_ticket++; }
  void WaitTurn(std::unique_lock<std::mutex>& lock, uint64_t ticket) {
    turn_cv.wait(lock, [&] { return turn == ticket; });
  }
  void EndTurn() {  // with `mu` held
    turn++;
    while (skipped.erase(turn) > 0) turn++;
    turn_cv.notify_all();
  }
  void SkipTurn(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mu);
    if (ticket == turn) {
      EndTurn();
    } else {
      skipped.insert(ticket);
    }
  }

  std::mutex mu;
  std::condition_variable turn_cv;
  uint64_t next_ticket = 0;  // main thread
  uint64_t turn = 0;         // guarded by mu
  std::set<uint64_t> skipped;  // guarded by mu
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
  bool closed = false;  // guarded by mu
};

// A request on a handle's channel: work(Channel&) runs on the libuv pool with `mu` held for all
// of it (it may call Sock() and Multi() and use what `mu` guards), then done(env, result) turns
// its result into JS on the main thread, as PromiseWorker<Result>::Run. The job holds the channel
// until it has run.
template <class Result, class Work>
Napi::Promise OnChannel(Napi::Env env, std::shared_ptr<Channel> ch, Work work,
                        typename PromiseWorker<Result>::Done done) {
  return PromiseWorker<Result>::Run(
      env,
      [ch = std::move(ch), work = std::move(work)]() {
        std::lock_guard<std::mutex> lock(ch->mu);
        return work(*ch);
      },
      std::move(done));
}

}  // namespace addon
