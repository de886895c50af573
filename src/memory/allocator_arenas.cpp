// Caching allocator: arenas, and the public members that span all of them.
//
// Note [Arenas]: with one pool, threads that miss their thread caches at the
// same time serialise on its mutex, and worse, each takes over the cache
// lines of free lists, blocks, segments and counters that another core wrote
// last. On the H100 machine's 16-vCPU host (2026-11-25, bench/RESULTS.md,
// eighth session), 8 threads running `mixed` (43% of pairs miss) took 918-934
// ns per pair together against 108-141 ns for one thread alone: 0.12-0.16x.
// A better lock only moved that to 620-740 (spinning longer, never sleeping).
// The same 8 threads with one allocator each took 17.8-18.2 ns per pair
// together, 6.1-7.8x one thread: the pool's shared data, not the lock's
// algorithm, was the cost.
//
// So an allocator is a family of arenas: arena 0 is the object users hold
// (the root); arenas 1..N-1 are CachingAllocators the root owns, each with
// its own mutex, free index, pointer map, segments, thread caches and
// counters. Threads are dealt out round-robin in the order they first
// allocate, so a single-threaded program only ever has arena 0 and runs
// exactly as a one-pool allocator. A thread of arena k > 0 holds in the
// root's thread-local slot a forwarding entry (ThreadCache::arena) whose
// reclaim flag is always set: the root's hot path sends it to the slow path
// like a cache being reclaimed, at no cost to the root's own threads, and the
// slow path sends it on to arena k, whose own hot path serves it.
//
// What crosses arenas, and how:
//   - a block is freed into the pool of the arena that made it: Block::arena
//     says which, and the hot free path declines other arenas' blocks; a free
//     of a pointer the arena does not know is looked up in the others, each
//     under its own mutex, never two mutexes at once (no lock order, no
//     deadlock);
//   - the memory fraction caps the reserved bytes of all arenas together
//     (family_reserved_); an arena out of memory first releases its own
//     cache, then what the other arenas cache, skipping any whose mutex is
//     taken (try_lock: two arenas out of memory at once must not wait on
//     each other);
//   - the cache size cap is split evenly over the arenas in use;
//   - statistics, snapshots, events and the controls (empty_cache, ...) go
//     over every arena. Current values add up exactly. A peak of the whole is
//     reported as the sum of the arenas' peaks: never below the true peak,
//     and exact while one arena is in use.
//
// Arenas do not share free memory: a block freed into arena 0 cannot serve a
// request of a thread of arena 1, which grows its own pool instead. On
// device memory that is the wrong trade. A training program allocates its
// activations on one thread and runs the backward pass (which frees them
// and allocates gradients) on the autograd engine's thread: with the two in
// different arenas, each step's gradients took new memory while arena 0 held
// the freed activations (simulated device, expandable segments: 1.28x the
// live bytes reserved against 1.02x with one pool). Giving free memory from
// one arena to another on every growth would instead free and re-allocate
// device segments step after step. So the automatic setting keeps device
// memory in one pool, where threads still take their repeated sizes from
// their own caches without the lock, and spreads threads over arenas only
// for host and pinned memory, which data-loading threads allocate in
// parallel and where a few extra cached megabytes cost little. `arenas:N`
// asks for N arenas on any memory.
#include <algorithm>
#include <thread>

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using detail::Block;
using detail::BlockState;
using detail::ThreadCache;

std::uint32_t CachingAllocator::arenas_in_use() const noexcept {
  std::uint32_t n = 0;
  for_each_arena([&](CachingAllocator&) { ++n; });
  return n;
}

CachingAllocator* CachingAllocator::arena_for_new_thread() {
  const std::uint32_t k = threads_seen_.fetch_add(1, std::memory_order_relaxed) % arena_limit_;
  if (k == 0) return this;
  if (CachingAllocator* a = arena_ptrs_[k].load(std::memory_order_acquire); a != nullptr) return a;
  std::lock_guard<std::mutex> guard(arena_mutex_);
  if (!arena_owned_[k]) {
    AllocatorOptions o;
    bool recording = false;
    {
      Lock lock(mutex_);  // options_ changes under it (set_memory_fraction, set_cache_size)
      o = options_;
      recording = recording_.load(std::memory_order_relaxed);
    }
    o.record_events = recording;
    arena_owned_[k].reset(new CachingAllocator(upstream_, o, this, static_cast<std::uint8_t>(k)));
    arena_ptrs_[k].store(arena_owned_[k].get(), std::memory_order_release);
  }
  return arena_owned_[k].get();
}

bool CachingAllocator::release_other_arenas() {
  bool freed = false;
  for_each_arena([&](CachingAllocator& a) {
    if (&a == this || !a.mutex_.try_lock()) return;
    Lock lock(a.mutex_, std::adopt_lock);
    const std::int64_t before = a.counters_.reserved[0] + a.counters_.reserved[1];
    a.process_events();
    a.reclaim_thread_caches(true);
    a.release_free_pages();
    a.release_free_segments(UINT64_MAX, nullptr);
    if (a.counters_.reserved[0] + a.counters_.reserved[1] < before) freed = true;
  });
  return freed;
}

// ---------------------------------------------------------------------------
// Members over every arena

