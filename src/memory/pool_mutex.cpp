// The contended half of PoolMutex (Note [Pool mutex] in pool_mutex.h).
#include "genesis/memory/detail/pool_mutex.h"

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

}  // namespace genesis::memory::detail
