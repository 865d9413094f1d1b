#include "netlink/socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <thread>

namespace nl {

namespace {

constexpr int kWantBuffer = 16 << 20;
// A queued ack costs an skb (truesize ~1 KiB) of receive buffer; keep a chunk's acks well
// inside the buffer so pipelining never overflows it.
constexpr int kAckCost = 1280;
constexpr int kReplyWaitMs = 10000;

int OpenIn(int protocol, const std::string& netns, int* err) {
  if (netns.empty()) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    *err = fd < 0 ? errno : 0;
    return fd;
  }
  // setns() switches only the calling thread, so a short-lived thread opens the socket inside
  // the namespace; the socket stays bound to that namespace for its whole life.
  int fd = -1;
  std::string failed_op;
  std::thread t([&] {
    int ns = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      *err = errno;
      failed_op = "open";
      return;
    }
    if (unshare(CLONE_FS) < 0 || setns(ns, CLONE_NEWNET) < 0) {
      *err = errno;
      failed_op = "setns";
      close(ns);
      return;
    }
    close(ns);
    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    *err = fd < 0 ? errno : 0;
    if (fd < 0) failed_op = "socket";
  });
  t.join();
  if (fd < 0 && !failed_op.empty() && failed_op != "socket") {
    Error e(ErrorKind::kSystem, *err, ErrnoName(*err), failed_op,
            "cannot enter network namespace " + netns + ": " + failed_op + ": " + ErrnoText(*err));
    if (*err == EPERM) e.message += " (CAP_SYS_ADMIN required)";
    throw Exception(std::move(e));
  }
  return fd;
}

}  // namespace

int OpenNetlink(int protocol, const std::string& netns, int rcvbuf, uint32_t* port_id) {
  int err = 0;
  int fd = OpenIn(protocol, netns, &err);
  if (fd < 0) ThrowSystem("socket(AF_NETLINK)", err);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    err = errno;
    close(fd);
    ThrowSystem("bind", err);
  }
  if (port_id) {
    socklen_t sl = sizeof sa;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl) < 0) {
      err = errno;
      close(fd);
      ThrowSystem("getsockname", err);
    }
    *port_id = sa.nl_pid;
  }
  int one = 1;
  // Extended acks carry the kernel's reason text; capped acks keep each ack at 36 bytes.
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  return fd;
}

Socket::Socket(int protocol, const std::string& netns, int rcvbuf)
    : protocol_(protocol), buf_(256 * 1024), buf2_(256 * 1024) {
  fd_ = OpenNetlink(protocol, netns, rcvbuf > 0 ? rcvbuf : kWantBuffer, &port_id_);
  Grow(SO_SNDBUFFORCE, SO_SNDBUF, 4 << 20);
  int v = 0;
  socklen_t vl = sizeof v;
  getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &vl);
  rcvbuf_ = v;
  seq_ = static_cast<uint32_t>(time(nullptr));
}

Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

void Socket::Grow(int optname_force, int optname, int bytes) {
  // FORCE needs CAP_NET_ADMIN; without it the plain option is capped by net.core.*mem_max.
  if (setsockopt(fd_, SOL_SOCKET, optname_force, &bytes, sizeof bytes) < 0)
    setsockopt(fd_, SOL_SOCKET, optname, &bytes, sizeof bytes);
}

void Socket::SendChunk(Batch& batch, size_t from, size_t to) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  iovec iov{};
  iov.iov_base = &batch.buffer()[batch.offset(from)];
  iov.iov_len = batch.end(to - 1) - batch.offset(from);
  msghdr m{};
  m.msg_name = &kernel;
  m.msg_namelen = sizeof kernel;
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  for (;;) {
    ssize_t n = sendmsg(fd_, &m, 0);
    if (n >= 0) break;
    if (errno == EINTR) continue;
    ThrowSystem("sendmsg", errno);
  }
  stats_.sendmsg_calls++;
  stats_.messages_sent += to - from;
}

