// Blocks and segments: the bookkeeping records of the caching allocator.
//
// Note [Block states]: a block is in exactly one of these places:
//   kFree        in its pool's free index (coalesced with free neighbours);
//   kAllocated   handed to a user;
//   kThreadCached in one thread's cache (not coalesced; reclaimable);
//   kPending     freed by the user but still in use by work queued on other
//                streams; returns to the pool once every event completed.
// Only kFree blocks may be split or merged, so a block in any other state
// keeps its address and size, which is what lets the hot path hand it out and
// take it back without the allocator's mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/memory/upstream.h"

namespace genesis::memory::detail {

enum class BlockState : std::uint8_t { kFree = 0, kAllocated = 1, kThreadCached = 2, kPending = 3, kDead = 4 };

enum PoolId : std::uint8_t { kSmallPool = 0, kLargePool = 1, kNumPools = 2 };

struct Segment;

// Cache-line aligned: blocks of different threads sit side by side in the
// block arena, and the hot path writes a block it hands out (state,
// requested size): sharing a line between threads would serialise them.
struct alignas(64) Block {
  // First cache line: everything the hot path reads or writes.
  std::uintptr_t addr = 0;
  std::size_t size = 0;        // rounded size; invariant: multiple of 512
  StreamId stream = 0;         // stream the block was allocated on
  // Link in a thread-cache bin (kThreadCached) or the block arena's free
  // list (kDead); while kAllocated, the thread cache that took the block, or
  // null (Note [Cross-thread frees]).
  Block* cache_next = nullptr;
  std::vector<StreamId>* stream_uses = nullptr;  // other streams (record_stream); rare, so out of line
  // Written by the owning thread on the hot path and read by snapshots and
  // double-free checks from other threads: relaxed atomics (plain moves on x86).
  std::atomic<std::size_t> requested{0};        // bytes the user asked for (valid while allocated)
  std::atomic<const char*> location{nullptr};   // allocation context (ScopedAllocationContext)
  std::atomic<BlockState> state{BlockState::kFree};
  PoolId pool = kSmallPool;
  bool split_counted = false;  // counted in inactive_split statistics while kFree
  std::uint8_t arena = 0;      // index of the arena whose pool it belongs to (Note [Arenas]); fixed
  int pending_events = 0;      // events still outstanding while kPending
  // Second line: the pool's structure (slow path only).
  Segment* segment = nullptr;
  Block* prev = nullptr;       // address-ordered neighbours inside the segment
  Block* next = nullptr;
  Block* free_prev = nullptr;  // links in a FreeIndex size-class list (while kFree)
  Block* free_next = nullptr;
  void* free_owner = nullptr;  // the FreeIndex per-stream table holding it (while kFree)
  // Set when allocated while event recording is on (else stale: earlier, never
  // later; AllocationInfo::alloc_time_ns). Atomic: leak checks read it from
  // other threads while the owner allocates.
  std::atomic<std::uint64_t> alloc_time_ns{0};
  std::uint32_t free_class = 0;     // its FreeIndex size class (while kFree): erase needs no recomputation

  void* ptr() const noexcept { return reinterpret_cast<void*>(addr); }
  BlockState load_state() const noexcept { return state.load(std::memory_order_relaxed); }
  void set_state(BlockState s) noexcept { state.store(s, std::memory_order_relaxed); }
  std::size_t get_requested() const noexcept { return requested.load(std::memory_order_relaxed); }
  void set_requested(std::size_t n) noexcept { requested.store(n, std::memory_order_relaxed); }
  const char* get_location() const noexcept { return location.load(std::memory_order_relaxed); }
  void set_location(const char* l) noexcept { location.store(l, std::memory_order_relaxed); }
  // `|`, not `||`: no branch (index_insert asks on every block it files).
  /// The thread cache (detail::ThreadCache*) a block is handed to, kept while
  /// it is allocated: only that cache may take it back on a free.
  void set_taker(const void* tc) noexcept { cache_next = static_cast<Block*>(const_cast<void*>(tc)); }
  bool taken_by(const void* tc) const noexcept { return cache_next == tc; }
  bool is_split() const noexcept { return (prev != nullptr) | (next != nullptr); }
};

/// One upstream allocation. Blocks tile it exactly:
///   sum(block.size for blocks of the segment) == segment.size.
struct Segment {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  PoolId pool = kSmallPool;
  StreamId stream = 0;
  Block* first = nullptr;
  std::uint64_t last_used_ns = 0;  // last time a block of it returned to the pool
  Segment* prev_seg = nullptr;     // intrusive list of all segments (snapshot, release)
  Segment* next_seg = nullptr;
  // Expandable segments (Note [Expandable segments]): `size` is reserved
  // address space; mapped[i] says whether page i has physical memory.
  //   mapped_bytes == page_size * count(mapped[i]);  mapped[i] == 0 for i >= mapped_limit;
  //   mapped.size() >= mapped_limit (it grows on demand, not to the range's size).
  // Pages are mapped in chunks (Note [Physical chunks]): head[i] says page i
  // begins one, i.e. one map_pages call and one physical handle on CUDA. A
  // mapped page that is not a head belongs to the chunk of the page before.
  // Chunks are unmapped whole.
  bool expandable = false;
  std::vector<std::uint8_t> mapped;
  std::vector<std::uint8_t> head;  // same length as mapped
  std::size_t mapped_bytes = 0;
  std::size_t mapped_limit = 0;
  std::size_t holes = 0;  // unmapped pages below mapped_limit (0: a fast "all mapped" answer)
  // No block of this segment returned to the pool since its stream was last
  // synchronised: no queued work can touch its free pages, and unmapping
  // them needs no new wait (Note [Settled segments]).
  bool settled = false;

  /// The whole segment is one free block: nothing in it is in use, and it can
  /// go back upstream as it is.
  bool wholly_free() const noexcept { return first->next == nullptr && first->load_state() == BlockState::kFree; }
};

}  // namespace genesis::memory::detail
