// The device-agnostic caching allocator.
//
// It sits on any UpstreamResource (CUDA device memory, pinned host memory,
// host memory, a simulated GPU) and keeps freed blocks for reuse:
//   - requests are rounded to 512 bytes; <= 1 MiB go to the small pool
//     (2 MiB segments), larger ones to the large pool (20 MiB segments for
//     requests under 10 MiB, else the request rounded up to 2 MiB);
//   - best fit over free blocks of the same stream, splitting blocks and
//     coalescing free neighbours;
//   - a block used on other streams (record_stream) is reused only after
//     events recorded on those streams complete;
//   - a per-thread cache makes a cache hit a pop from a thread-local list
//     (no shared lock, no atomic read-modify-write); a small request whose
//     exact size is not cached may take a cached block up to 1/4 larger
//     (Note [Near fits]); misses take the slow path under the mutex of the
//     thread's arena (threads are dealt over up to 8 independent pools:
//     Note [Arenas]), which returns cached large blocks to the pool before
//     its searches (all but a few: Note [Parked large blocks]) and every
//     cached block before growing;
//   - when the upstream refuses, cached memory is released and the request
//     retried; then OutOfMemoryError explains the situation;
//   - optionally (AllocatorOptions::expandable_segments), segments are
//     address ranges whose pages are mapped on demand and unmapped when free
//     (Note [Expandable segments] in expandable_segments.cpp).
//
// The parts, each in its own file: the arenas threads are dealt to
// (detail/arena_set.h), each an Arena (detail/arena.h) with its pool and hot
// path, its statistics (detail/allocator_statistics.h) and its event history
// (detail/event_recorder.h); the options in allocator_options.h.
//
// Thread safety: every public member may be called from any thread.
// Stream semantics: a block allocated on stream S may be used by work queued
// on S without synchronisation; after deallocate() it is handed out again on S
// at once (S orders the work), on other streams only via record_stream().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/detail/arena.h"
#include "genesis/memory/detail/arena_set.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/events.h"
#include "genesis/memory/stats.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {

class CachingAllocator {
 public:
  using Block = detail::Block;
  /// Most arenas one allocator spreads threads over (Note [Arenas]).
  static constexpr std::uint32_t kMaxArenas = detail::ArenaSet::kMaxArenas;

