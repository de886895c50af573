// The statistics of one arena (Note [Statistics] in
// genesis/memory/detail/allocator_statistics.h): exact sums over the pool and
// every thread cache, peaks, resets, and the sum over arenas.
#include "genesis/memory/detail/allocator_statistics.h"

#include <algorithm>

namespace genesis::memory {

double MemoryStats::cache_hit_rate() const noexcept {
  return num_allocs > 0 ? static_cast<double>(num_cache_hits) / static_cast<double>(num_allocs) : 0.0;
}

double MemoryStats::fragmentation_ratio() const noexcept {
  const auto reserved = reserved_bytes[kStatAggregate].current;
  const auto allocated = allocated_bytes[kStatAggregate].current;
  return reserved > 0 ? static_cast<double>(reserved - allocated) / static_cast<double>(reserved) : 0.0;
}

}  // namespace genesis::memory

namespace genesis::memory::detail {

struct AllocatorStatistics::Current {
  std::int64_t allocated[3] = {}, requested[3] = {}, reserved[3] = {}, active[3] = {};
  std::int64_t inactive[3] = {}, inactive_count[3] = {}, cached[3] = {}, allocations[3] = {}, segments[3] = {};
  std::int64_t allocs_cum[3] = {}, frees_cum[3] = {}, total_alloc_cum[3] = {}, req_alloc_cum[3] = {};
  std::int64_t segments_cum[3] = {}, split_bytes_cum[3] = {}, split_count_cum[3] = {};
  std::int64_t thread_hits_cum = 0;
};

namespace {

void fill_aggregate(std::int64_t (&v)[3]) { v[0] = v[1] + v[2]; }

}  // namespace

AllocatorStatistics::Current AllocatorStatistics::current(const std::vector<ThreadCache*>& caches,
                                                          const InactiveSplit& split) const {
  Current c;
  for (int p = 0; p < kNumPools; ++p) {
    std::int64_t tc_cached = 0, tc_blocks_allocs = 0, tc_frees = 0, tc_req = 0, tc_total = 0, tc_total_req = 0;
    for (const ThreadCache* tc : caches) {
      tc_cached += tc->cached_bytes[p].get();
      tc_blocks_allocs += tc->num_allocs[p].get();
      tc_frees += tc->num_frees[p].get() - tc->frees_folded[p];
      tc_req += tc->requested_delta[p].get();
      tc_total += tc->total_allocated[p].get();
      tc_total_req += tc->total_requested[p].get();
    }
    // Allocations served by a thread cache are all hits, including those of
    // threads that exited (folded into retired_allocs_ by retire()): without
    // them num_cache_hits dropped when a thread exited, and could go
    // negative after reset().
    c.thread_hits_cum += tc_blocks_allocs + retired_allocs_[p];
    const int i = 1 + p;
    c.allocated[i] = out_pool(p) - tc_cached;
    c.requested[i] = counters.requested[p] + tc_req + retired_requested_[p];
    c.reserved[i] = counters.reserved[p];
    c.active[i] = c.allocated[i] + counters.pending_bytes[p];
    c.inactive[i] = split.bytes[p];
    c.inactive_count[i] = split.count[p];
    c.cached[i] = c.reserved[i] - c.allocated[i];
    c.segments[i] = counters.segments[p];
    c.allocs_cum[i] = counters.num_allocs[p] + tc_blocks_allocs + retired_allocs_[p];
    c.frees_cum[i] = counters.num_frees[p] + tc_frees + retired_frees_[p];
    c.allocations[i] = c.allocs_cum[i] - c.frees_cum[i];
    c.total_alloc_cum[i] = counters.total_allocated[p] + tc_total + retired_total_allocated_[p];
    c.req_alloc_cum[i] = counters.requested_allocated[p] + tc_total_req + retired_total_requested_[p];
    c.segments_cum[i] = counters.segments_allocated[p];
    c.split_bytes_cum[i] = split.bytes_added[p];
    c.split_count_cum[i] = split.count_added[p];
  }
  for (auto* v : {&c.allocated, &c.requested, &c.reserved, &c.active, &c.inactive, &c.inactive_count, &c.cached,
                  &c.allocations, &c.segments, &c.allocs_cum, &c.frees_cum, &c.total_alloc_cum, &c.req_alloc_cum,
                  &c.segments_cum, &c.split_bytes_cum, &c.split_count_cum})
    fill_aggregate(*v);
  return c;
}

// Raises every peak to at least the current value.
void AllocatorStatistics::fold_peaks(const Current& c) const {
  for (int i = 0; i < 3; ++i) {
    peaks_.allocated[i] = std::max(peaks_.allocated[i], c.allocated[i]);
    peaks_.reserved[i] = std::max(peaks_.reserved[i], c.reserved[i]);
    peaks_.active[i] = std::max(peaks_.active[i], c.active[i]);
    peaks_.requested[i] = std::max(peaks_.requested[i], c.requested[i]);
    peaks_.cached[i] = std::max(peaks_.cached[i], c.cached[i]);
    peaks_.segments[i] = std::max(peaks_.segments[i], c.segments[i]);
    peaks_.allocations[i] = std::max(peaks_.allocations[i], c.allocations[i]);
    peaks_.inactive_split[i] = std::max(peaks_.inactive_split[i], c.inactive[i]);
    peaks_.inactive_split_count[i] = std::max(peaks_.inactive_split_count[i], c.inactive_count[i]);
  }
}

void AllocatorStatistics::retire(const ThreadCache& tc, const std::vector<ThreadCache*>& caches,
                                 const InactiveSplit& split) {
  for (int p = 0; p < kNumPools; ++p) {
    retired_allocs_[p] += tc.num_allocs[p].get();
    retired_frees_[p] += tc.num_frees[p].get() - tc.frees_folded[p];
    live_folded_[p] -= tc.frees_folded[p];  // now in the retired counts
    retired_requested_[p] += tc.requested_delta[p].get();
    retired_total_allocated_[p] += tc.total_allocated[p].get();
    retired_total_requested_[p] += tc.total_requested[p].get();
  }
  for (int i = 0; i < 3; ++i) {
    peaks_.allocated[i] = std::max(peaks_.allocated[i], tc.peak_candidate[i].get());
    peaks_.requested[i] = std::max(peaks_.requested[i], tc.peak_requested_candidate[i].get());
    peaks_.allocations[i] = std::max(peaks_.allocations[i], tc.peak_count_candidate[i].get());
  }
  // The exact sums over the remaining caches, and the exited thread's share
  // moves into the hot path's bases.
  fold_peaks(current(caches, split));
  for (int p = 0; p < kNumPools; ++p) store_hot_bases(p);
}

MemoryStats AllocatorStatistics::report(const std::vector<ThreadCache*>& caches, const InactiveSplit& split) const {
  const Current c = current(caches, split);
  MemoryStats s;
  std::int64_t peak_alloc[3];
  for (int i = 0; i < 3; ++i) {
    peak_alloc[i] = std::max(peaks_.allocated[i], c.allocated[i]);
    for (const ThreadCache* tc : caches) {
      peak_alloc[i] = std::max(peak_alloc[i], tc->peak_candidate[i].get());
      peaks_.requested[i] = std::max(peaks_.requested[i], tc->peak_requested_candidate[i].get());
      peaks_.allocations[i] = std::max(peaks_.allocations[i], tc->peak_count_candidate[i].get());
    }
    peaks_.allocated[i] = peak_alloc[i];
  }
  fold_peaks(c);  // what this read observes (monotone across reads)
  for (int i = 0; i < 3; ++i) {
    auto set = [&](Stat& st, std::int64_t cur, std::int64_t peak) {
      st.current = cur;
      st.peak = std::max(peak, cur);
    };
    // Note [Running totals]: what was taken away since the reset is what
    // was added minus how far the current value moved.
    auto derive = [](Stat& st, std::int64_t added, std::int64_t current_at_reset) {
      st.freed = added - (st.current - current_at_reset);
      st.allocated = added;
    };
    set(s.allocated_bytes[i], c.allocated[i], peak_alloc[i]);
    derive(s.allocated_bytes[i], c.total_alloc_cum[i] - baseline_.total_allocated[i], baseline_.allocated_bytes[i]);
    // No block holds more requested bytes than its size, so the allocated
    // peak bounds the requested one: the tighter of the two upper bounds.
    set(s.requested_bytes[i], c.requested[i], std::min(peaks_.requested[i], s.allocated_bytes[i].peak));
    derive(s.requested_bytes[i], c.req_alloc_cum[i] - baseline_.requested_allocated[i],
           baseline_.requested_current[i]);
    set(s.reserved_bytes[i], c.reserved[i], peaks_.reserved[i]);
    const std::int64_t ra = i == 0 ? counters.reserved_allocated[0] + counters.reserved_allocated[1]
                                   : counters.reserved_allocated[i - 1];
    const std::int64_t rf =
        i == 0 ? counters.reserved_freed[0] + counters.reserved_freed[1] : counters.reserved_freed[i - 1];
    s.reserved_bytes[i].allocated = ra - baseline_.reserved_allocated[i];
    s.reserved_bytes[i].freed = rf - baseline_.reserved_freed[i];
    set(s.active_bytes[i], c.active[i], std::max(peaks_.active[i], peak_alloc[i]));
    derive(s.active_bytes[i], s.allocated_bytes[i].allocated, baseline_.active_current[i]);
    set(s.inactive_split_bytes[i], c.inactive[i], peaks_.inactive_split[i]);
    derive(s.inactive_split_bytes[i], c.split_bytes_cum[i] - baseline_.split_bytes_added[i],
           baseline_.split_bytes_current[i]);
    set(s.cached_bytes[i], c.cached[i], peaks_.cached[i]);
    s.cached_bytes[i].allocated = s.reserved_bytes[i].allocated + s.allocated_bytes[i].freed;
    s.cached_bytes[i].freed = s.reserved_bytes[i].freed + s.allocated_bytes[i].allocated;
    set(s.allocation_count[i], c.allocations[i], peaks_.allocations[i]);
    s.allocation_count[i].allocated = c.allocs_cum[i] - baseline_.allocs[i];
    s.allocation_count[i].freed = c.frees_cum[i] - baseline_.frees[i];
    set(s.segment_count[i], c.segments[i], peaks_.segments[i]);
    derive(s.segment_count[i], c.segments_cum[i] - baseline_.segments_allocated[i], baseline_.segments_current[i]);
    set(s.inactive_split_count[i], c.inactive_count[i], peaks_.inactive_split_count[i]);
    derive(s.inactive_split_count[i], c.split_count_cum[i] - baseline_.split_count_added[i],
           baseline_.split_count_current[i]);
  }
  s.num_allocs = c.allocs_cum[0] - baseline_.num_allocs;
  s.num_frees = c.frees_cum[0] - baseline_.num_frees;
  s.num_thread_cache_hits = c.thread_hits_cum - baseline_.num_thread_hits;
  s.num_cache_hits = counters.num_hits + c.thread_hits_cum - baseline_.num_hits;
  s.num_cache_misses = counters.num_misses - baseline_.num_misses;
  s.num_ooms = counters.num_ooms - baseline_.num_ooms;
  s.num_upstream_allocs = counters.num_upstream_allocs - baseline_.num_upstream_allocs;
  s.num_upstream_frees = counters.num_upstream_frees - baseline_.num_upstream_frees;
  s.num_upstream_failures = counters.num_upstream_failures - baseline_.num_upstream_failures;
  s.num_cache_flushes = counters.num_cache_flushes - baseline_.num_cache_flushes;
  s.num_stream_borrows = counters.num_stream_borrows - baseline_.num_stream_borrows;
  s.total_allocated = s.allocated_bytes[0].allocated;
  return s;
}

void AllocatorStatistics::reset_peaks(const std::vector<ThreadCache*>& caches, const InactiveSplit& split) {
  const Current c = current(caches, split);
  for (int i = 0; i < 3; ++i) {
    peaks_.allocated[i] = c.allocated[i];
    peaks_.reserved[i] = c.reserved[i];
    peaks_.active[i] = c.active[i];
    peaks_.requested[i] = c.requested[i];
    peaks_.cached[i] = c.cached[i];
    peaks_.segments[i] = c.segments[i];
    peaks_.allocations[i] = c.allocations[i];
    peaks_.inactive_split[i] = c.inactive[i];
    peaks_.inactive_split_count[i] = c.inactive_count[i];
    // A racing owner may overwrite these with fresh (valid) candidates.
    for (ThreadCache* tc : caches) {
      tc->peak_candidate[i].set(c.allocated[i]);
      tc->peak_requested_candidate[i].set(c.requested[i]);
      tc->peak_count_candidate[i].set(c.allocations[i]);
    }
  }
}

void AllocatorStatistics::reset(const std::vector<ThreadCache*>& caches, const InactiveSplit& split, bool peaks) {
  const Current c = current(caches, split);
  baseline_.num_allocs = c.allocs_cum[0];
  baseline_.num_frees = c.frees_cum[0];
  baseline_.num_thread_hits = c.thread_hits_cum;
  baseline_.num_hits = counters.num_hits + c.thread_hits_cum;
  baseline_.num_misses = counters.num_misses;
  baseline_.num_ooms = counters.num_ooms;
  baseline_.num_upstream_allocs = counters.num_upstream_allocs;
  baseline_.num_upstream_frees = counters.num_upstream_frees;
  baseline_.num_upstream_failures = counters.num_upstream_failures;
  baseline_.num_cache_flushes = counters.num_cache_flushes;
  baseline_.num_stream_borrows = counters.num_stream_borrows;
  for (int i = 0; i < 3; ++i) {
    baseline_.total_allocated[i] = c.total_alloc_cum[i];
    baseline_.allocated_bytes[i] = c.allocated[i];
    baseline_.allocs[i] = c.allocs_cum[i];
    baseline_.frees[i] = c.frees_cum[i];
    baseline_.reserved_allocated[i] = i == 0 ? counters.reserved_allocated[0] + counters.reserved_allocated[1]
                                             : counters.reserved_allocated[i - 1];
    baseline_.reserved_freed[i] =
        i == 0 ? counters.reserved_freed[0] + counters.reserved_freed[1] : counters.reserved_freed[i - 1];
    baseline_.requested_allocated[i] = c.req_alloc_cum[i];
    baseline_.requested_current[i] = c.requested[i];
    baseline_.active_current[i] = c.active[i];
    baseline_.segments_allocated[i] = c.segments_cum[i];
    baseline_.segments_current[i] = c.segments[i];
    baseline_.split_bytes_added[i] = c.split_bytes_cum[i];
    baseline_.split_bytes_current[i] = c.inactive[i];
    baseline_.split_count_added[i] = c.split_count_cum[i];
    baseline_.split_count_current[i] = c.inactive_count[i];
  }
  if (peaks) reset_peaks(caches, split);
}

void AllocatorStatistics::add(MemoryStats& into, const MemoryStats& s) {
  auto add = [](StatArray& a, const StatArray& b) {
    for (int i = 0; i < kNumStatTypes; ++i) {
      a[i].current += b[i].current;
      a[i].peak += b[i].peak;
      a[i].allocated += b[i].allocated;
      a[i].freed += b[i].freed;
    }
  };
  add(into.allocated_bytes, s.allocated_bytes);
  add(into.requested_bytes, s.requested_bytes);
  add(into.reserved_bytes, s.reserved_bytes);
  add(into.active_bytes, s.active_bytes);
  add(into.inactive_split_bytes, s.inactive_split_bytes);
  add(into.cached_bytes, s.cached_bytes);
  add(into.allocation_count, s.allocation_count);
  add(into.segment_count, s.segment_count);
  add(into.inactive_split_count, s.inactive_split_count);
  into.num_allocs += s.num_allocs;
  into.num_frees += s.num_frees;
  into.num_cache_hits += s.num_cache_hits;
  into.num_cache_misses += s.num_cache_misses;
  into.num_thread_cache_hits += s.num_thread_cache_hits;
  into.num_ooms += s.num_ooms;
  into.num_upstream_allocs += s.num_upstream_allocs;
  into.num_upstream_frees += s.num_upstream_frees;
  into.num_upstream_failures += s.num_upstream_failures;
  into.num_cache_flushes += s.num_cache_flushes;
  into.num_stream_borrows += s.num_stream_borrows;
  into.total_allocated += s.total_allocated;
  into.largest_free_block = std::max(into.largest_free_block, s.largest_free_block);
}

}  // namespace genesis::memory::detail
