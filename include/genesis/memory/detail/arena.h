// One arena of the caching allocator (Note [Arenas] in arena_set.h): a pool
// with its own mutex, free index, pointer map, segments, thread caches,
// statistics and event history, and the hot path that runs on it. The
// allocator users hold (CachingAllocator) owns arena 0 and the set of the
// others; nothing here is public API.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/detail/allocator_statistics.h"
#include "genesis/memory/detail/asymmetric_fence.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/detail/event_recorder.h"
#include "genesis/memory/detail/expandable_segments.h"
#include "genesis/memory/detail/free_index.h"
#include "genesis/memory/detail/pointer_map.h"
#include "genesis/memory/detail/pool.h"
#include "genesis/memory/detail/pool_mutex.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/events.h"
#include "genesis/memory/stats.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {
class CachingAllocator;
struct AllocatorFork;
}  // namespace genesis::memory

namespace genesis::memory::detail {

class ArenaSet;

class Arena {
 public:
  /// Checks the options (InvalidArgumentError for bad ones or a null
  /// upstream). `index`: this arena's number in its family; join() it
  /// before use.
  Arena(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options, std::uint8_t index);
  /// Makes this arena one of `set` (shared reserved bytes, recording levels,
  /// the allocator's thread-local slot). Apart from the constructor so that
  /// arena 0 can come first in the allocator (Note [Arena layout]).
  void join(ArenaSet& set);
  /// Returns every segment to the upstream. Blocks still allocated are leaked
  /// to the upstream's lifetime (their memory is released with the segment).
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  using Lock = std::unique_lock<PoolMutex>;  // Note [Pool mutex]

 private:
  // The allocator runs the hot path and the public members on its arenas;
  // the set deals threads and walks them; fork handling locks them (Note
  // [Allocators across fork] in detail/allocator_fork.h).
  friend class genesis::memory::CachingAllocator;
  friend class ArenaSet;
  friend struct genesis::memory::AllocatorFork;
  friend class ExpandableSegments;  // keeps its books here (reserved bytes, events, caps, out of memory)

