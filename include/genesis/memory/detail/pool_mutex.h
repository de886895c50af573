// The caching allocator's pool lock.
//
// Note [Pool mutex]: every slow-path call (a thread-cache miss, a free the
// cache does not take) locks the pool once. std::mutex is glibc's
// pthread_mutex_lock/unlock, which dispatch on the mutex kind, elision and
// robustness before the one atomic that matters: ~90 instructions per
// lock/unlock pair (callgrind, GPT-2 replay), 8% of all the allocator's
// instructions in a replay that takes the lock on most events. This lock is
// the classic three-state futex mutex (unlocked, locked, locked with
// sleepers): uncontended, lock is one compare-exchange and unlock one
// exchange, both inline. Contended, it spins briefly (the critical sections
// are short) and then sleeps in std::atomic::wait (a futex on Linux); an
// unlock that finds sleepers wakes one.
//   state_ == kUnlocked  <=>  nobody holds the lock;
//   state_ == kContended  =>  a thread may sleep in wait() (wake one on unlock).
// Not recursive, not fair (neither is std::mutex). Satisfies Lockable, so
// std::unique_lock and std::lock_guard work with it.
#pragma once

#include <atomic>
#include <cstdint>

#include "genesis/core/error.h"

namespace genesis::memory::detail {

class PoolMutex {
 public:
  PoolMutex() = default;
  PoolMutex(const PoolMutex&) = delete;
  PoolMutex& operator=(const PoolMutex&) = delete;

  void lock() noexcept {
    std::uint32_t expected = kUnlocked;
    if (GENESIS_LIKELY(state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                                      std::memory_order_relaxed)))
      return;
    lock_contended();
  }

  bool try_lock() noexcept {
    std::uint32_t expected = kUnlocked;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (GENESIS_UNLIKELY(state_.exchange(kUnlocked, std::memory_order_release) == kContended)) state_.notify_one();
  }

 private:
  static constexpr std::uint32_t kUnlocked = 0, kLocked = 1, kContended = 2;
  void lock_contended() noexcept;  // out of line: spin, then sleep

  std::atomic<std::uint32_t> state_{kUnlocked};
};

}  // namespace genesis::memory::detail