int Socket::ReceiveTwo(bool wait, ssize_t lens[2]) {
  for (;;) {
    sockaddr_nl from[2]{};
    iovec iov[2] = {{buf_.data(), buf_.size()}, {buf2_.data(), buf2_.size()}};
    mmsghdr msgs[2]{};
    for (int i = 0; i < 2; i++) {
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // MSG_WAITFORONE: block for the first datagram only; take a second one if it is queued.
    int n = recvmmsg(fd_, msgs, 2, (wait ? MSG_WAITFORONE : MSG_DONTWAIT) | MSG_TRUNC, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno == ENOBUFS) return -ENOBUFS;
      ThrowSystem("recvmmsg", errno);
    }
    stats_.recvmsg_calls++;
    int kept = 0;
    for (int i = 0; i < n; i++) {
      if (msgs[i].msg_len > (i == 0 ? buf_.size() : buf2_.size())) ThrowDecode("recvmmsg", "datagram larger than the receive buffer");
      if (from[i].nl_pid != 0) continue;  // only the kernel talks to us
      if (kept != i) std::memcpy(buf_.data(), buf2_.data(), msgs[i].msg_len);  // keep order dense
      lens[kept++] = static_cast<ssize_t>(msgs[i].msg_len);
    }
    if (kept > 0 || !wait) return kept;
  }
}

ssize_t Socket::Receive(bool wait) {
  for (;;) {
    iovec iov{buf_.data(), buf_.size()};
    sockaddr_nl from{};
    msghdr m{};
    m.msg_name = &from;
    m.msg_namelen = sizeof from;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    ssize_t n = recvmsg(fd_, &m, (wait ? 0 : MSG_DONTWAIT) | MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno == ENOBUFS) return -ENOBUFS;
      ThrowSystem("recvmsg", errno);
    }
    stats_.recvmsg_calls++;
    if (static_cast<size_t>(n) > buf_.size()) {
      // Never happens with a 256 KiB buffer (the kernel's dump skbs are at most 32 KiB), but a
      // truncated datagram must not be parsed as if it were whole.
      buf_.resize(static_cast<size_t>(n));
      ThrowDecode("recvmsg", "datagram larger than the receive buffer");
    }
    if (from.nl_pid != 0) continue;  // only the kernel talks to us
    return n;
  }
}

