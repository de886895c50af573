// The pool of one arena: its segments, the block records that tile them,
// the free index and the pointer map; taking a block from it (best fit,
// split) and giving one back (coalescing). How segments are obtained and
// released (upstream, expandable pages, caps, out of memory) is the arena's.
//
// Invariants (checked by CachingAllocator::check_invariants):
//   - blocks tile their segment exactly (Segment in block.h); two free blocks
//     are never neighbours, so giving one back merges at most once per side;
//   - a block is in the free index exactly while it is kFree (Note [Block
//     states] in block.h), and the pointer map finds every block at its
//     address;
//   - split_ sums the free blocks counted as split (Block::split_counted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/detail/free_index.h"
#include "genesis/memory/detail/pointer_map.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/events.h"

namespace genesis::memory::detail {

/// Free blocks inside partly used classic segments, per pool: memory that
/// cannot go back to the upstream (fragmentation). Reported as
/// inactive_split_bytes / _count.
struct InactiveSplit {
  std::int64_t bytes[kNumPools] = {};
  std::int64_t count[kNumPools] = {};
  // Running totals of what became inactive split: with the current values
  // they give what stopped being so (Note [Running totals] in
  // allocator_statistics.h).
  std::int64_t bytes_added[kNumPools] = {};
  std::int64_t count_added[kNumPools] = {};
};

// Guarded by the arena's mutex, but for map().find(), which the hot path
// calls without it (Note [Pointer map deletion] in pointer_map.h).
class Pool {
 public:
  /// `arena`: the number every block record of this pool carries.
  explicit Pool(std::uint8_t arena) noexcept : arena_(arena) {}
  /// Block records (and their stream lists) go with the pool; the arena
  /// returns the segments' memory first.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const PointerMap& map() const noexcept { return map_; }
  PointerMap& map() noexcept { return map_; }
  const FreeIndex& free_index(int pool) const noexcept { return free_[pool]; }
  /// The segments, most recent first (Segment::next_seg).
  Segment* segments() const noexcept { return segments_; }
  const InactiveSplit& inactive_split() const noexcept { return split_; }

  /// The best free block of at least `rounded` bytes on `stream` (Note [Free
  /// index]), or null; it stays in the pool.
  Block* find(PoolId pool, std::size_t rounded, StreamId stream) { return free_[pool].find(stream, rounded); }
  /// Takes free block b out of the pool for `rounded` bytes: split off the
  /// rest when worth it, marked allocated.
  Block* take(Block* b, std::size_t rounded);
  /// Takes exactly [addr, addr + size) out of free block b, which covers it:
  /// what lies before and after stays free. Marked allocated.
  Block* take_range(Block* b, std::uintptr_t addr, std::size_t size);
  /// Gives b back: merged with free neighbours and indexed; touch: mark the
  /// segment used now. Returns the free block that b became part of.
  Block* give_back(Block* b, bool touch = true);
  /// A new segment, linked in, with one free block covering it (indexed).
  Segment* add_segment(std::uintptr_t addr, std::size_t size, PoolId pool, StreamId stream, bool expandable);
  /// Unlinks a wholly free segment and drops its block; the caller returns
  /// its memory and deletes it.
  void remove_segment(Segment* seg);
  /// Unlinks the most recent segment, whatever it holds (teardown), or null.
  Segment* pop_segment() noexcept;

 private:
  Block* new_block();
  Block* new_block_chunk();  // new_block's refill: a chunk of block records (out of line)
  void delete_block(Block* b);
  // Cuts b after its first `keep` bytes: the rest becomes a new block record
  // beside it (linked and mapped, not indexed, b's state left as it was).
  Block* split_at(Block* b, std::size_t keep);
  // index_erase returns what index_insert takes as `like` for a block of the
  // same segment (FreeIndex::insert_like); null: a plain insert.
  void index_insert(Block* b, void* like = nullptr);
  void* index_erase(Block* b);

  FreeIndex free_[kNumPools];  // Note [Free index]
  PointerMap map_;
  Segment* segments_ = nullptr;
  std::vector<std::unique_ptr<Block[]>> block_chunks_;
  Block* free_blocks_ = nullptr;
  InactiveSplit split_;
  const std::uint8_t arena_;
};

// Inline, as FreeIndex::insert and erase: the slow path makes several of
// these per request, and as calls they cost more than their bodies.

inline Block* Pool::new_block() {
  Block* b = free_blocks_;
  if (GENESIS_UNLIKELY(b == nullptr)) return new_block_chunk();
  free_blocks_ = b->cache_next;
  b->cache_next = nullptr;
  return b;
}

inline void Pool::delete_block(Block* b) {
  // Blocks are recycled, never returned to the system while the allocator
  // lives: a racing stale lookup (PointerMap) always reads a valid record.
  delete b->stream_uses;
  b->stream_uses = nullptr;
  b->addr = 0;
  b->size = 0;
  b->set_requested(0);
  b->segment = nullptr;
  b->prev = b->next = nullptr;
  b->pending_events = 0;
  b->set_location(nullptr);
  b->split_counted = false;
  b->set_state(BlockState::kDead);
  b->cache_next = free_blocks_;
  free_blocks_ = b;
}

inline Block* Pool::split_at(Block* b, std::size_t keep) {
  Block* rest = new_block();
  rest->addr = b->addr + keep;
  rest->size = b->size - keep;
  rest->segment = b->segment;
  rest->pool = b->pool;
  rest->stream = b->stream;
  rest->prev = b;
  rest->next = b->next;
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = keep;
  map_.insert(rest->addr, rest);
  return rest;
}

// Both keep the inactive-split statistics without a branch on whether the
// block is split, which over classic segments in `mixed` is a coin toss: the
// counters move by the flag times the size. With allocate_miss's one-branch
// flush test, this cut the mispredicts per pair of `mixed` and per event of
// the GPT-2 replay (callgrind's branch model) by about a tenth, for a few
// more instructions (see bench/RESULTS.md). Expandable segments keep their
// branch, which a program predicts (with expandable segments on, every
// segment is one).
inline void Pool::index_insert(Block* b, void* like) {
  b->set_state(BlockState::kFree);
  free_[b->pool].insert_like(b, like);
  if (b->segment->expandable) return;  // not counted: their free pages are releasable
  const bool counted = b->is_split();
  b->split_counted = counted;
  const std::int64_t bytes = static_cast<std::int64_t>(b->size) * counted;
  split_.bytes[b->pool] += bytes;
  split_.count[b->pool] += counted;
  split_.bytes_added[b->pool] += bytes;
  split_.count_added[b->pool] += counted;
}

inline void* Pool::index_erase(Block* b) {
  void* owner = free_[b->pool].erase(b);
  const bool counted = b->split_counted;
  b->split_counted = false;
  split_.bytes[b->pool] -= static_cast<std::int64_t>(b->size) * counted;
  split_.count[b->pool] -= counted;
  return owner;
}

}  // namespace genesis::memory::detail
