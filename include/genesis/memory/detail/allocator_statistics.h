// The statistics of one arena of the caching allocator: the pool's counters,
// the hot path's shared bases, peaks, the baseline of reset_memory_stats(),
// and the report (MemoryStats) built from them and the thread caches' own
// counters.
//
// Note [Statistics]: statistics are always on, and the hot path may not touch
// shared cache lines. So the pool keeps its own counters under the mutex, each
// thread cache keeps owned counters (plain moves), and report() adds them up.
// The pool counts a block as "out" when it is allocated or in a thread cache;
// allocated = out - (bytes in thread caches). A peak of a sum of per-thread
// values cannot be kept exactly without a shared write, so each allocation
// computes the candidate  out - (bytes cached by *this* thread) , which equals
// the true allocated bytes when one thread allocates and exceeds it by at most
// what other threads hold cached otherwise. The reported peak is the largest
// candidate: never below the true peak. Allocated and requested bytes and
// live allocations rise only in allocations, which note their candidates, so
// the slow free path notes only what a free can raise (note_peaks_free).
//
// Note [Folding the threads' counters]: requested bytes and live allocations
// have no shared "out" figure; their candidate is the pool's share plus this
// thread's own change. A thread that frees into its cache blocks whose
// allocation the pool counted (taken on the slow path) runs its own change
// below zero, while the pool's share keeps them; another thread's candidate,
// the pool's share plus its own change, then counts them as still live. With
// PyTorch (the autograd thread allocates and frees gradients, the program's
// thread the activations) the reported peak of requested bytes grew without
// bound: 300 GB after 30 steps of a 14 GB job. So each time a thread takes
// the slow path (the mutex held), its own changes move into the pool's
// share (fold_thread): what other threads' candidates miss is then only
// what each thread changed through its cache since its last slow-path call,
// bounded by what its cache holds. The hot path does not change. With one
// thread cache the candidate is exact without folding, and the fold (about
// 3% of `mixed`'s instructions) is skipped until a second thread caches.
// A cache that another thread empties (reclaim_thread_caches: expandable
// segments do so at every new high-water mark) folds at once: its blocks
// left for the pool, so the bound "what its cache holds" no longer covered
// its change (a ResNet-50 job under PyTorch read a third more requested
// bytes than it had allocated). And report() never gives a requested peak
// above the allocated one: no block holds more requested bytes than its size.
//
// Note [Running totals]: every statistic reports, like PyTorch's, what was
// added and what was taken away since the last reset besides its current
// value, so that  current - allocated + freed  is the value at the reset
// (0 for a statistic never reset). Only one of the two totals is counted, at
// the sites that already move the figure up: allocated bytes, requested
// bytes, segments and inactive split blocks keep a running total of what was
// added, and report() derives what went away as  added - (current - current at the
// reset). Active bytes rise only when a block is allocated, so they share
// the allocated bytes' running total. Cached bytes (reserved - allocated)
// move with both: they rise by what is reserved and by what is freed, and
// fall by what is allocated and by what is released; the totals are those
// sums, not the net moves of each event (an allocation that reserves a new
// segment counts the segment as added and the block as taken away).
// Inactive split blocks merge with a freed neighbour by leaving and coming
// back as one larger block, which counts both ways, as PyTorch counts it.
// Requested bytes cost the hot path one more thread-owned add per
// allocation (ThreadCache::total_requested): a block's requested bytes are
// known only to the call that hands it out, so no later sum can recover
// them. 4 instructions of the 254 of a hot pair (alloc_icount); counting
// what the frees give back instead cost 8.
//
// Note [Adding a statistic]: a new figure of MemoryStats touches three files:
// stats.h (the field), this header (its counter, and a note_* member if a new
// kind of event counts it) and allocator_statistics.cpp (report(), reset(),
// add()). Only where the counted event is new does its site gain one call.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/detail/pool.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/stats.h"

