// Allocator statistics and snapshots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// Index into a StatArray: the whole allocator, or one of its pools.
enum StatType : int { kStatAggregate = 0, kStatSmallPool = 1, kStatLargePool = 2, kNumStatTypes = 3 };

/// One statistic: its current value, its peak since the last reset, and the
/// running totals of what was added and removed since the last reset of the
/// accumulated statistics (reset_memory_stats or reset_accumulated_stats),
/// as PyTorch keeps them: current - allocated + freed is the value at that
/// reset, so current == allocated - freed for statistics never reset. Every
/// statistic keeps them (how: Note [Running totals] in
/// detail/allocator_statistics.h).
struct Stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;  // total added
  std::int64_t freed = 0;      // total removed
};

using StatArray = Stat[kNumStatTypes];

/// A consistent copy of every statistic of one allocator.
///
/// Definitions (bytes unless noted):
///   allocated_bytes       blocks handed to users (rounded sizes)
///   requested_bytes       what users asked for (unrounded)
///   reserved_bytes        memory obtained from the upstream (segments)
///   active_bytes          allocated + blocks freed by the user but still in
///                         use by work on other streams
///   inactive_split_bytes  free blocks inside partly used segments (these
///                         cannot be returned to the upstream: fragmentation)
///   cached_bytes          reserved - allocated: memory the cache holds (its
///                         totals: reserved and freed bytes added, allocated
///                         and released bytes removed)
/// Peaks: exact for single-threaded programs; with several threads the peak
/// of allocated may exceed the true peak by at most what other threads' caches
/// held at that moment (see Note [Statistics] in detail/allocator_statistics.h).
struct MemoryStats {
  StatArray allocated_bytes;
  StatArray requested_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray cached_bytes;
  StatArray allocation_count;      // live allocations
  StatArray segment_count;
  StatArray inactive_split_count;

  std::int64_t num_allocs = 0;
  std::int64_t num_frees = 0;
  std::int64_t num_cache_hits = 0;    // served without asking the upstream
  std::int64_t num_cache_misses = 0;  // needed a new segment
  std::int64_t num_thread_cache_hits = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_upstream_allocs = 0;
  std::int64_t num_upstream_frees = 0;
  std::int64_t num_upstream_failures = 0;  // upstream said no (then retried / OOM)
  std::int64_t num_cache_flushes = 0;      // releases of cached memory (empty_cache, OOM retry, gc)
  std::int64_t num_stream_borrows = 0;     // free blocks of one stream lent to another instead of growing
  std::int64_t total_allocated = 0;        // bytes handed out over the lifetime (since reset)

  std::size_t largest_free_block = 0;
  std::size_t memory_limit = 0;     // fraction cap in bytes (0 = none)
  std::size_t cache_limit = 0;      // set_cache_size cap (0 = none; a cap of 0, set_cache_size(0),
                                    // also reads 0: AllocatorOptions::cache_size_limit tells them apart)

  /// num_cache_hits / num_allocs, 0 when nothing was allocated.
  double cache_hit_rate() const noexcept;
  /// (reserved - allocated) / reserved, 0 when nothing is reserved.
  double fragmentation_ratio() const noexcept;
};

/// One block inside a segment, as memory_snapshot() reports it.
struct BlockInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;  // valid for allocated blocks
  /// "allocated", "free", "thread_cached" (free, held by a thread's cache) or
  /// "pending" (freed, waiting for work on other streams).
  std::string state;
  StreamId stream = 0;
};

/// One segment (upstream allocation) and the blocks that tile it.
struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::string pool;  // "small" or "large"
  StreamId stream = 0;
  std::size_t allocated_bytes = 0;
  /// Expandable segments: `size` is reserved address space and
  /// `mapped_bytes` the physical memory behind it (what counts as reserved).
  bool expandable = false;
  std::size_t mapped_bytes = 0;
  /// Expandable segments: the runs of mapped pages, [address, address +
  /// bytes), in address order (classic segments: empty). Memory is only
  /// there; PyTorch's snapshots list each run as a segment of its own.
  std::vector<std::pair<std::uintptr_t, std::size_t>> mapped_ranges;
  std::vector<BlockInfo> blocks;
};

/// A live allocation larger than a threshold (the detailed view).
struct AllocationInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamId stream = 0;
  /// Where it was allocated: the allocation context active at that time
  /// (ScopedAllocationContext) or "0x<address>" when none was set.
  std::string location;
  /// Steady-clock time of the allocation (detail::now_ns) when event recording
  /// was on then; otherwise an earlier time or 0, never a later one. So "made
  /// since T" is exact for any T while recording was on from T (leak checks,
  /// Note [Exact sessions]).
  std::uint64_t alloc_time_ns = 0;
};

}  // namespace genesis::memory