  // The free slow path inside one arena. Returns false when the block is not
  // this arena's (report: throw the bad-free error instead).
  bool free_in_arena(ThreadCache* tc, Block* b, bool lookup_failed, void* ptr, bool report);
  [[gnu::noinline]] void free_elsewhere(Block* b, void* ptr);
  [[noreturn]] void report_bad_free(std::uintptr_t addr) const;
  // Out of memory in this arena: give back what the other arenas cache (best
  // effort: an arena whose lock is taken is skipped, so that two arenas out
  // of memory at once cannot deadlock). Returns true if anything was freed.
  bool release_other_arenas();
  // CachingAllocator::allocate_at inside this arena: null when no segment of
  // it holds `addr`; throws when the range is not wholly free there.
  Block* allocate_at_arena(std::uintptr_t addr, std::size_t size, std::size_t requested);
  void add_reserved(PoolId pool, std::int64_t delta) noexcept {
    stats_.counters.reserved[pool] += delta;
    if (arena_limit_ > 1) {
      family_reserved_->fetch_add(delta, std::memory_order_relaxed);
    } else {  // one arena: only this mutex's holder writes it
      family_reserved_->store(family_reserved_->load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }
  }
  // Per-arena bodies of the public members of the same name (snapshot_arena:
  // mutex_ held; the others take it).
  void reset_peak_stats_arena();
  void reset_memory_stats_arena(bool peaks = true);
  std::vector<SegmentInfo> snapshot_arena() const;
  std::vector<AllocationInfo> large_allocations_arena(std::size_t min_size) const;
  void check_arena_invariants(bool include_thread_caches) const;  // mutex_ held
  void empty_cache_arena();
  std::size_t collect_garbage_arena(std::chrono::nanoseconds max_idle);
  std::size_t compact_arena();
  void set_memory_fraction_arena(double fraction);
  void set_cache_size_arena(std::size_t bytes);
  void set_event_recording_arena(bool on);
  void events_arena(std::vector<MemoryEvent>& out) const;
  void clear_events_arena();
  void event_totals_arena(EventTotals& out, std::uint64_t& lost_until_ns) const;
  // Hot path helpers.
  ThreadCache* thread_cache() noexcept {
    const TlsSlot& s = tls_slots[slot_];
    if (GENESIS_LIKELY(s.generation == generation_)) return s.cache;
    return thread_cache_slow();
  }
  // Hands out b from tc's cache for a request of `bytes`: the block's fields
  // and the statistics' one call. Always inlined: out of line, saving and
  // restoring registers around it cost ~13 instructions of a
  // ~300-instruction hot pair (callgrind).
  [[gnu::always_inline]] void note_alloc_hot(ThreadCache* tc, Block* b, std::size_t bytes) noexcept;
  // The hot path proper, on the calling thread's arena (this == tc->owner).
  [[gnu::always_inline]] Block* allocate_in(ThreadCache* tc, std::size_t bytes, StreamId stream);
  [[gnu::always_inline]] void deallocate_in(ThreadCache* tc, void* ptr);
  [[gnu::always_inline]] void free_block_in(ThreadCache* tc, Block* b);
  [[gnu::always_inline]] Block* hot_free_path(ThreadCache* tc, Block* b) noexcept;
  // Event records (EventRecorder), out of line. Members of the arena rather
  // than calls on events_ directly: with the recorder's address as the
  // argument, gcc computed it ahead of the test of on() (on the hot path, one
  // instruction on every allocation and free with recording off; in the slow
  // path, at its entry, kept on the stack).
  [[gnu::noinline]] void record_hot_alloc(ThreadCache* tc, Block* b, std::size_t bytes) noexcept;
  [[gnu::noinline]] void record_hot_free(ThreadCache* tc, Block* b) noexcept;
  [[gnu::noinline]] void record_event(ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
                                      std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit);
  [[gnu::noinline]] void record_free_event(ThreadCache* tc, const Block* b);  // its lifetime included

  // Slow paths (arena.cpp).
  ThreadCache* thread_cache_slow() noexcept;
  // A new cache for the calling thread in `arena`, put in its thread-local
  // slot; null if it cannot be made (the thread then uses the slow path).
  ThreadCache* attach_thread(Arena* arena) noexcept;
  // Note [Threads that contend move out]: counts a slow-path lock of the
  // calling thread (mutex_ held) and marks it to move when its window says so.
  void note_slow_lock(ThreadCache* tc) noexcept;
  // Moves the calling thread (tc, of this arena, the root) to an arena of its
  // own; returns its new cache, or null when it stays (tc stays valid then).
  ThreadCache* move_thread(ThreadCache* tc);
  // An arena other than 0 with no threads left gives its cached memory back
  // (mutex_ held; Note [Threads that contend move out]).
  void release_if_deserted_locked();
  Block* allocate_slow(std::size_t bytes, StreamId stream);
  // allocate_slow past its argument checks and thread-cache lookup: the hot
  // path's misses (a third of `mixed`'s allocations) come with both done.
  Block* allocate_miss(ThreadCache* tc, std::size_t bytes, std::size_t rounded, StreamId stream);
  void free_slow(Block* b, bool lookup_failed, void* ptr);
  // A new classic segment for `rounded` bytes (upstream, caps, out-of-memory
  // recovery), and the block taken from it.
  Block* grow(PoolId pool, std::size_t rounded, StreamId stream, std::size_t bytes);
  // Classic segments at the mark: gives wholly free segments back before a
  // new one of seg_size would pass the mark (Note [Classic segments at the
  // mark]). Returns a free block that fits instead, found once the thread
  // caches came back, or null.
  Block* release_segments_at_mark(PoolId pool, std::size_t rounded, StreamId stream, std::size_t seg_size);
  // Note [Borrowing across streams]: a free block of another stream taken
  // for `stream` instead of growing or mapping, or null. may_wait: `stream`
  // may wait on the device for the owner's queued work; else only an idle
  // owner's block is lent.
  Block* borrow(PoolId pool, std::size_t rounded, StreamId stream, bool may_wait);
  void process_events();
  void wait_all_pending();
  void release_free_segments(std::uint64_t idle_before_ns, std::size_t* released, bool keep_expandable = false);
  void release_segment(Segment* seg);
  // Mutex held, handshake done (or the owner calling). only_pool < 0 and
  // only_stream null: everything.
  void flush_thread_cache(ThreadCache* tc, int only_pool = -1, const StreamId* only_stream = nullptr);
  // Note [Flush until fit]: returns the stream's cached small blocks until
  // one merges into a free block of >= rounded bytes (returned), or all are
  // back (null). Mutex held, owner calling.
  Block* flush_small_until_fit(ThreadCache* tc, StreamId stream, std::size_t rounded);
  void reclaim_thread_caches(bool include_self);      // mutex held
  void synchronize_readers();                         // mutex held
  void enforce_cache_limit();
  std::int64_t thread_cached_total_locked() const;
  [[noreturn]] void throw_oom(std::size_t bytes, StreamId stream, const std::string& why);
  void retire_thread_cache(ThreadCache* tc);  // thread exit
  MemoryStats stats_locked() const;
  std::size_t segment_size_for(PoolId pool, std::size_t rounded) const noexcept;
  std::size_t thread_cache_limit() const noexcept { return tc_byte_limit_.load(std::memory_order_relaxed); }

  // Note [Arena layout]: the statistics come first, at the arena's own
  // address, and arena 0 first in the allocator: the hot path's statistics
  // (AllocatorStatistics::note_hot_alloc) then address their fields from the
  // register that holds the allocator. At another offset gcc kept the
  // statistics' address in a register of its own, one instruction more on
  // every hot allocation (alloc_icount). Cache-line aligned, and written by
  // the slow path only: away from the read-only line below that every
  // arena's threads read on every call (with them on one line, 8 threads of
  // `mixed` ran about a third slower per pair together than with an
  // allocator each).
  AllocatorStatistics stats_;  // Note [Statistics]; guarded by mutex_ but for the hot path's part

  std::shared_ptr<UpstreamResource> upstream_;
  AllocatorOptions options_;
  // Arenas (Note [Arenas]): the family this arena belongs to, and its number.
  ArenaSet* set_ = nullptr;
  const std::uint8_t arena_index_;
  std::uint32_t arena_limit_ = 1;  // set_->limit(), copied: read on every free
  std::uint32_t move_window_ = 0;  // arena 0 of a set whose threads may move out: options' arena_move_window; else 0
  // From here on read on every call, and written only at construction: a
  // line of their own. family_reserved_: the set's reserved bytes of all
  // arenas together, which the memory fraction caps.
  alignas(64) std::atomic<std::int64_t>* family_reserved_ = nullptr;
  const bool asymmetric_;            // membarrier handshake available
  // Near fits (Note [Near fits]): a small request of bin i may take a cached
  // block of bins i .. i + i/N, i/N computed as (i * near_mul_) >> 32 with
  // near_mul_ = ceil(2^32 / N) (exact for every bin; no division on the hot
  // path). 0: exact sizes only (near fits off, or expandable segments).
  std::uint64_t near_mul_ = 0;
  std::uint32_t large_park_ = 0;     // thread_cache_large_park (Note [Parked large blocks])
  bool thread_cache_on_ = true;      // options' thread_cache resolved (Note [Thread caches over costly mappings])
  // The allocator's thread-local slot (tls_slots), the same in every arena:
  // threads find their caches there (Note [Arenas]).
  int slot_ = 0;                     // index into tls_slots
  std::uint64_t generation_ = 0;     // unique per allocator, never 0 when slotted
  std::atomic<std::size_t> tc_byte_limit_{0};
  // Note [Event history]. The hot path reads its first field (on()), on the
  // line of tc_byte_limit_; the rest is the slow path's.
  EventRecorder events_;
  mutable PoolMutex mutex_;
  // Everything below is guarded by mutex_.
  Pool pool_;  // segments, blocks, free index, pointer map (the map's find() is the hot path's)
  std::vector<ThreadCache*> caches_;
  struct PendingEvent {
    EventId event;
    Block* block;
  };
  std::vector<PendingEvent> pending_;
  ExpandableSegments expandable_;  // Note [Expandable segments]
  // Classic segments at the mark: the most reserved bytes after any growth,
  // and the most bytes out of the pool (thread caches excepted) at any
  // growth; a new segment may raise reserved memory up to the higher.
  std::int64_t classic_high_water_ = 0;
  std::int64_t classic_allocated_high_ = 0;
  std::size_t memory_limit_ = SIZE_MAX;
  std::size_t total_capacity_ = 0;
};

// ---------------------------------------------------------------------------
// Hot path. Kept inline and tiny: a thread-local lookup, a pop or a push, and
// a few owned counters. Everything else is out of line.

inline Block* Arena::allocate_in(ThreadCache* tc, std::size_t bytes, StreamId stream) {
  // One unsigned compare rejects both 0 and oversized requests.
  if (GENESIS_LIKELY(bytes - 1 < kMaxRequest)) {
    const std::size_t rounded = round_size(bytes);
    tc->active.store(1, std::memory_order_relaxed);
    light_fence(asymmetric_);
    StreamCache* sc = tc->hot_stream_cache();  // Note [Primary stream cache]
    if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0 && sc->stream == stream)) {
      Block* b;
      if (rounded <= kSmallLimit) {
        // The exact size or a near fit (Note [Near fits]) in one search.
        b = sc->pop_small(rounded >> kAlignShift, near_mul_, tc->num_allocs[kSmallPool]);
      } else {
        b = sc->pop_large(rounded);
      }
      if (GENESIS_LIKELY(b != nullptr)) {
        note_alloc_hot(tc, b, bytes);
        tc->active.store(0, std::memory_order_release);
        if (GENESIS_UNLIKELY(events_.on())) record_hot_alloc(tc, b, bytes);
        return b;
      }
    }
    tc->active.store(0, std::memory_order_release);
    return allocate_miss(tc, bytes, rounded, stream);
  }
  return allocate_slow(bytes, stream);
}