namespace genesis::memory::detail {

// Cache-line aligned: the first line holds what the hot path reads (out
// bytes and the bases), written by the slow path under the arena's mutex;
// the rest is the slow path's alone.
class alignas(64) AllocatorStatistics {
  // The hot path's part first, on the line at the statistics' own address
  // (Note [Arena layout] in arena.h). Behind the slow path's counters,
  // base_requested_ sat at the offset of ThreadCache::peak_count_candidate
  // plus one element: gcc shared offset plus index between the two
  // addresses of note_hot_alloc and kept the sum in a register of its own,
  // one instruction more on every hot allocation (alloc_icount).
  //
  // Bytes of blocks Allocated or ThreadCached ("out of the pool"); written
  // under the mutex, read by the hot path for peak candidates.
  std::atomic<std::int64_t> out_bytes_total_{0};
  std::atomic<std::int64_t> out_bytes_pool_[kNumPools] = {};
  // The pool's share (slow path + exited threads) of requested bytes and of
  // live allocations, per pool; written under the mutex, read by the hot path.
  std::atomic<std::int64_t> base_requested_[kNumPools] = {};
  std::atomic<std::int64_t> base_live_[kNumPools] = {};

 public:
  // Cumulative counters of the slow path (guarded by the arena's mutex).
  // Per-thread counters live in ThreadCache; report() adds both.
  struct Counters {
    std::int64_t pending_bytes[kNumPools] = {};
    std::int64_t reserved[kNumPools] = {};
    std::int64_t segments[kNumPools] = {};
    std::int64_t num_allocs[kNumPools] = {};
    std::int64_t num_frees[kNumPools] = {};
    std::int64_t requested[kNumPools] = {};
    std::int64_t total_allocated[kNumPools] = {};
    std::int64_t num_hits = 0, num_misses = 0, num_ooms = 0;
    std::int64_t num_upstream_allocs = 0, num_upstream_frees = 0, num_upstream_failures = 0;
    std::int64_t num_cache_flushes = 0;
    std::int64_t num_stream_borrows = 0;  // Note [Borrowing across streams]
    std::int64_t reserved_allocated[kNumPools] = {}, reserved_freed[kNumPools] = {};
    // Running totals of what only rises here; what went away is derived
    // from them and the current values in report() (Note [Running totals]).
    std::int64_t requested_allocated[kNumPools] = {};
    std::int64_t segments_allocated[kNumPools] = {};
  };

  // --- hot path (the owner thread, no lock) ---------------------------------

  /// An allocation of `bytes` served from tc's cache: a block of `size`
  /// bytes of pool p. The thread's counters and its peak candidates.
  /// Always inlined: out of line, saving and restoring registers around it
  /// cost ~13 instructions of a ~300-instruction hot pair (callgrind).
  [[gnu::always_inline]] void note_hot_alloc(ThreadCache* tc, int p, std::int64_t size,
                                             std::size_t bytes) const noexcept;
  /// A free of block b (`size` bytes of pool p) into tc's cache. The block
  /// rather than its requested bytes, read last: as an argument the value
  /// was loaded ahead of the counters' updates and kept in a register of its
  /// own across them, one instruction more on every hot free (alloc_icount).
  [[gnu::always_inline]] static void note_hot_free(ThreadCache* tc, int p, std::int64_t size, const Block* b) noexcept {
    tc->cached_bytes[p].add(size);
    tc->num_frees[p].add(1);
    tc->requested_delta[p].add(-static_cast<std::int64_t>(b->get_requested()));
  }

  // --- slow path (the arena's mutex held) -----------------------------------

