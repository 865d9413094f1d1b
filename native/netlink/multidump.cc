#include "netlink/multidump.h"

#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "netlink/error.h"
#include "netlink/socket.h"

namespace nl {

namespace {

constexpr size_t kIdle = SIZE_MAX;
// Receives queued per socket per round: a dump part and the DONE that follows it (the kernel
// writes the DONE of a small dump into a datagram of its own), so a dump of up to one datagram
// of rows ends in the round that started it.
constexpr int kRecvs = 2;
// Dump datagrams are at most 32 KiB (the kernel caps its dump skb there); MSG_TRUNC reports a
// longer one, which is refused rather than parsed.
constexpr size_t kBufBytes = 64 * 1024;

std::exception_ptr SystemError(const std::string& op, int err) {
  try {
    ThrowSystem(op, err);
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr DecodeError(const std::string& op, const std::string& why) {
  try {
    ThrowDecode(op, why);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

struct MultiDump::Slot {
  int fd = -1;
  Batch req;
  size_t dump = kIdle;
  std::function<void(const nlmsghdr*)> cb;  // outlives reader, which holds a reference
  std::unique_ptr<DumpReader> reader;
  bool block_next = false;
  // This round's operations and their results (res[0]: the SENDMSG, res[1 + k]: receive k).
  bool sent = false;
  int recvs = 0;
  int res[1 + kRecvs] = {};
  sockaddr_nl kernel{};
  iovec send_iov{};
  msghdr send_msg{};
  std::unique_ptr<uint8_t[]> buf[kRecvs];
  iovec iov[kRecvs]{};
  msghdr msg[kRecvs]{};
  sockaddr_nl from[kRecvs]{};
};

std::unique_ptr<MultiDump> MultiDump::Open(int protocol, const std::string& netns, size_t sockets, std::string* why) {
  if (sockets == 0) sockets = 1;
  static const uint8_t kNeed[] = {IORING_OP_SENDMSG, IORING_OP_RECVMSG, 0};
  int err = 0;
  // Every socket queues at most 1 + kRecvs operations per round.
  std::unique_ptr<Uring> ring = Uring::Open(static_cast<unsigned>(sockets * (1 + kRecvs)), kNeed, &err, why);
  if (!ring) return nullptr;
  std::unique_ptr<MultiDump> m(new MultiDump());
  m->protocol_ = protocol;
  m->netns_ = netns;
  m->ring_ = std::move(ring);
  const size_t fit = m->ring_->capacity() / (1 + kRecvs);
  if (fit < sockets) sockets = fit;
  for (size_t i = 0; i < sockets; i++) m->slots_.push_back(std::make_unique<Slot>());
  return m;
}

MultiDump::~MultiDump() {
  for (auto& s : slots_) {
    if (s->fd >= 0) close(s->fd);
    // After a failed io_uring_enter operations may still target these buffers until the
    // kernel has cancelled them: leak them rather than let it write into freed memory.
    if (!healthy_)
      for (auto& b : s->buf) b.release();
  }
}

void MultiDump::Run(size_t count, const std::string& op, const std::function<void(size_t, Batch&)>& encode,
                    const std::function<void(size_t, const nlmsghdr*)>& on_message) {
  if (!healthy_) ThrowSystem("io_uring", EIO);
  if (count == 0) return;
  const size_t use = count < slots_.size() ? count : slots_.size();
  for (size_t i = 0; i < use; i++) {
    Slot& s = *slots_[i];
    if (s.fd < 0) s.fd = OpenNetlink(protocol_, netns_, 0, nullptr);
    for (auto& b : s.buf)
      if (!b) b.reset(new uint8_t[kBufBytes]);
  }

  size_t next = 0;
  bool stop = false;
  size_t err_index = kIdle;
  std::exception_ptr err;
  auto record = [&](size_t index, std::exception_ptr e) {
    stop = true;
    if (index < err_index) {
      err_index = index;
      err = std::move(e);
    }
  };

  for (;;) {
    unsigned queued = 0;
    for (size_t i = 0; i < use; i++) {
      Slot& s = *slots_[i];
      s.sent = false;
      s.recvs = 0;
      if (s.dump == kIdle) {
        if (stop || next >= count || s.fd < 0) continue;
        const size_t d = next++;
        s.req.Clear();
        try {
          encode(d, s.req);
          s.req.Seal();
          if (s.req.size() != 1) ThrowInvalid(op, "a dump takes exactly one request");
        } catch (...) {
          record(d, std::current_exception());
          continue;
        }
        nlmsghdr* h = s.req.header(0);
        h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_DUMP;
        h->nlmsg_seq = seq_++;
        h->nlmsg_pid = 0;  // the kernel answers the sending socket whatever this says
        s.dump = d;
        s.cb = [&on_message, d](const nlmsghdr* m) { on_message(d, m); };
        s.reader = std::make_unique<DumpReader>(h->nlmsg_seq, op, s.cb);
        s.block_next = false;
        s.kernel = sockaddr_nl{};
        s.kernel.nl_family = AF_NETLINK;
        s.send_iov = iovec{s.req.buffer().data(), s.req.bytes()};
        s.send_msg = msghdr{};
        s.send_msg.msg_name = &s.kernel;
        s.send_msg.msg_namelen = sizeof s.kernel;
        s.send_msg.msg_iov = &s.send_iov;
        s.send_msg.msg_iovlen = 1;
        io_uring_sqe* e = ring_->Next();
        e->opcode = IORING_OP_SENDMSG;
        e->fd = s.fd;
        e->addr = reinterpret_cast<uint64_t>(&s.send_msg);
        e->len = 1;
        e->flags = IOSQE_IO_LINK;  // the receives run only after the request went in
        e->user_data = (static_cast<uint64_t>(i) << 8) | 0;
        s.sent = true;
        queued++;
      }
      // A receive that found nothing queued (the kernel answers late, which netlink families do
      // not do today) turns into one blocking receive, as Socket::Dump would block.
      const int n = s.block_next ? 1 : kRecvs;
      for (int k = 0; k < n; k++) {
        s.iov[k] = iovec{s.buf[k].get(), kBufBytes};
        s.from[k] = sockaddr_nl{};
        s.msg[k] = msghdr{};
        s.msg[k].msg_name = &s.from[k];
        s.msg[k].msg_namelen = sizeof s.from[k];
        s.msg[k].msg_iov = &s.iov[k];
        s.msg[k].msg_iovlen = 1;
        io_uring_sqe* e = ring_->Next();
        e->opcode = IORING_OP_RECVMSG;
        e->fd = s.fd;
        e->addr = reinterpret_cast<uint64_t>(&s.msg[k]);
        e->len = 1;
        e->msg_flags = MSG_TRUNC | (s.block_next ? 0 : MSG_DONTWAIT);
        if (k + 1 < n) e->flags = IOSQE_IO_LINK;
        e->user_data = (static_cast<uint64_t>(i) << 8) | static_cast<uint64_t>(1 + k);
        s.res[1 + k] = -ECANCELED;
        queued++;
      }
      s.recvs = n;
    }
    if (queued == 0) break;

    const int r = ring_->SubmitAndWait(queued);
    stats_.enter_calls = ring_->enter_calls();
    if (r < 0) {
      healthy_ = false;
      ThrowSystem("io_uring_enter", -r);
    }
    ring_->Reap([&](uint64_t ud, int res, uint32_t) {
      const size_t slot = static_cast<size_t>(ud >> 8);
      const size_t step = static_cast<size_t>(ud & 0xff);
      if (slot < use && step <= kRecvs) slots_[slot]->res[step] = res;
    });

    for (size_t i = 0; i < use; i++) {
      Slot& s = *slots_[i];
      if (s.dump == kIdle || (!s.sent && s.recvs == 0)) continue;
      bool ended = false;
      bool broken = false;
      bool got = false;
      std::exception_ptr e;
      if (s.sent) {
        stats_.ring_sendmsgs++;
        if (s.res[0] < 0) {
          e = SystemError("sendmsg", -s.res[0]);
          ended = true;
        }
      }
      stats_.ring_recvmsgs += static_cast<uint64_t>(s.recvs);
      for (int k = 0; k < s.recvs && !ended; k++) {
        const int n = s.res[1 + k];
        if (n == 0 || n == -EAGAIN || n == -ECANCELED || n == -EINTR) break;
        if (n == -ENOBUFS) {
          try {
            DumpReader::ThrowNoBuffers(op);
          } catch (...) {
            e = std::current_exception();
          }
          ended = broken = true;
          break;
        }
        if (n < 0) {
          e = SystemError("recvmsg", -n);
          ended = broken = true;
          break;
        }
        if (static_cast<size_t>(n) > kBufBytes) {
          e = DecodeError("recvmsg", "datagram larger than the receive buffer");
          ended = broken = true;
          break;
        }
        if (s.from[k].nl_pid != 0) continue;  // only the kernel talks to us
        got = true;
        try {
          if (s.reader->Feed(s.buf[k].get(), static_cast<size_t>(n))) {
            ended = true;
            s.reader->Finish();
          }
        } catch (const Exception& x) {
          e = std::current_exception();
          // A kernel error ends the dump cleanly; anything else leaves the socket unknown.
          if (!ended) broken = x.error().kind != ErrorKind::kKernel;
          ended = true;
        } catch (...) {
          e = std::current_exception();
          ended = true;
        }
      }
      if (!ended) {
        s.block_next = !got;
        continue;
      }
      stats_.dumps++;
      if (e) record(s.dump, e);
      s.dump = kIdle;
      s.reader.reset();
      if (broken) {
        close(s.fd);
        s.fd = -1;  // reopened by the next Run
      }
    }
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace nl