inline void Arena::note_alloc_hot(ThreadCache* tc, Block* b, std::size_t bytes) noexcept {
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  const int p = b->pool;
  b->set_requested(bytes);
  b->set_location(tls_allocation_context);
  b->set_state(BlockState::kAllocated);
  b->set_taker(tc);  // Note [Cross-thread frees]
  stats_.note_hot_alloc(tc, p, size, bytes);
}

inline void Arena::free_block_in(ThreadCache* tc, Block* b) {
  tc->active.store(1, std::memory_order_relaxed);
  light_fence(asymmetric_);
  // A block of another arena goes back to its own pool (slow path).
  if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0 && b->arena == arena_index_)) {
    if (GENESIS_LIKELY(hot_free_path(tc, b) == nullptr)) {
      tc->active.store(0, std::memory_order_release);
      return;
    }
  }
  tc->active.store(0, std::memory_order_release);
  free_slow(b, false, b->ptr());
}

inline void Arena::deallocate_in(ThreadCache* tc, void* ptr) {
  Block* b = nullptr;
  tc->active.store(1, std::memory_order_relaxed);
  light_fence(asymmetric_);
  if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0)) {
    // This arena's map only: a pointer of another arena is not in it and
    // goes to the slow path, which asks the others (Note [Arenas]).
    b = pool_.map().find(reinterpret_cast<std::uintptr_t>(ptr));
    if (GENESIS_LIKELY(b != nullptr && hot_free_path(tc, b) == nullptr)) {
      tc->active.store(0, std::memory_order_release);
      return;
    }
  }
  tc->active.store(0, std::memory_order_release);
  // The block found here (if any) saves the slow path a second lookup; it
  // checks under the lock that the record still describes ptr.
  free_slow(b, b == nullptr, ptr);
}