TransactResult Socket::Transact(Batch& batch, const TransactOptions& opt) {
  batch.Seal();
  TransactResult out;
  const size_t n = batch.size();
  out.results.resize(n);
  if (n == 0) return out;

  const uint32_t base = seq_;
  seq_ += static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; i++) {
    nlmsghdr* h = batch.header(i);
    h->nlmsg_seq = base + static_cast<uint32_t>(i);
    h->nlmsg_pid = port_id_;
  }

  size_t chunk_msgs = opt.max_chunk_messages;
  const size_t by_buffer = static_cast<size_t>(rcvbuf_ / kAckCost);
  if (by_buffer > 0 && by_buffer < chunk_msgs) chunk_msgs = by_buffer;
  // Stop-on-error must keep every request after a failure from the kernel, which runs all the
  // messages of one sendmsg in order whatever the earlier ones answered: one request per
  // sendmsg, its answer read before the next is sent. (atomic batches are all-or-nothing in the
  // kernel already.)
  const bool one_by_one = opt.stop_on_error && !opt.atomic;
  if (chunk_msgs == 0 || one_by_one) chunk_msgs = 1;
  if (opt.atomic) {
    // One sendmsg for the whole batch: make sure it and its acks fit.
    const int need_snd = static_cast<int>(batch.bytes() + 4096);
    Grow(SO_SNDBUFFORCE, SO_SNDBUF, need_snd);
    const int need_rcv = static_cast<int>(n * kAckCost + (1 << 20));
    if (need_rcv > rcvbuf_) {
      Grow(SO_RCVBUFFORCE, SO_RCVBUF, need_rcv);
      int v = 0;
      socklen_t vl = sizeof v;
      getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &v, &vl);
      rcvbuf_ = v;
    }
  }

  size_t from = 0;
  bool lost = false;  // ENOBUFS seen: later replies may be missing
  while (from < n) {
    size_t to = from;
    if (opt.atomic) {
      to = n;
    } else {
      size_t bytes = 0;
      while (to < n && to - from < chunk_msgs) {
        const size_t len = batch.end(to) - batch.offset(to);
        if (to > from && bytes + len > opt.max_chunk_bytes) break;
        bytes += len;
        to++;
      }
    }
    size_t awaiting = 0;
    for (size_t i = from; i < to; i++) {
      if (batch.header(i)->nlmsg_flags & NLM_F_ACK) awaiting++;
      out.results[i].outcome = Outcome::kNoReply;
    }
    SendChunk(batch, from, to);
    out.sendmsg_calls++;

    // The kernel handles route, generic and netfilter requests synchronously inside sendmsg,
    // so every reply of this chunk is already queued: drain without blocking. Once any reply
    // of the chunk has arrived, the ones still missing will not come (an nfnetlink batch
    // rejected at BATCH_BEGIN answers only that); only a chunk with no reply at all is given
    // a grace period, as a safety net for a kernel that answers late.
    bool waited = false;
    bool any_reply = false;
    for (;;) {
      ssize_t len = Receive(false);
      if (len == 0) {
        if (awaiting == 0 || waited || lost || any_reply) break;
        pollfd p{fd_, POLLIN, 0};
        waited = poll(&p, 1, kReplyWaitMs) <= 0;
        continue;
      }
      if (len < 0) {  // ENOBUFS: the queue overflowed and replies were dropped
        lost = true;
        continue;
      }
      const bool ok = ForEachMessage(buf_.data(), static_cast<size_t>(len), [&](const nlmsghdr* h) {
        if (h->nlmsg_seq < base + from || h->nlmsg_seq >= base + to) return true;  // stale
        const size_t idx = h->nlmsg_seq - base;
        any_reply = true;
        if (h->nlmsg_type == NLMSG_ERROR) {
          Status st;
          uint32_t echoed = 0;
          if (!ParseError(h, &st, &echoed)) ThrowDecode("ack", "malformed NLMSG_ERROR");
          RequestResult& r = out.results[idx];
          if (r.outcome == Outcome::kNoReply && (batch.header(idx)->nlmsg_flags & NLM_F_ACK) &&
              awaiting > 0)
            awaiting--;
          if (st.error != 0) {
            r.outcome = Outcome::kError;
            r.status = std::move(st);
            if (idx < out.first_error) out.first_error = idx;
          } else if (r.outcome != Outcome::kError) {
            r.outcome = Outcome::kOk;
          }
        } else if (h->nlmsg_type != NLMSG_DONE && h->nlmsg_type != NLMSG_NOOP) {
          const uint8_t* p = reinterpret_cast<const uint8_t*>(h);
          out.data.push_back(DataReply{idx, std::vector<uint8_t>(p, p + h->nlmsg_len)});
        }
        return true;
      });
      if (!ok) ThrowDecode("recvmsg", "truncated netlink message");
      if (awaiting == 0) {
        // A lone request that asked for an ack has had the kernel's last word on it: the ack
        // follows all its replies, and an overflow would have surfaced as ENOBUFS before the
        // queued ack. Saves a recvmsg per request in stop-on-error mode.
        if (to - from == 1 && !opt.atomic && (batch.header(from)->nlmsg_flags & NLM_F_ACK)) break;
        // Drain anything else already queued (extra error reports, e.g. a failed nfnetlink
        // commit reported against the batch header) without waiting.
        waited = true;
      }
    }
    for (size_t i = from; i < to; i++) {
      RequestResult& r = out.results[i];
      // A request sent without NLM_F_ACK that drew no error succeeded.
      if (r.outcome == Outcome::kNoReply && !(batch.header(i)->nlmsg_flags & NLM_F_ACK) && !lost)
        r.outcome = Outcome::kOk;
      if (r.outcome == Outcome::kNoReply && lost) r.status.error = ENOBUFS;
    }
    from = to;
    if (out.first_error != SIZE_MAX && opt.stop_on_error) break;
    if (lost && opt.stop_on_error) break;
  }
  return out;
}