  /// A block of `size` bytes for a request of `bytes` left the pool; hit:
  /// no new memory was taken.
  void note_alloc(PoolId p, std::int64_t size, std::size_t bytes, bool hit) noexcept {
    add_out(p, size);
    ++counters.num_allocs[p];
    counters.requested[p] += static_cast<std::int64_t>(bytes);
    counters.requested_allocated[p] += static_cast<std::int64_t>(bytes);
    counters.total_allocated[p] += size;
    if (hit) ++counters.num_hits; else ++counters.num_misses;
  }
  /// A block of `size` bytes (`requested` asked for) was freed by the user.
  void note_free(PoolId p, std::int64_t size, std::size_t requested) noexcept {
    ++counters.num_frees[p];
    counters.requested[p] -= static_cast<std::int64_t>(requested);
    add_out(p, -size);
  }
  /// A segment of pool p was added (classic, or an expandable range) or
  /// released.
  void note_segment_added(PoolId p) noexcept {
    ++counters.segments[p];
    ++counters.segments_allocated[p];
  }
  void note_segment_released(PoolId p) noexcept { --counters.segments[p]; }
  /// `bytes` of pool p left tc's cache and went back to the pool (a flush).
  void note_flushed(ThreadCache* tc, PoolId p, std::int64_t bytes) noexcept {
    if (bytes == 0) return;  // blocks are never empty: nothing was flushed
    tc->cached_bytes[p].add(-bytes);
    add_out(p, -bytes);
  }
  /// The peaks an allocation of pool p may have raised (O(1); exact for one
  /// thread, like the hot path's). grew: reserved memory or segments may
  /// have grown, else their peaks are not looked at.
  [[gnu::always_inline]] void note_peaks_alloc(ThreadCache* tc, PoolId p, bool grew,
                                               const InactiveSplit& split) noexcept;
  /// The peaks a free may have raised: cached, inactive split and active
  /// bytes (allocated + pending: a free with events moves bytes from the one
  /// to the other, and hot-path allocations do not note active peaks).
  void note_peaks_free(ThreadCache* tc, PoolId p, const InactiveSplit& split) noexcept;
  /// A second thread cache exists: from now on each slow-path call folds
  /// its thread's own counters (Note [Folding the threads' counters]).
  void fold_threads() noexcept { fold_threads_ = true; }
  /// Another thread emptied tc's cache (Arena::reclaim_thread_caches, its
  /// owner held off): tc's own changes fold now, not at its owner's next
  /// slow-path call. Its count of requested bytes had gone down by every
  /// block it freed into the cache; with the cache empty, that is no longer
  /// bounded by what the cache holds, and until the owner came back every
  /// other thread's candidate counted those blocks as live.
  void fold_reclaimed(ThreadCache* tc) noexcept { fold_thread(tc); }
  /// tc's thread exits: its counters and peak candidates fold into the
  /// arena's, and `caches` (tc no longer among them) set the hot path's bases.
  void retire(const ThreadCache& tc, const std::vector<ThreadCache*>& caches, const InactiveSplit& split);

  /// Bytes allocated or in a thread cache ("out of the pool").
  std::int64_t out_total() const noexcept { return out_bytes_total_.load(std::memory_order_relaxed); }
  std::int64_t out_pool(int p) const noexcept { return out_bytes_pool_[p].load(std::memory_order_relaxed); }
  std::int64_t reserved_total() const noexcept { return counters.reserved[0] + counters.reserved[1]; }

  // --- reports (the arena's mutex held) -------------------------------------

  /// The arena's statistics: these counters, the pool's inactive split
  /// blocks, and every thread cache's counters. largest_free_block,
  /// memory_limit and cache_limit are the caller's.
  MemoryStats report(const std::vector<ThreadCache*>& caches, const InactiveSplit& split) const;
  /// Peaks become the current values.
  void reset_peaks(const std::vector<ThreadCache*>& caches, const InactiveSplit& split);
  /// Counters and totals start again from the current state; so do the
  /// peaks when `peaks` is true (PyTorch resets its accumulated statistics
  /// and its peaks separately, and Genesis's reset_memory_stats does both).
  void reset(const std::vector<ThreadCache*>& caches, const InactiveSplit& split, bool peaks = true);
  /// Adds the statistics of another arena to `into` (Note [Arenas]).
  static void add(MemoryStats& into, const MemoryStats& s);

  Counters counters;