// Returns nullptr when the block went into the thread cache, else the block
// (the caller takes the slow path, which also reports misuse).
//
// Note [Cross-thread frees]: a thread cache takes back only the blocks it
// handed out. A block freed by another thread goes to the pool (the slow
// path), where every thread can reuse it and where its bytes leave the
// statistics at once. The common case is a training loop: the forward pass
// allocates activations on the program's thread and the backward pass, run
// by the autograd engine on a thread of its own, frees them. Parked in the
// freeing thread's cache, they were invisible to the thread that allocates
// next, which grew the pool instead (a persistent second thread freeing
// what the first allocated: 1.26x the live bytes reserved where one thread
// or no cache reserves 1.00x), and every thread's peak candidate counted the
// other's cached blocks as allocated. Taken by the same thread, a block
// round-trips through the cache as before: the taker is one store on the
// allocation (into a field that is unused while the block is allocated)
// and one compare on the free.
inline Block* Arena::hot_free_path(ThreadCache* tc, Block* b) noexcept {
  if (GENESIS_UNLIKELY(b->load_state() != BlockState::kAllocated || b->stream_uses != nullptr ||
                       !b->taken_by(tc)))
    return b;
  StreamCache* sc = tc->hot_stream_cache();  // Note [Primary stream cache]
  if (GENESIS_UNLIKELY(sc->stream != b->stream)) return b;
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  if (GENESIS_UNLIKELY(tc->cached_total() + size > static_cast<std::int64_t>(thread_cache_limit()))) return b;
  // At most thread_cache_large_park large blocks wait in a cache at any time
  // (Note [Parked large blocks]); the rest go to the pool, where they merge
  // with their neighbours and serve every thread.
  if (GENESIS_UNLIKELY(b->size > kSmallLimit && sc->large_blocks >= large_park_)) return b;
  BlockList* list = sc->list_for_push(b->size);
  if (GENESIS_UNLIKELY(list == nullptr ||
                       list->count >= (b->size <= kSmallLimit ? options_.thread_cache_small_count
                                                                      : options_.thread_cache_large_count)))
    return b;
  if (GENESIS_UNLIKELY(events_.on())) record_hot_free(tc, b);
  const int p = b->pool;
  b->set_state(BlockState::kThreadCached);
  b->cache_next = list->head;
  list->head = b;
  ++list->count;
  sc->large_blocks += b->size > kSmallLimit ? 1u : 0u;
  AllocatorStatistics::note_hot_free(tc, p, size, b);
  return nullptr;
}

}  // namespace genesis::memory::detail