void DumpReader::ThrowNoBuffers(const std::string& op) {
  throw Exception(Error(ErrorKind::kNoBuffers, ENOBUFS, "ENOBUFS", op,
                        op + ": dump replies were dropped (receive buffer overflow); retry the dump"));
}

bool DumpReader::Feed(const uint8_t* data, size_t len) {
  bool done = false;
  const bool ok = ForEachMessage(data, len, [&](const nlmsghdr* m) {
    if (m->nlmsg_seq != seq_) return true;
    if (m->nlmsg_flags & NLM_F_DUMP_INTR) interrupted_ = true;
    if (m->nlmsg_type == NLMSG_DONE) {
      // Since 4.x a DONE may carry an error code (and extended ack) for the whole dump.
      if (m->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
        int err;
        std::memcpy(&err, NLMSG_DATA(m), sizeof err);
        if (err < 0) {
          const int errnum = ErrorFromWire(err);
          throw Exception(Error(ErrorKind::kKernel, errnum, ErrnoName(errnum), op_, op_ + ": " + ErrnoText(errnum)));
        }
      }
      done = true;
      return false;
    }
    if (m->nlmsg_type == NLMSG_ERROR) {
      Status st;
      uint32_t echoed = 0;
      if (!ParseError(m, &st, &echoed)) ThrowDecode(op_, "malformed NLMSG_ERROR");
      if (st.error == 0) {  // an ack ends a dump the kernel answered without DONE
        done = true;
        return false;
      }
      Error e(ErrorKind::kKernel, st.error, ErrnoName(st.error), op_,
              op_ + ": " + ErrnoText(st.error) + (st.extack.empty() ? "" : " (" + st.extack + ")"));
      e.extack = st.extack;
      e.extack_offset = st.extack_offset;
      throw Exception(std::move(e));
    }
    if (m->nlmsg_type == NLMSG_NOOP || m->nlmsg_type == NLMSG_OVERRUN) return true;
    if (!failed_) {
      try {
        on_message_(m);
      } catch (...) {
        failed_ = std::current_exception();
      }
    }
    return true;
  });
  if (!ok) ThrowDecode(op_, "truncated netlink message");
  return done;
}

void DumpReader::Finish() {
  if (failed_) std::rethrow_exception(failed_);
  if (interrupted_) {
    throw Exception(Error(ErrorKind::kDumpInterrupted, EINTR, "DUMP_INTR", op_,
                          op_ + ": the kernel's object set changed during the dump (NLM_F_DUMP_INTR); redo it"));
  }
}

bool Socket::EnableStrictCheck() {
  int one = 1;
  return setsockopt(fd_, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one) == 0;
}

void Socket::Dump(Batch& request, const std::string& op,
                  const std::function<void(const nlmsghdr*)>& on_message) {
  request.Seal();
  if (request.size() != 1) ThrowInvalid(op, "a dump takes exactly one request");
  nlmsghdr* h = request.header(0);
  h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_DUMP;
  h->nlmsg_seq = seq_++;
  h->nlmsg_pid = port_id_;
  DumpReader reader(h->nlmsg_seq, op, on_message);
  SendChunk(request, 0, 1);

  // The kernel fills the next part of a dump (or its DONE) synchronously at the end of each
  // recvmsg, so one recvmmsg of two datagrams takes a reply and what follows it: a small dump
  // (IPVS destinations of one service) costs one send and one receive instead of two receives.
  for (;;) {
    ssize_t lens[2] = {0, 0};
    const int got = ReceiveTwo(true, lens);
    if (got < 0) DumpReader::ThrowNoBuffers(op);
    bool done = false;
    for (int d = 0; d < got && !done; d++)
      done = reader.Feed(d == 0 ? buf_.data() : buf2_.data(), static_cast<size_t>(lens[d]));
    if (done) break;
  }
  reader.Finish();
}

}  // namespace nl
