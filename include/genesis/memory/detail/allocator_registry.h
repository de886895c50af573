// Which allocators are alive, for thread caches.
//
// Each CachingAllocator takes one of kMaxAllocatorSlots slots and a unique
// generation. A thread finds its cache for an allocator in tls_slots[slot]
// and trusts it only while the generation matches, so a slot reused by a new
// allocator never sees a stale cache. When a thread exits, its caches go back
// to their allocators, under the registry lock so that an allocator being
// destroyed at the same moment waits for it.
#pragma once

#include <cstdint>
#include <mutex>

#include "genesis/memory/detail/thread_cache.h"

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis::memory::detail {

class AllocatorRegistry {
 public:
  /// Generation given to allocators that found no free slot: never matches a
  /// thread's slot, so such allocators run without thread caches.
  static constexpr std::uint64_t kNoSlot = ~std::uint64_t{0};

  static AllocatorRegistry& instance();

  /// Takes a slot; returns the generation (kNoSlot if none was free).
  std::uint64_t attach(CachingAllocator* allocator, int* slot);
  /// Gives the slot back. After it returns no thread-exit hook touches the
  /// allocator.
  void detach(int slot, std::uint64_t generation);
  /// Registers the calling thread's exit hook (idempotent, cheap).
  static void ensure_thread_exit_hook();
  /// Called by the exit hook: hands this thread's caches back.
  void release_thread(TlsSlot* slots);
  /// Note [Fork] (genesis/core/fork.h): held across fork() by the
  /// allocators' prepare handler, released after it in parent and child.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
  CachingAllocator* owners_[kMaxAllocatorSlots] = {};
  std::uint64_t generations_[kMaxAllocatorSlots] = {};
  std::uint64_t next_generation_ = 1;
};

}  // namespace genesis::memory::detail
