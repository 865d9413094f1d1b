// A netlink socket of one protocol, optionally inside another network namespace. Sends many
// requests per sendmsg, maps every ack back to its request, reads dumps to NLMSG_DONE.
// Not thread-safe: the addon serialises use of one socket.
#pragma once

#include <linux/netlink.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "netlink/error.h"
#include "netlink/message.h"

namespace nl {

enum class Outcome : uint8_t {
  kNotSent,  // never sent: an earlier request failed in stop-on-error mode (the kernel never saw it)
  kOk,
  kError,    // the kernel answered with an error
  kNoReply,  // sent but no reply arrived (ENOBUFS dropped it, or the kernel sent none)
};

struct RequestResult {
  Outcome outcome = Outcome::kNotSent;
  Status status;
};

struct TransactOptions {
  // Stop at the first failed request: nothing after it reaches the kernel. The kernel runs every
  // message of a sendmsg whatever the earlier ones answered, so this sends one request per
  // sendmsg and reads its answer before the next (max_chunk_messages is then 1). False
  // pipelines many requests per sendmsg and runs them all.
  bool stop_on_error = true;
  // All messages in one sendmsg, as nfnetlink batches require (the kernel commits or aborts
  // the whole batch).
  bool atomic = false;
  size_t max_chunk_messages = 1024;
  size_t max_chunk_bytes = 256 * 1024;
};

struct DataReply {
  size_t index;                // request the reply belongs to
  std::vector<uint8_t> bytes;  // one complete netlink message
};

struct TransactResult {
  std::vector<RequestResult> results;  // one per request in the batch
  std::vector<DataReply> data;         // non-ack replies (answers to GET requests)
  size_t sendmsg_calls = 0;
  size_t first_error = SIZE_MAX;
};

// Counters readable from another thread while the socket works (tests assert batching with
// them: how many sendmsg calls and messages a sync cost).
struct SocketStats {
  std::atomic<uint64_t> sendmsg_calls{0};
  std::atomic<uint64_t> recvmsg_calls{0};
  std::atomic<uint64_t> messages_sent{0};
};

// Reads the replies of one dump: keeps only messages of its sequence number, hands data
// messages to on_message, ends at NLMSG_DONE (or an ack), throws kernel errors (with errno and
// extended ack) as nl::Exception. A callback that throws does not stop the reading (the rest of
// the dump must still be drained, or the kernel answers the socket's next dump with EBUSY): its
// exception is kept for Finish(). Shared by Socket::Dump and MultiDump, so both report a dump
// identically.
class DumpReader {
 public:
  DumpReader(uint32_t seq, const std::string& op, const std::function<void(const nlmsghdr*)>& on_message)
      : seq_(seq), op_(op), on_message_(on_message) {}
  // One datagram; returns true once the dump has ended. Throws a kernel error, or a decode
  // error for a truncated message.
  bool Feed(const uint8_t* data, size_t len);
  // After the end: rethrows a failed callback, then reports NLM_F_DUMP_INTR.
  void Finish();
  // The error a dump whose replies were dropped (ENOBUFS) ends with.
  [[noreturn]] static void ThrowNoBuffers(const std::string& op);

 private:
  uint32_t seq_;
  const std::string& op_;
  const std::function<void(const nlmsghdr*)>& on_message_;
  bool interrupted_ = false;
  std::exception_ptr failed_;
};

// Opens a netlink socket of `protocol` inside `netns` ("" = the caller's namespace), binds it and
// asks for extended and capped acks; rcvbuf > 0 also sizes its receive buffer. Returns the fd,
// and its port id through *port_id when not null. Throws nl::Exception.
int OpenNetlink(int protocol, const std::string& netns, int rcvbuf, uint32_t* port_id);

class Socket {
 public:
  // protocol: NETLINK_ROUTE, NETLINK_GENERIC, NETLINK_NETFILTER. netns: "" for the caller's
  // namespace, or a path such as /run/netns/NAME or /proc/PID/ns/net. Throws nl::Exception.
  // rcvbuf: receive buffer to ask for; 0 = 16 MiB (tests shrink it to provoke ENOBUFS).
  Socket(int protocol, const std::string& netns, int rcvbuf = 0);
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int protocol() const { return protocol_; }
  // NETLINK_GET_STRICT_CHK (4.20+): the kernel checks GET request headers strictly and honours
  // the filters they carry (rtnetlink route dumps by table, protocol, type). False when the
  // kernel does not know the option. Every GET sent on the socket afterwards must be clean.
  bool EnableStrictCheck();
  uint32_t port_id() const { return port_id_; }
  const SocketStats& stats() const { return stats_; }

  // Sends the requests of the batch in order and collects one result per request (kNotSent for
  // those stop_on_error kept from the kernel). Requests that carry NLM_F_ACK are expected to be
  // answered; others only if they fail.
  TransactResult Transact(Batch& batch, const TransactOptions& opt);

  // Sends one dump request (NLM_F_DUMP is added) and calls on_message for every data message
  // until NLMSG_DONE. Throws on a kernel error, ENOBUFS or NLM_F_DUMP_INTR (after draining).
  void Dump(Batch& request, const std::string& op, const std::function<void(const nlmsghdr*)>& on_message);

 private:
  void SendChunk(Batch& batch, size_t from, size_t to);
  // Receives one datagram into buf_; returns its length, 0 when nothing is queued and wait is
  // false. Throws on errors other than ENOBUFS, which it returns as -ENOBUFS.
  ssize_t Receive(bool wait);
  // Receives up to two datagrams with one recvmmsg (into buf_ and buf2_); returns how many,
  // 0 when nothing is queued and wait is false, -ENOBUFS on overflow.
  int ReceiveTwo(bool wait, ssize_t lens[2]);
  void Grow(int optname_force, int optname, int bytes);

  int fd_ = -1;
  int protocol_;
  uint32_t port_id_ = 0;
  uint32_t seq_;
  int rcvbuf_ = 0;
  // Receive buffers, left uninitialised: only what the kernel writes into them becomes resident
  // (zero-filled, the two took 512 KiB per socket from the start, for each of a proxy's
  // handles, on each thread that opens them).
  struct RecvBuffer {
    explicit RecvBuffer(size_t n) : p(new uint8_t[n]), n(n) {}
    uint8_t* data() { return p.get(); }
    size_t size() const { return n; }
    void resize(size_t k) { p.reset(new uint8_t[k]), n = k; }
    std::unique_ptr<uint8_t[]> p;
    size_t n;
  };
  RecvBuffer buf_;
  RecvBuffer buf2_;
  SocketStats stats_;
};

}  // namespace nl
