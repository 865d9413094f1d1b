// A minimal io_uring: raw syscalls (no liburing), the three rings mmap'd, SQEs queued by the
// caller and submitted together by one io_uring_enter that also waits for their completions.
// Enough for MultiDump; nothing netlink-specific.
#pragma once

#include <linux/io_uring.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace nl {

class Uring {
 public:
  // Sets up a ring of at least `entries` submission slots. Returns nullptr with *err (errno) and
  // *why set when the kernel offers no usable io_uring: ENOSYS (built without it), EPERM
  // (kernel.io_uring_disabled, seccomp), EINVAL (too old), or an opcode in `need` that the
  // kernel's IORING_REGISTER_PROBE does not list (pass 0-terminated).
  static std::unique_ptr<Uring> Open(unsigned entries, const uint8_t* need_ops, int* err, std::string* why);
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  // A zeroed SQE to fill, or nullptr when every slot already holds a queued one.
  io_uring_sqe* Next();
  unsigned queued() const { return queued_; }
  unsigned capacity() const { return sq_entries_; }

  // Submits every queued SQE and waits until `wait` completions are posted (the caller reaps
  // every completion before queueing again): one io_uring_enter, more only if the kernel takes
  // fewer SQEs than offered or a signal interrupts the wait.
  // Returns 0, or -errno when the kernel refused the submission.
  int SubmitAndWait(unsigned wait);
  uint64_t enter_calls() const { return enter_calls_; }

  // Calls f(user_data, res, flags) for every posted completion and consumes them.
  template <typename F>
  size_t Reap(F&& f) {
    unsigned head = *cq_head_;
    const unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
    size_t n = 0;
    for (; head != tail; head++, n++) {
      const io_uring_cqe& c = cqes_[head & cq_mask_];
      f(c.user_data, c.res, c.flags);
    }
    __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
    return n;
  }

 private:
  Uring() = default;

  int fd_ = -1;
  void* sq_ring_ = nullptr;
  size_t sq_ring_len_ = 0;
  void* cq_ring_ = nullptr;  // == sq_ring_ with IORING_FEAT_SINGLE_MMAP
  size_t cq_ring_len_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  size_t sqes_len_ = 0;
  unsigned* sq_head_ = nullptr;
  unsigned* sq_tail_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned sq_entries_ = 0;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  unsigned local_tail_ = 0;  // SQ tail including SQEs not yet published
  unsigned queued_ = 0;
  uint64_t enter_calls_ = 0;
};

}  // namespace nl
