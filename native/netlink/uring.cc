#include "netlink/uring.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace nl {

namespace {

int SysSetup(unsigned entries, io_uring_params* p) {
  return static_cast<int>(syscall(__NR_io_uring_setup, entries, p));
}

int SysEnter(int fd, unsigned submit, unsigned wait, unsigned flags) {
  return static_cast<int>(syscall(__NR_io_uring_enter, fd, submit, wait, flags, nullptr, 0));
}

int SysRegister(int fd, unsigned op, void* arg, unsigned n) {
  return static_cast<int>(syscall(__NR_io_uring_register, fd, op, arg, n));
}

}  // namespace

std::unique_ptr<Uring> Uring::Open(unsigned entries, const uint8_t* need_ops, int* err, std::string* why) {
  // A failed syscall: its errno, and what failed.
  auto failed = [&](const char* what) {
    *err = errno;
    *why = std::string(what) + ": " + strerror(*err);
    return std::unique_ptr<Uring>();
  };
  io_uring_params p{};
  const int fd = SysSetup(entries, &p);
  if (fd < 0) return failed("io_uring_setup");
  std::unique_ptr<Uring> u(new Uring());
  u->fd_ = fd;
  if (need_ops && need_ops[0]) {
    // IORING_REGISTER_PROBE (5.6+) lists the opcodes this kernel implements.
    const unsigned n = 256;
    std::vector<uint8_t> mem(sizeof(io_uring_probe) + n * sizeof(io_uring_probe_op), 0);
    auto* probe = reinterpret_cast<io_uring_probe*>(mem.data());
    if (SysRegister(fd, IORING_REGISTER_PROBE, probe, n) < 0) return failed("IORING_REGISTER_PROBE");
    for (const uint8_t* op = need_ops; *op; op++) {
      if (*op > probe->last_op || !(probe->ops[*op].flags & IO_URING_OP_SUPPORTED)) {
        *err = EOPNOTSUPP;
        *why = "io_uring lacks opcode " + std::to_string(*op);
        return nullptr;
      }
    }
  }
  u->sq_ring_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  u->cq_ring_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  const bool single = p.features & IORING_FEAT_SINGLE_MMAP;
  if (single && u->cq_ring_len_ > u->sq_ring_len_) u->sq_ring_len_ = u->cq_ring_len_;
  void* sq = mmap(nullptr, u->sq_ring_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
  if (sq == MAP_FAILED) return failed("mmap(io_uring SQ)");
  u->sq_ring_ = sq;
  if (single) {
    u->cq_ring_ = sq;
  } else {
    void* cq = mmap(nullptr, u->cq_ring_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    if (cq == MAP_FAILED) return failed("mmap(io_uring CQ)");
    u->cq_ring_ = cq;
  }
  u->sqes_len_ = p.sq_entries * sizeof(io_uring_sqe);
  void* sqes = mmap(nullptr, u->sqes_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
  if (sqes == MAP_FAILED) return failed("mmap(io_uring SQEs)");
  u->sqes_ = static_cast<io_uring_sqe*>(sqes);
  auto* sqb = static_cast<uint8_t*>(u->sq_ring_);
  auto* cqb = static_cast<uint8_t*>(u->cq_ring_);
  u->sq_head_ = reinterpret_cast<unsigned*>(sqb + p.sq_off.head);
  u->sq_tail_ = reinterpret_cast<unsigned*>(sqb + p.sq_off.tail);
  u->sq_mask_ = *reinterpret_cast<unsigned*>(sqb + p.sq_off.ring_mask);
  u->sq_entries_ = p.sq_entries;
  // Slot i of the SQ array always names SQE i: SQEs are used in ring order.
  auto* array = reinterpret_cast<unsigned*>(sqb + p.sq_off.array);
  for (unsigned i = 0; i < p.sq_entries; i++) array[i] = i;
  u->cq_head_ = reinterpret_cast<unsigned*>(cqb + p.cq_off.head);
  u->cq_tail_ = reinterpret_cast<unsigned*>(cqb + p.cq_off.tail);
  u->cq_mask_ = *reinterpret_cast<unsigned*>(cqb + p.cq_off.ring_mask);
  u->cqes_ = reinterpret_cast<io_uring_cqe*>(cqb + p.cq_off.cqes);
  u->local_tail_ = *u->sq_tail_;
  return u;
}

Uring::~Uring() {
  if (sqes_) munmap(sqes_, sqes_len_);
  if (cq_ring_ && cq_ring_ != sq_ring_) munmap(cq_ring_, cq_ring_len_);
  if (sq_ring_) munmap(sq_ring_, sq_ring_len_);
  if (fd_ >= 0) close(fd_);
}

io_uring_sqe* Uring::Next() {
  if (queued_ >= sq_entries_) return nullptr;
  io_uring_sqe* e = &sqes_[local_tail_ & sq_mask_];
  std::memset(e, 0, sizeof *e);
  local_tail_++;
  queued_++;
  return e;
}

int Uring::SubmitAndWait(unsigned wait) {
  __atomic_store_n(sq_tail_, local_tail_, __ATOMIC_RELEASE);
  queued_ = 0;
  for (;;) {
    // The kernel's SQ head says how many SQEs it has taken, even after an interrupted call.
    const unsigned pending = local_tail_ - __atomic_load_n(sq_head_, __ATOMIC_ACQUIRE);
    const unsigned ready = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE) - *cq_head_;
    if (pending == 0 && ready >= wait) return 0;
    const int n = SysEnter(fd_, pending, wait, IORING_ENTER_GETEVENTS);
    enter_calls_++;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

}  // namespace nl
