// Giving the cache of an idle allocator back (Note [Releasing when idle] in
// src/memory/idle_release.cpp; AllocatorOptions::idle_release_ms).
#pragma once

#include <chrono>

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis::memory::detail {

/// Watches `a`: once it has made no allocation or free for `idle`, its cached memory
/// is released (collect_garbage). Thread-safe.
void watch_idle(CachingAllocator* a, std::chrono::milliseconds idle);
/// Stops watching `a` (its destructor), after a release of it in progress.
/// A no-op for an allocator not watched. Thread-safe.
void unwatch_idle(CachingAllocator* a) noexcept;

}  // namespace genesis::memory::detail