 private:
  struct Current;  // current values summed over the pool and the thread caches
  Current current(const std::vector<ThreadCache*>& caches, const InactiveSplit& split) const;
  void fold_peaks(const Current& c) const;
  // base_requested_ and base_live_ of pool p from the pool's counters.
  void store_hot_bases(int p) noexcept {
    base_requested_[p].store(counters.requested[p] + retired_requested_[p], std::memory_order_relaxed);
    base_live_[p].store(counters.num_allocs[p] + retired_allocs_[p] - counters.num_frees[p] - retired_frees_[p] +
                            live_folded_[p],
                        std::memory_order_relaxed);
  }
  // Moves the owner thread's own changes of requested bytes and live
  // allocations into the pool's share (Note [Folding the threads'
  // counters]); the arena's mutex held, called by tc's own thread (its
  // counters' only writer). Both pools' bases follow.
  void fold_thread(ThreadCache* tc) noexcept {
    for (int p = 0; p < kNumPools; ++p) {
      const std::int64_t req = tc->requested_delta[p].get();
      const std::int64_t frees = tc->num_frees[p].get();
      const std::int64_t live = tc->num_allocs[p].get() - frees;
      if (req == 0 && live == 0) continue;
      counters.requested[p] += req;
      tc->requested_delta[p].set(0);
      tc->num_frees[p].set(frees + live);
      tc->frees_folded[p] += live;
      live_folded_[p] += live;
      store_hot_bases(p);
    }
  }
  void add_out(int p, std::int64_t delta) noexcept {
    out_bytes_pool_[p].store(out_bytes_pool_[p].load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    out_bytes_total_.store(out_bytes_total_.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }

  // Values at the last reset(), subtracted from the cumulative counters when
  // reporting.
  struct Baseline {
    std::int64_t num_allocs = 0, num_frees = 0, num_hits = 0, num_misses = 0, num_ooms = 0;
    std::int64_t num_thread_hits = 0, num_upstream_allocs = 0, num_upstream_frees = 0;
    std::int64_t num_upstream_failures = 0, num_cache_flushes = 0, num_stream_borrows = 0;
    std::int64_t total_allocated[3] = {}, allocated_bytes[3] = {}, reserved_allocated[3] = {};
    std::int64_t reserved_freed[3] = {}, allocs[3] = {}, frees[3] = {};
    // Running totals and current values of the figures whose freed total
    // is derived (Note [Running totals]).
    std::int64_t requested_allocated[3] = {}, requested_current[3] = {};
    std::int64_t active_current[3] = {};
    std::int64_t segments_allocated[3] = {}, segments_current[3] = {};
    std::int64_t split_bytes_added[3] = {}, split_bytes_current[3] = {};
    std::int64_t split_count_added[3] = {}, split_count_current[3] = {};
  };
  // Peaks (Note [Statistics]); index by StatType.
  struct Peaks {
    std::int64_t allocated[3] = {}, reserved[3] = {}, active[3] = {}, requested[3] = {};
    std::int64_t cached[3] = {}, segments[3] = {}, allocations[3] = {}, inactive_split[3] = {};
    std::int64_t inactive_split_count[3] = {};
  };
  Baseline baseline_;
  // Mutable: report() folds the values it observes in, so that reported peaks
  // never go down between two reads.
  mutable Peaks peaks_;
  // Folded-in counters of thread caches whose threads exited.
  std::int64_t retired_allocs_[kNumPools] = {}, retired_frees_[kNumPools] = {};
  std::int64_t retired_requested_[kNumPools] = {}, retired_total_allocated_[kNumPools] = {};
  std::int64_t retired_total_requested_[kNumPools] = {};
  // Live allocations folded from living threads (their frees_folded summed).
  std::int64_t live_folded_[kNumPools] = {};
  bool fold_threads_ = false;  // set once two threads have caches; never cleared
};

inline void AllocatorStatistics::note_hot_alloc(ThreadCache* tc, int p, std::int64_t size,
                                                std::size_t bytes) const noexcept {
  const int q = 1 - p;  // the other pool
  // This thread is the only writer of its counters: each is read once and
  // its new value kept for the candidates below (relaxed atomics are not
  // merged by the compiler, so re-reading them cost a load each).
  const std::int64_t cached_p = tc->cached_bytes[p].get() - size;
  const std::int64_t cached_all = cached_p + tc->cached_bytes[q].get();
  const std::int64_t allocs_p = tc->num_allocs[p].get() + 1;
  const std::int64_t req_delta_p = tc->requested_delta[p].get() + static_cast<std::int64_t>(bytes);
  tc->cached_bytes[p].set(cached_p);
  tc->num_allocs[p].set(allocs_p);
  tc->requested_delta[p].set(req_delta_p);
  tc->total_allocated[p].add(size);
  tc->total_requested[p].add(static_cast<std::int64_t>(bytes));
  // Peak candidates (Note [Statistics]): what is out of the pool minus what
  // this thread holds cached is an upper bound of the allocated bytes, exact
  // when one thread allocates.
  const std::int64_t cur = out_bytes_total_.load(std::memory_order_relaxed) - cached_all;
  if (cur > tc->peak_candidate[0].get()) tc->peak_candidate[0].set(cur);
  const std::int64_t cur_p = out_bytes_pool_[p].load(std::memory_order_relaxed) - cached_p;
  if (cur_p > tc->peak_candidate[1 + p].get()) tc->peak_candidate[1 + p].set(cur_p);
  // Requested bytes and live allocations: the pool's part plus this thread's
  // (exact for one thread; the slow path and report() add every thread).
  const std::int64_t req_p = base_requested_[p].load(std::memory_order_relaxed) + req_delta_p;
  const std::int64_t req_q = base_requested_[q].load(std::memory_order_relaxed) + tc->requested_delta[q].get();
  if (req_p + req_q > tc->peak_requested_candidate[0].get()) tc->peak_requested_candidate[0].set(req_p + req_q);
  if (req_p > tc->peak_requested_candidate[1 + p].get()) tc->peak_requested_candidate[1 + p].set(req_p);
  const std::int64_t n_p = base_live_[p].load(std::memory_order_relaxed) + allocs_p - tc->num_frees[p].get();
  const std::int64_t n_q =
      base_live_[q].load(std::memory_order_relaxed) + tc->num_allocs[q].get() - tc->num_frees[q].get();
  if (n_p + n_q > tc->peak_count_candidate[0].get()) tc->peak_count_candidate[0].set(n_p + n_q);
  if (n_p > tc->peak_count_candidate[1 + p].get()) tc->peak_count_candidate[1 + p].set(n_p);
}

// Inline: called on every slow-path allocation; as a call its register saves
// were a fifth of its instructions. In O(1): walking every thread cache on
// each call cost a tenth of a slow-path allocation. report() and thread
// exits fold in exact sums.
inline void AllocatorStatistics::note_peaks_alloc(ThreadCache* tc, PoolId p, bool grew,
                                                  const InactiveSplit& split) noexcept {
  const int q = 1 - p;  // the other pool
  // This thread's own shares, read in one place (one test of tc, not one per
  // term: this function runs on every slow-path allocation). Folded into the
  // pool's share first where several threads cache (Note [Folding the
  // threads' counters]); then they are zero.
  std::int64_t cached_p = 0, cached_q = 0, own_req_p = 0, own_req_q = 0, own_live_p = 0, own_live_q = 0;
  if (tc != nullptr) {
    if (fold_threads_) fold_thread(tc);
    cached_p = tc->cached_bytes[p].get();
    cached_q = tc->cached_bytes[q].get();
    own_req_p = tc->requested_delta[p].get();
    own_req_q = tc->requested_delta[q].get();
    own_live_p = tc->num_allocs[p].get() - tc->num_frees[p].get();
    own_live_q = tc->num_allocs[q].get() - tc->num_frees[q].get();
  }
  store_hot_bases(p);
  const std::int64_t alloc_p = out_bytes_pool_[p].load(std::memory_order_relaxed) - cached_p;
  const std::int64_t alloc_all = out_bytes_total_.load(std::memory_order_relaxed) - cached_p - cached_q;
  const std::int64_t req_p = base_requested_[p].load(std::memory_order_relaxed) + own_req_p;
  const std::int64_t req_q = base_requested_[q].load(std::memory_order_relaxed) + own_req_q;
  const std::int64_t live_p = base_live_[p].load(std::memory_order_relaxed) + own_live_p;
  const std::int64_t live_q = base_live_[q].load(std::memory_order_relaxed) + own_live_q;
  const std::int64_t res_p = counters.reserved[p], res_all = counters.reserved[0] + counters.reserved[1];
  const std::int64_t pend_all = counters.pending_bytes[0] + counters.pending_bytes[1];
  auto bump = [](std::int64_t* peak, int i, std::int64_t v) {
    if (v > peak[i]) peak[i] = v;
  };
  bump(peaks_.allocated, 1 + p, alloc_p);
  bump(peaks_.allocated, 0, alloc_all);
  if (pend_all != 0) {  // else active == allocated, whose peak report() gives as active's too
    bump(peaks_.active, 1 + p, alloc_p + counters.pending_bytes[p]);
    bump(peaks_.active, 0, alloc_all + pend_all);
  }
  bump(peaks_.requested, 1 + p, req_p);
  bump(peaks_.requested, 0, req_p + req_q);
  bump(peaks_.allocations, 1 + p, live_p);
  bump(peaks_.allocations, 0, live_p + live_q);
  if (grew) {
    bump(peaks_.reserved, 1 + p, res_p);
    bump(peaks_.reserved, 0, res_all);
    bump(peaks_.segments, 1 + p, counters.segments[p]);
    bump(peaks_.segments, 0, counters.segments[0] + counters.segments[1]);
  }
  bump(peaks_.cached, 1 + p, res_p - alloc_p);
  bump(peaks_.cached, 0, res_all - alloc_all);
  bump(peaks_.inactive_split, 1 + p, split.bytes[p]);
  bump(peaks_.inactive_split, 0, split.bytes[0] + split.bytes[1]);
  bump(peaks_.inactive_split_count, 1 + p, split.count[p]);
  bump(peaks_.inactive_split_count, 0, split.count[0] + split.count[1]);
}

// Inline for the same reason, on every slow-path free. Allocated and
// requested bytes and live allocations went down, reserved bytes and
// segments did not change: none of them can be a new peak (each rises only
// in an allocation, which notes its own candidate).
inline void AllocatorStatistics::note_peaks_free(ThreadCache* tc, PoolId p, const InactiveSplit& split) noexcept {
  if (tc != nullptr && fold_threads_) fold_thread(tc);
  store_hot_bases(p);
  const std::int64_t alloc_p = out_bytes_pool_[p].load(std::memory_order_relaxed) -
                               (tc != nullptr ? tc->cached_bytes[p].get() : 0);
  const std::int64_t alloc_all = out_bytes_total_.load(std::memory_order_relaxed) -
                                 (tc != nullptr ? tc->cached_total() : 0);
  const std::int64_t res_p = counters.reserved[p], res_all = counters.reserved[0] + counters.reserved[1];
  const std::int64_t pend_p = counters.pending_bytes[p];
  const std::int64_t pend_all = counters.pending_bytes[0] + counters.pending_bytes[1];
  auto bump = [](std::int64_t* peak, int i, std::int64_t v) {
    if (v > peak[i]) peak[i] = v;
  };
  bump(peaks_.active, 1 + p, alloc_p + pend_p);
  bump(peaks_.active, 0, alloc_all + pend_all);
  bump(peaks_.cached, 1 + p, res_p - alloc_p);
  bump(peaks_.cached, 0, res_all - alloc_all);
  bump(peaks_.inactive_split, 1 + p, split.bytes[p]);
  bump(peaks_.inactive_split, 0, split.bytes[0] + split.bytes[1]);
  bump(peaks_.inactive_split_count, 1 + p, split.count[p]);
  bump(peaks_.inactive_split_count, 0, split.count[0] + split.count[1]);
}

}  // namespace genesis::memory::detail
