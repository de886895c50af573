// Asymmetric memory barriers for the thread-cache handshake.
//
// Note [Thread cache handshake]: a thread cache is used by its owner thread
// without locks or atomic read-modify-writes. Another thread may take its
// blocks back (empty_cache, out of memory, growth) with this Dekker-style
// handshake:
//   owner:     active = 1; light_fence(); if (reclaim) bail to slow path;
//              ... use bins ...; active = 0 (release)
//   reclaimer: (holding the allocator mutex) reclaim = 1; heavy_fence();
//              wait until active == 0; take the bins; reclaim = 0 (release)
// The owner's store of `active` must be visible before it reads `reclaim`:
// that is a store-load ordering, which normally costs a full fence on every
// hot-path call. With membarrier(2) the reclaimer pays instead: the syscall
// forces a full barrier on every running thread of the process, so the owner
// needs only a compiler barrier. If membarrier is unavailable (old kernel,
// sandbox) we fall back to a real fence on the owner's side.
#pragma once

#include <atomic>

namespace genesis::memory::detail {

/// True once membarrier(PRIVATE_EXPEDITED) is registered for the process.
/// Decided once, before any thread cache exists, and never changes after.
bool asymmetric_fence_available() noexcept;

/// The cheap side: a compiler barrier when the heavy side uses membarrier,
/// otherwise a full fence.
inline void light_fence(bool asymmetric) noexcept {
  if (asymmetric) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

/// The expensive side: a barrier on every running thread of the process.
void heavy_fence() noexcept;

}  // namespace genesis::memory::detail