namespace {

void add_stats(MemoryStats& into, const MemoryStats& s) {
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
  into.total_allocated += s.total_allocated;
  into.largest_free_block = std::max(into.largest_free_block, s.largest_free_block);
}

}  // namespace

// Every arena's mutex, taken in arena order: a view of the whole family at
// one instant (a snapshot taken arena by arena could show a segment one
// arena released and another was given at the same address). No one holds an
// arena's mutex while waiting for another's (release_other_arenas only
// tries), so taking them in order cannot deadlock.
CachingAllocator::LockedArenas CachingAllocator::lock_arenas() const {
  LockedArenas view;
  for_each_arena([&](CachingAllocator& a) {
    view.locks.emplace_back(a.mutex_);
    view.arenas.push_back(&a);
  });
  return view;
}

MemoryStats CachingAllocator::stats() const {
  const LockedArenas view = lock_arenas();
  MemoryStats s = stats_locked();
  for (const CachingAllocator* a : view.arenas)
    if (a != this) add_stats(s, a->stats_locked());
  return s;
}

void CachingAllocator::reset_peak_stats() {
  for_each_arena([](CachingAllocator& a) { a.reset_peak_stats_arena(); });
}

void CachingAllocator::reset_memory_stats() {
  for_each_arena([](CachingAllocator& a) { a.reset_memory_stats_arena(); });
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::vector<SegmentInfo> out;
  const LockedArenas view = lock_arenas();
  for (const CachingAllocator* a : view.arenas) {
    std::vector<SegmentInfo> v = a->snapshot_arena();
    out.insert(out.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  }
  if (arena_limit_ > 1)
    std::sort(out.begin(), out.end(), [](const SegmentInfo& x, const SegmentInfo& y) { return x.address < y.address; });
  return out;
}

std::vector<AllocationInfo> CachingAllocator::large_allocations(std::size_t min_size) const {
  std::vector<AllocationInfo> out;
  for_each_arena([&](CachingAllocator& a) {
    std::vector<AllocationInfo> v = a.large_allocations_arena(min_size);
    out.insert(out.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  });
  std::sort(out.begin(), out.end(), [](const AllocationInfo& a, const AllocationInfo& b) {
    return a.size != b.size ? a.size > b.size : a.address < b.address;
  });
  return out;
}

void CachingAllocator::empty_cache() {
  for_each_arena([](CachingAllocator& a) { a.empty_cache_arena(); });
}

std::size_t CachingAllocator::collect_garbage(std::chrono::nanoseconds max_idle) {
  GENESIS_CHECK(max_idle.count() >= 0, "collect_garbage: max_idle must not be negative");
  std::size_t released = 0;
  for_each_arena([&](CachingAllocator& a) { released += a.collect_garbage_arena(max_idle); });
  return released;
}

std::size_t CachingAllocator::compact() {
  std::size_t released = 0;
  for_each_arena([&](CachingAllocator& a) { released += a.compact_arena(); });
  return released;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  GENESIS_CHECK(fraction > 0.0 && fraction <= 1.0, "set_memory_fraction: fraction must be in (0, 1], got ",
                fraction);
  // Under arena_mutex_: an arena created meanwhile copies the root's options
  // either before (and is updated below) or after the change.
  std::lock_guard<std::mutex> guard(root_->arena_mutex_);
  for_each_arena([&](CachingAllocator& a) { a.set_memory_fraction_arena(fraction); });
}

void CachingAllocator::set_cache_size(std::size_t bytes) {
  std::lock_guard<std::mutex> guard(root_->arena_mutex_);
  for_each_arena([&](CachingAllocator& a) { a.set_cache_size_arena(bytes); });
}

void CachingAllocator::set_event_recording(bool on) {
  std::lock_guard<std::mutex> guard(root_->arena_mutex_);
  for_each_arena([&](CachingAllocator& a) { a.set_event_recording_arena(on); });
}

std::vector<MemoryEvent> CachingAllocator::events() const {
  std::vector<MemoryEvent> out;
  for_each_arena([&](CachingAllocator& a) { a.events_arena(out); });
  std::stable_sort(out.begin(), out.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.time_ns < b.time_ns; });
  return out;
}

void CachingAllocator::clear_events() {
  for_each_arena([](CachingAllocator& a) { a.clear_events_arena(); });
}

EventTotals CachingAllocator::event_totals() const {
  EventTotals out;
  std::uint64_t lost = 0;
  for_each_arena([&](CachingAllocator& a) { a.event_totals_arena(out, lost); });
  return out;
}

RecordingMark CachingAllocator::mark_recording() {
  RecordingMark m;
  m.time_ns = detail::now_ns();
  m.totals = event_totals();
  root_->levels_.mark(m);
  return m;
}

RecordingSummary CachingAllocator::recording_since(const RecordingMark& mark) const {
  RecordingSummary out;
  EventTotals now;
  for_each_arena([&](CachingAllocator& a) { a.event_totals_arena(now, out.lost_until_ns); });
  root_->levels_.since(mark, out);
  out.totals = now.since(mark.totals);
  return out;
}

void CachingAllocator::release_mark(const RecordingMark& mark) { root_->levels_.release(mark); }

}  // namespace genesis::memory
