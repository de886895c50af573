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
//
// Note [Biased pool lock]: on the GPU machines an uncontended compare-exchange
// plus exchange costs 10.5-11.9 ns (bench/RESULTS.md, machine_probe), and
// `mixed` takes the pool lock on a third of its pairs. Yet most arenas are
// used by one thread only (Note [Arenas] deals threads over them). So the lock
// can be biased towards that thread, its owner, the way the thread cache is
// (Note [Thread cache handshake]): the owner enters with plain stores and a
// compiler barrier, and any other thread pays instead, with a membarrier.
//   owner:  in_section = 1; light_fence(); if revoked == 0: inside (fast)
//           else: in_section = 0; take the futex lock like everyone else.
//           Leaves with in_section = 0 (release).
//   others: take the futex lock; if the lock is biased and revoked == 0:
//           revoked = 1; heavy_fence(); wait until in_section == 0.
//           Leave with revoked = 0 (or 2, below) and unlock the futex.
// Either the owner sees revoked != 0 or the other thread sees in_section == 1
// (the membarrier orders the owner's store before its load), so the two never
// run inside together. revoked == 2 turns the bias off for good: the owner
// then always takes the futex lock. It is asked for when the owner's thread
// exits and when a second thread joins the arena, and taken when other threads
// keep revoking (each revocation is a membarrier, microseconds): after 64
// revocations that outnumber 1/256 of the owner's fast entries. It is stored
// only by a futex holder while no owner can be inside: in place of its own
// 1, or with no fast entry possible (never biased; the owner on its revoked
// path). An owner inside on its fast path only asks; the next holder waits
// for it as usual and then stores 2.
// Without membarrier (GENESIS_NO_MEMBARRIER=1, old kernels) light_fence is a
// full fence and the bias saves little, but stays correct.
#pragma once

#include <atomic>
#include <cstdint>

#include "genesis/core/error.h"
#include "genesis/memory/detail/asymmetric_fence.h"

namespace genesis::memory::detail {

/// Its address identifies the calling thread to a biased PoolMutex.
inline thread_local char tls_lock_token = 0;
/// Set when the calling thread's lock() found the futex lock taken (it spun
/// or slept): how an arena tells that threads contend for it (Note [Threads
/// that contend move out]). Cleared by the reader, never by the mutex.
inline thread_local bool tls_lock_waited = false;

class PoolMutex {
 public:
  PoolMutex() noexcept : asymmetric_(asymmetric_fence_available()) {}
  PoolMutex(const PoolMutex&) = delete;
  PoolMutex& operator=(const PoolMutex&) = delete;

  void lock() noexcept {
    if (owner_.load(std::memory_order_relaxed) == &tls_lock_token) {
      if (GENESIS_LIKELY(enter_as_owner())) return;
      lock_futex();  // revoked: the owner queues like everyone else
      return;
    }
    lock_futex();
    if (GENESIS_UNLIKELY(owner_.load(std::memory_order_relaxed) != nullptr &&
                         revoked_.load(std::memory_order_relaxed) == kOpen))
      revoke();
  }

  /// Never waits, not even for a biased owner to leave: two arenas out of
  /// memory at once try each other's locks (Arena::release_other_arenas).
  bool try_lock() noexcept {
    const char* const owner = owner_.load(std::memory_order_relaxed);
    if (owner == &tls_lock_token && enter_as_owner()) return true;
    std::uint32_t expected = kUnlocked;
    if (!state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed))
      return false;
    // owner_ is set once, under the lock, so the value read above still holds
    // unless it was null (then no owner can be inside yet either).
    if (owner != &tls_lock_token && owner != nullptr && revoked_.load(std::memory_order_relaxed) == kOpen &&
        !try_revoke()) {
      unlock_futex();
      return false;
    }
    return true;
  }

  void unlock() noexcept {
    if (owner_.load(std::memory_order_relaxed) == &tls_lock_token && fast_held_) {
      fast_held_ = false;
      in_section_.store(0, std::memory_order_release);
      return;
    }
    if (GENESIS_UNLIKELY(holder_revoked_)) end_revocation();
    unlock_futex();
  }

  /// Biases the lock towards the calling thread, unless it was biased
  /// before. Call while holding the lock.
  void bias_to_caller() noexcept {
    if (owner_.load(std::memory_order_relaxed) == nullptr && revoked_.load(std::memory_order_relaxed) == kOpen)
      owner_.store(&tls_lock_token, std::memory_order_relaxed);
  }
  /// Turns the bias off for good. Call while holding the lock.
  void end_bias() noexcept;
  /// Whether the calling thread enters without an atomic read-modify-write.
  bool biased_to_caller() const noexcept {
    return owner_.load(std::memory_order_relaxed) == &tls_lock_token &&
           revoked_.load(std::memory_order_relaxed) == kOpen;
  }

 private:
  static constexpr std::uint32_t kUnlocked = 0, kLocked = 1, kContended = 2;
  static constexpr std::uint32_t kOpen = 0, kRevoked = 1, kOff = 2;

  // The owner's entry: true if it is inside, false if the bias is revoked.
  bool enter_as_owner() noexcept {
    in_section_.store(1, std::memory_order_relaxed);
    light_fence(asymmetric_);
    if (GENESIS_LIKELY(revoked_.load(std::memory_order_acquire) == kOpen)) {
      fast_held_ = true;
      owner_entries_.store(owner_entries_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return true;
    }
    in_section_.store(0, std::memory_order_release);
    return false;
  }
  void unlock_futex() noexcept {
    if (GENESIS_UNLIKELY(state_.exchange(kUnlocked, std::memory_order_release) == kContended)) state_.notify_one();
  }
  void lock_futex() noexcept {
    std::uint32_t expected = kUnlocked;
    if (GENESIS_LIKELY(state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                                      std::memory_order_relaxed)))
      return;
    lock_contended();
  }
  void lock_contended() noexcept;  // out of line: spin, then sleep
  void revoke() noexcept;          // futex held: keep the owner out
  bool try_revoke() noexcept;      // the same, but false (and undone) if the owner is inside
  void end_revocation() noexcept;  // futex held: let the owner in again (or not)

  // The futex lock (Note [Pool mutex]).
  std::atomic<std::uint32_t> state_{kUnlocked};
  // The bias (Note [Biased pool lock]).
  const bool asymmetric_;
  std::atomic<std::uint32_t> revoked_{kOpen};
  std::atomic<const char*> owner_{nullptr};  // set once, under the lock
  std::atomic<bool> off_requested_{false};   // end_bias() by a holder that revoked
  std::uint64_t revocations_ = 0;            // futex holders only
  bool holder_revoked_ = false;              // futex holder only
  // The owner's own: on a line of their own, written on every owner entry.
  alignas(64) std::atomic<std::uint32_t> in_section_{0};
  bool fast_held_ = false;
  std::atomic<std::uint64_t> owner_entries_{0};
};

}  // namespace genesis::memory::detail
