// Fork handling of caching allocators (Note [Allocators across fork] in
// src/memory/allocator_fork.cpp). Used by the process-wide allocators' fork
// handlers (device_allocators.cpp).
#pragma once

#include <cstddef>

namespace genesis::memory {

class CachingAllocator;

struct AllocatorFork {
  /// Takes every lock of the root allocators `roots[0..n)` in lock order.
  static void prepare(CachingAllocator* const* roots, std::size_t n);
  /// Releases them in reverse order; in the child first lets go of the
  /// thread caches of the threads that are not there.
  static void finish(CachingAllocator* const* roots, std::size_t n, bool in_child);
};

}  // namespace genesis::memory
