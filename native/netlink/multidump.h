// Many independent dumps of one netlink protocol at once, driven by io_uring: a pool of sockets
// (a netlink socket runs one dump at a time; a second request gets EBUSY), one dump per socket,
// and per round ONE io_uring_enter that carries, for every socket, either a new dump's request
// (SENDMSG) with its first receives (RECVMSG, linked after it) or the next receives of the dump
// it runs. The kernel fills a dump's next part (or its NLMSG_DONE) synchronously inside each
// recvmsg, so receives are queued with MSG_DONTWAIT and complete inside the same call; a
// socket whose receive found nothing queued gets one blocking receive in the next round.
// Replies are read by the same DumpReader as Socket::Dump (sequence filter, DONE with error,
// NLMSG_ERROR with extended ack, NLM_F_DUMP_INTR, ENOBUFS), so results and errors are identical.
// Built for IPVS (one GET_DEST dump per service); nothing in it knows a family.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "netlink/message.h"
#include "netlink/uring.h"

namespace nl {

struct MultiDumpStats {
  std::atomic<uint64_t> enter_calls{0};   // io_uring_enter syscalls
  std::atomic<uint64_t> ring_sendmsgs{0};  // SENDMSG operations (one per dump)
  std::atomic<uint64_t> ring_recvmsgs{0};  // RECVMSG operations, including those that found nothing
  std::atomic<uint64_t> dumps{0};
};

class MultiDump {
 public:
  static constexpr size_t kDefaultSockets = 64;

  // Sets up the ring; sockets are opened by the first Run (inside `netns`, "" = the caller's).
  // Returns nullptr with *why set when io_uring is unusable here (ENOSYS, EPERM from
  // kernel.io_uring_disabled or a seccomp filter, no SENDMSG/RECVMSG opcodes): callers then
  // dump one at a time with Socket::Dump.
  static std::unique_ptr<MultiDump> Open(int protocol, const std::string& netns, size_t sockets, std::string* why);
  ~MultiDump();
  MultiDump(const MultiDump&) = delete;
  MultiDump& operator=(const MultiDump&) = delete;

  // Runs dumps 0..count-1 (at most one per socket at a time, started in index order).
  // encode(i, batch) appends dump i's single request (NLM_F_REQUEST | NLM_F_DUMP are added);
  // on_message(i, h) gets dump i's data messages in order (different dumps interleave).
  // When dumps fail, no new dump starts, the ones in flight run to their end, and the error of
  // the lowest-index failed dump is thrown: the error a one-at-a-time loop would have stopped
  // at. Throws nl::Exception (kSystem) if io_uring itself fails; the object is then unusable
  // (healthy() false) and the caller should fall back.
  void Run(size_t count, const std::string& op, const std::function<void(size_t, Batch&)>& encode,
           const std::function<void(size_t, const nlmsghdr*)>& on_message);

  bool healthy() const { return healthy_; }
  size_t sockets() const { return slots_.size(); }
  const MultiDumpStats& stats() const { return stats_; }

 private:
  struct Slot;
  MultiDump() = default;

  int protocol_ = 0;
  std::string netns_;
  std::unique_ptr<Uring> ring_;
  std::vector<std::unique_ptr<Slot>> slots_;
  uint32_t seq_ = 1;
  bool healthy_ = true;
  MultiDumpStats stats_;
};

}  // namespace nl