  /// Throws InvalidArgumentError for a null upstream or bad options.
  explicit CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options = {});
  /// Returns every segment to the upstream. Blocks still allocated are leaked
  /// to the upstream's lifetime (their memory is released with the segment).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // --- allocation ----------------------------------------------------------
  // The four entry points below are always inlined into their callers: when
  // gcc stopped inlining deallocate() after a change to its body, the call
  // and its register saves cost ~15 instructions of a ~250-instruction round
  // trip (bench/alloc_icount.sh).

  /// Allocates `bytes` for use on `stream`. Returns nullptr for 0 bytes
  /// (documented behaviour, like PyTorch). Throws OutOfMemoryError when the
  /// memory cannot be had even after releasing the cache, and
  /// InvalidArgumentError for sizes above 2^62.
  [[gnu::always_inline]] void* allocate(std::size_t bytes, StreamId stream = 0) {
    Block* b = allocate_block(bytes, stream);
    return b != nullptr ? b->ptr() : nullptr;
  }

  /// Frees a pointer returned by allocate(). nullptr is ignored. Throws
  /// InvalidArgumentError for a pointer this allocator did not hand out (or
  /// not the start of an allocation) and for a double free; the allocator is
  /// unchanged in both cases.
  [[gnu::always_inline]] void deallocate(void* ptr);

  /// Like allocate() but returns the block record: free_block() then needs
  /// no address lookup (the handle API used by storages).
  [[gnu::always_inline]] Block* allocate_block(std::size_t bytes, StreamId stream = 0);
  /// Frees a block from allocate_block(). Same errors as deallocate().
  [[gnu::always_inline]] void free_block(Block* block);

  /// Marks `ptr` as used by work on `stream` (record_stream semantics): when
  /// freed, the block is reused only after that work completes.
  void record_stream(void* ptr, StreamId stream);

  /// Allocates exactly [ptr, ptr + size) of a segment this allocator holds,
  /// where that range is free (in classic segments; `size` a multiple of
  /// 512, as block sizes are): what restores a CUDA graph pool to a
  /// checkpoint needs, since a graph's replays write at the addresses of its
  /// capture. `requested` is the byte count the statistics record. Throws
  /// InvalidArgumentError when no segment holds `ptr` or the range is not
  /// free. Freed with deallocate() as usual.
  void* allocate_at(void* ptr, std::size_t size, std::size_t requested);

  /// True when `ptr` is the start of a live allocation of this allocator.
  bool owns(const void* ptr) const noexcept;
  /// Rounded size of the live allocation at `ptr`; throws if not owned.
  std::size_t allocation_size(const void* ptr) const;
  /// The live allocation at `ptr` (size, requested size, stream, location);
  /// std::nullopt when `ptr` is not the start of one. What storage-level
  /// tracking reads instead of keeping books of its own.
  std::optional<AllocationInfo> allocation_info(const void* ptr) const;

  // --- statistics ----------------------------------------------------------
  MemoryStats stats() const;
  /// Peaks become the current values.
  void reset_peak_stats();
  /// Counters, totals and peaks start again from the current state.
  void reset_memory_stats();
  /// Counters and totals (the "allocated" and "freed" of every statistic,
  /// hits, misses, OOMs, driver calls) start again; peaks are kept, as
  /// torch.cuda.reset_accumulated_memory_stats() keeps them.
  void reset_accumulated_stats();
  /// A readable table of the statistics (PyTorch's memory_summary layout).
  std::string memory_summary() const;
  /// Every segment and its blocks.
  std::vector<SegmentInfo> snapshot() const;
  /// Live allocations of at least `min_size` bytes, largest first.
  std::vector<AllocationInfo> large_allocations(std::size_t min_size) const;

  // --- controls ------------------------------------------------------------
  /// Returns every cached block that fills a whole segment to the upstream,
  /// after waiting for pending stream work. Allocated memory is untouched.
  void empty_cache();
  /// Cap reserved memory at `fraction` (0, 1] of the upstream's total.
  void set_memory_fraction(double fraction);
  /// Cap cached memory (reserved - allocated); SIZE_MAX removes the cap.
  void set_cache_size(std::size_t bytes);
  /// The same with a size written by a person: "2GB", "512MiB" (parse_bytes),
  /// or "none" for no cap, as GENESIS_ALLOC_CONF's cache_size takes.
  void set_cache_size(std::string_view size);
  /// Reserves memory for the given (size, count) pairs ahead of time: the
  /// blocks are allocated and freed so that later requests hit the cache.
  void warmup(const std::vector<std::pair<std::size_t, int>>& sizes, StreamId stream = 0);
  /// Releases cached segments not used for `max_idle`; returns bytes released.
  std::size_t collect_garbage(std::chrono::nanoseconds max_idle = std::chrono::seconds(0));
  /// Releases physical memory that backs no allocation: free pages inside
  /// expandable segments and wholly free classic segments. Unlike
  /// empty_cache() it keeps the address ranges, so later growth is cheap.
  /// Returns the bytes released.
  std::size_t compact();
  /// True when this allocator uses expandable segments.
  bool expandable_segments() const noexcept { return arena0_.expandable_.on(); }
  /// Arenas threads are spread over, and how many exist so far (Note [Arenas]).
  std::uint32_t arena_limit() const noexcept { return arenas_.limit(); }
  std::uint32_t arenas_in_use() const noexcept;
  /// Current limits.
  std::size_t memory_limit() const;

  // --- event history (Note [Event history], Note [Exact sessions]) --------
  void set_event_recording(bool on);
  bool event_recording() const noexcept { return arena0_.events_.on(); }
  /// The recorded events of all threads still in the rings, ordered by time.
  std::vector<MemoryEvent> events() const;
  /// Forgets the events (totals and levels stay: sessions keep their counts).
  void clear_events();
  /// Sums over every event recorded so far, overwritten or not.
  EventTotals event_totals() const;
  /// A session's start, held until release_mark(); exact while recording stays on.
  RecordingMark mark_recording();
  RecordingSummary recording_since(const RecordingMark& mark) const;
  void release_mark(const RecordingMark& mark);

  // --- debugging -----------------------------------------------------------
  /// Checks the allocator's internal invariants (Note [Allocator invariants]
  /// in allocator_invariants.cpp) and throws genesis::Error naming the first
  /// one broken. For tests and debugging, off the hot path: it takes every
  /// arena's mutex and walks every segment. include_thread_caches: also walk
  /// every thread cache and check that every byte is accounted for; only
  /// while no other thread allocates or frees (their caches are read without
  /// their owners). Without it, callable while other threads run.
  void check_invariants(bool include_thread_caches = true) const;

  UpstreamResource& upstream() const noexcept { return *arena0_.upstream_; }
  const AllocatorOptions& options() const noexcept { return arena0_.options_; }

 private:
  friend struct AllocatorFork;    // Note [Allocators across fork] (detail/allocator_fork.h)
  friend struct ThreadExitHook;   // hands a dying thread's cache back (allocator_registry.cpp)
  void retire_thread_cache(detail::ThreadCache* tc);  // thread exit: to its arena

  // The set deals threads to arenas and owns arenas 1..N-1 (Note [Arenas]);
  // arena 0 is this object's own, first (Note [Arena layout] in
  // detail/arena.h), and joins the set once both are made.
  detail::Arena arena0_;
  detail::ArenaSet arenas_;
};

