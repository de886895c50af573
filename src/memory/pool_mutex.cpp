// The contended half of PoolMutex (Note [Pool mutex] in pool_mutex.h).
#include "genesis/memory/detail/pool_mutex.h"

#include <thread>

namespace genesis::memory::detail {

namespace {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}
}  // namespace

void PoolMutex::lock_contended() noexcept {
  tls_lock_waited = true;
  // A short spin first: the holder is usually a few hundred nanoseconds from
  // unlocking, far less than a sleep and a wake-up cost.
  for (int i = 0; i < 64; ++i) {
    cpu_relax();
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == kUnlocked && state_.compare_exchange_weak(s, kLocked, std::memory_order_acquire, std::memory_order_relaxed))
      return;
  }
  // Then sleep. Taking the lock as kContended (not kLocked) is what keeps a
  // wake-up from being lost: we cannot know whether others still sleep, so
  // our unlock must wake one.
  while (state_.exchange(kContended, std::memory_order_acquire) != kUnlocked)
    state_.wait(kContended, std::memory_order_relaxed);
}

void PoolMutex::revoke() noexcept {
  revoked_.store(kRevoked, std::memory_order_relaxed);
  heavy_fence();
  // The owner is at most one short critical section away from leaving.
  while (in_section_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  holder_revoked_ = true;
  ++revocations_;
}

bool PoolMutex::try_revoke() noexcept {
  revoked_.store(kRevoked, std::memory_order_relaxed);
  heavy_fence();
  if (in_section_.load(std::memory_order_acquire) != 0) {
    // kOpen even if the bias should end: the owner is inside, so the next
    // holder must wait for it (it stores kOff then).
    revoked_.store(kOpen, std::memory_order_release);
    return false;
  }
  holder_revoked_ = true;
  ++revocations_;
  return true;
}

void PoolMutex::end_revocation() noexcept {
  holder_revoked_ = false;
  // kOff replaces kRevoked, which keeps the owner out already: no owner entry
  // can slip in between.
  const bool off = off_requested_.load(std::memory_order_relaxed) ||
                   (revocations_ >= 64 && revocations_ * 256 > owner_entries_.load(std::memory_order_relaxed));
  revoked_.store(off ? kOff : kOpen, std::memory_order_release);
}

void PoolMutex::end_bias() noexcept {
  off_requested_.store(true, std::memory_order_relaxed);
  // A holder that revoked stores kOff when it leaves (end_revocation).
  if (holder_revoked_) return;
  // The owner inside on its fast path must not store kOff itself: the next
  // holder would then skip waiting for it to leave. That holder revokes as
  // usual and, seeing off_requested_, stores kOff as it leaves.
  if (owner_.load(std::memory_order_relaxed) == &tls_lock_token && fast_held_) return;
  // Holding the futex lock with no owner inside (never biased, or the owner
  // itself on its revoked path): no fast entry can be under way.
  revoked_.store(kOff, std::memory_order_relaxed);
}

}  // namespace genesis::memory::detail