/// Sets the "location" recorded for allocations made by this thread while the
/// object lives (for large_allocations() and leak reports). `location` must
/// outlive the scope (string literals, or intern_location()).
class ScopedAllocationContext {
 public:
  explicit ScopedAllocationContext(const char* location) noexcept
      : previous_(detail::tls_allocation_context) {
    detail::tls_allocation_context = location;
    if (location != nullptr && !detail::allocation_contexts_used.load(std::memory_order_relaxed))
      detail::allocation_contexts_used.store(true, std::memory_order_relaxed);
  }
  ~ScopedAllocationContext() { detail::tls_allocation_context = previous_; }
  ScopedAllocationContext(const ScopedAllocationContext&) = delete;
  ScopedAllocationContext& operator=(const ScopedAllocationContext&) = delete;

 private:
  const char* previous_;
};

/// Returns a pointer to a process-lifetime copy of `text` (same text, same
/// pointer), for use with ScopedAllocationContext.
const char* intern_location(const std::string& text);

// ---------------------------------------------------------------------------
// Hot path. Kept inline and tiny: a thread-local lookup, a pop or a push, and
// a few owned counters (detail/arena.h). Everything else is out of line.

// The hot path runs on the thread's own arena, tc->owner (Note [Arenas]).
// Note [Arena dispatch]: for the threads of arena 0 that is arena0_, a member
// of this object, and the hot path is inlined once for arena0_ and once for
// another arena: on the branch for arena0_ (a flag, tc->at_root), the arena's
// fields (the pointer map, the options) are addressed from `this` instead of
// after the load of tc->owner, which the branch predictor resolves ahead.
// With `tc->owner == &arena0_` as the test, gcc used the loaded owner on both
// branches. On the GPU machines'
// CPUs each dependent L1 load costs ~3 ns (bench/RESULTS.md, machine_probe),
// and deallocate's chain was tc -> owner -> map table -> slot -> block.
inline CachingAllocator::Block* CachingAllocator::allocate_block(std::size_t bytes, StreamId stream) {
  detail::ThreadCache* tc = arena0_.thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return arena0_.allocate_in(tc, bytes, stream);
    return tc->owner->allocate_in(tc, bytes, stream);
  }
  return arena0_.allocate_slow(bytes, stream);
}

inline void CachingAllocator::free_block(Block* b) {
  if (b == nullptr) return;
  detail::ThreadCache* tc = arena0_.thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return arena0_.free_block_in(tc, b);  // Note [Arena dispatch]
    return tc->owner->free_block_in(tc, b);
  }
  arena0_.free_slow(b, false, b->ptr());
}

inline void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  detail::ThreadCache* tc = arena0_.thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return arena0_.deallocate_in(tc, ptr);  // Note [Arena dispatch]
    return tc->owner->deallocate_in(tc, ptr);
  }
  arena0_.free_slow(nullptr, true, ptr);
}

}  // namespace genesis::memory
