// Caching allocator: releasing memory (empty_cache, garbage collection, cache
// and fraction caps, warm-up), out-of-memory reports, and the arena's part of
// the event history (detail/event_recorder.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "genesis/core/bytes.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using detail::Block;
using detail::BlockState;
using detail::Segment;
using detail::ThreadCache;

// Out of memory in this arena: what the other arenas cache goes back too
// (Note [Arenas]).
bool detail::Arena::release_other_arenas() {
  bool freed = false;
  set_->for_each([&](Arena& a) {
    if (&a == this || !a.mutex_.try_lock()) return;
    Lock lock(a.mutex_, std::adopt_lock);
    const std::int64_t before = a.stats_.reserved_total();
    a.process_events();
    a.reclaim_thread_caches(true);
    a.expandable_.release_free_pages(a);
    a.release_free_segments(UINT64_MAX, nullptr);
    if (a.stats_.reserved_total() < before) freed = true;
  });
  return freed;
}

void detail::Arena::release_segment(Segment* seg) {
  pool_.remove_segment(seg);
  stats_.note_segment_released(seg->pool);
  if (seg->expandable) {
    expandable_.unmap_range(*this, seg, 0, seg->mapped_limit);
    upstream_->release_address_range(seg->addr, seg->size);
    expandable_.forget(seg);
    delete seg;
    return;
  }
  add_reserved(seg->pool, -static_cast<std::int64_t>(seg->size));
  stats_.counters.reserved_freed[seg->pool] += static_cast<std::int64_t>(seg->size);
  ++stats_.counters.num_upstream_frees;
  if (events_.on())
    record_event(nullptr, EventAction::kSegmentFree, seg->addr, seg->size, seg->size, seg->stream, 0, false);
  upstream_->deallocate(reinterpret_cast<void*>(seg->addr), seg->size);
  delete seg;
}

void detail::Arena::release_free_segments(std::uint64_t idle_before_ns, std::size_t* released,
                                             bool keep_expandable) {
  if (options_.keep_segments) return;  // a graph pool: replays may write into free segments
  for (Segment* seg = pool_.segments(); seg != nullptr;) {
    Segment* next = seg->next_seg;
    if (seg->wholly_free() && seg->last_used_ns <= idle_before_ns &&
        !(keep_expandable && seg->expandable)) {
      if (released != nullptr) *released += seg->expandable ? seg->mapped_bytes : seg->size;
      release_segment(seg);
    }
    seg = next;
  }
  if (pool_.map().has_retired()) synchronize_readers();
}

void detail::Arena::empty_cache_arena() {
  Lock lock(mutex_);
  ++stats_.counters.num_cache_flushes;
  wait_all_pending();
  reclaim_thread_caches(true);
  expandable_.release_free_pages(*this);
  release_free_segments(UINT64_MAX, nullptr);
}

std::size_t detail::Arena::compact_arena() {
  Lock lock(mutex_);
  wait_all_pending();
  reclaim_thread_caches(true);
  std::size_t released = expandable_.release_free_pages(*this);
  std::size_t whole = 0;
  release_free_segments(UINT64_MAX, &whole, /*keep_expandable=*/true);
  return released + whole;
}

std::size_t detail::Arena::collect_garbage_arena(std::chrono::nanoseconds max_idle) {
  Lock lock(mutex_);
  ++stats_.counters.num_cache_flushes;  // a release of cached memory, as empty_cache's
  process_events();
  reclaim_thread_caches(true);
  const std::uint64_t now = detail::coarse_now_ns();
  const auto idle = static_cast<std::uint64_t>(max_idle.count());
  std::size_t released = 0;
  release_free_segments(now >= idle ? now - idle : 0, &released);
  released += expandable_.release_idle_pages(*this, now >= idle ? now - idle : 0);
  return released;
}

void detail::Arena::set_memory_fraction_arena(double fraction) {
  Lock lock(mutex_);
  options_.memory_fraction = fraction;
  total_capacity_ = upstream_->mem_info().total_bytes;
  memory_limit_ = fraction >= 1.0 || total_capacity_ == 0
                      ? SIZE_MAX
                      // At least a byte: a cap of 0 would read as "none" in MemoryStats.
                      : std::max<std::size_t>(1, static_cast<std::size_t>(fraction * static_cast<double>(total_capacity_)));
}

std::size_t CachingAllocator::memory_limit() const {
  detail::Arena::Lock lock(arena0_.mutex_);
  return arena0_.memory_limit_;
}

void detail::Arena::set_cache_size_arena(std::size_t bytes) {
  Lock lock(mutex_);
  options_.cache_size_limit = bytes;
  std::size_t tc_limit = options_.thread_cache_bytes;
  if (tc_limit == 0) {
    tc_limit = std::size_t{2} << 30;
    if (total_capacity_ > 0) tc_limit = std::min(tc_limit, total_capacity_ / 32);
  }
  if (bytes != SIZE_MAX) tc_limit = std::min(tc_limit, bytes / 4);
  tc_byte_limit_.store(tc_limit, std::memory_order_relaxed);
  enforce_cache_limit();
}

void CachingAllocator::set_cache_size(std::string_view size) {
  // "none" as in GENESIS_ALLOC_CONF's cache_size: no cap.
  if (size == "none" || size == "None" || size == "unlimited") return set_cache_size(SIZE_MAX);
  set_cache_size(parse_bytes(size));
}

void detail::Arena::enforce_cache_limit() {
  if (options_.cache_size_limit == SIZE_MAX || options_.keep_segments) return;
  auto cached = [&]() {
    const std::int64_t reserved = stats_.reserved_total();
    const std::int64_t allocated = stats_.out_total() - thread_cached_total_locked();
    return reserved - allocated;
  };
  // Each arena keeps its even share of the cap (Note [Arenas]).
  const auto limit = static_cast<std::int64_t>(options_.cache_size_limit / (arena_limit_ > 1 ? set_->in_use() : 1));
  if (cached() <= limit) return;
  // Release whole free segments, least recently used first.
  auto release_lru = [&]() {
    std::vector<Segment*> candidates;
    for (Segment* s = pool_.segments(); s != nullptr; s = s->next_seg)
      if (s->wholly_free()) candidates.push_back(s);
    std::sort(candidates.begin(), candidates.end(),
              [](const Segment* a, const Segment* b) { return a->last_used_ns < b->last_used_ns; });
    for (Segment* s : candidates) {
      if (cached() <= limit) break;
      release_segment(s);
    }
  };
  release_lru();
  if (cached() > limit) {
    reclaim_thread_caches(true);
    release_lru();
  }
  if (pool_.map().has_retired()) synchronize_readers();
}

void CachingAllocator::warmup(const std::vector<std::pair<std::size_t, int>>& sizes, StreamId stream) {
  // Every block is held until all are allocated, so the total must fit in
  // the device (and under memory_fraction's cap): a request that cannot
  // fails here, before allocating anything, instead of after minutes of
  // allocations (or "reserving" more than the host has in untouched pages).
  std::size_t total = 0;
  for (const auto& [size, count] : sizes) {
    GENESIS_CHECK(size > 0 && count >= 0, "warmup: sizes must be positive and counts non-negative, got (", size,
                  ", ", count, ")");
    const std::size_t rounded = size <= detail::kMaxRequest ? detail::round_size(size) : size;
    const auto n = static_cast<std::size_t>(count);
    const bool overflows = n != 0 && rounded > (SIZE_MAX - total) / n;
    total = overflows ? SIZE_MAX : total + rounded * n;
  }
  const std::size_t device_total = upstream().mem_info().total_bytes;  // 0: unknown
  const std::size_t limit = memory_limit();
  const std::size_t capacity = std::min(device_total != 0 ? device_total : SIZE_MAX, limit);
  if (total > capacity) {
    using genesis::detail::format_bytes;
    const std::string amount = total == SIZE_MAX ? std::string("more than 2^64 bytes")
                                                 : format_bytes(total) + " (" + std::to_string(total) + " bytes)";
    const bool capped = limit < device_total || device_total == 0;
    GENESIS_THROW(InvalidArgumentError, "warmup: the blocks asked for total ", amount, ", more than ",
                  capped ? "the memory_fraction cap of " : "the total memory of ", upstream().name(), ", ",
                  format_bytes(capacity), " (", capacity, " bytes); warm up fewer or smaller blocks");
  }
  std::vector<Block*> blocks;
  try {
    for (const auto& [size, count] : sizes) {
      for (int i = 0; i < count; ++i) blocks.push_back(allocate_block(size, stream));
    }
  } catch (...) {
    for (Block* b : blocks) free_block(b);
    throw;
  }
  for (Block* b : blocks) free_block(b);
}

void detail::Arena::throw_oom(std::size_t bytes, StreamId stream, const std::string& why) {
  ++stats_.counters.num_ooms;
  const MemInfo info = upstream_->mem_info();
  // An OOM event's address is the memory the device still had free (what
  // PyTorch's traces call device_free): it has no address of its own.
  if (events_.on())
    record_event(nullptr, EventAction::kOOM, info.free_bytes, bytes, detail::round_size(bytes), stream, 0, false);
  const MemoryStats s = stats_locked();
  using genesis::detail::format_address;
  using genesis::detail::format_bytes;
  const auto allocated = static_cast<unsigned long long>(s.allocated_bytes[kStatAggregate].current);
  const auto reserved = static_cast<unsigned long long>(s.reserved_bytes[kStatAggregate].current);
  std::string msg;
  msg += upstream_->is_cuda() ? "CUDA OOM: " : "Out of memory (" + upstream_->name() + "): ";
  msg += "tried to allocate " + format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) on " +
         upstream_->name();
  if (stream != 0) msg += " stream " + format_address(stream);
  msg += "; " + why + ".\n";
  msg += "  Device: " + format_bytes(info.total_bytes) + " total, " + format_bytes(info.free_bytes) + " free.\n";
  // One decimal: to_string(x).substr(0, 4) printed "100.%" for 100% and
  // "9.50%" below 10%.
  char frag[16];
  std::snprintf(frag, sizeof frag, "%.1f", s.fragmentation_ratio() * 100.0);
  msg += "  Genesis: " + format_bytes(allocated) + " allocated, " + format_bytes(reserved) + " reserved, " +
         format_bytes(reserved - std::min(reserved, allocated)) + " cached; largest free cached block " +
         format_bytes(s.largest_free_block) + "; fragmentation " + frag + "%.\n";
  if (memory_limit_ != SIZE_MAX) {
    // Significant digits, not decimals: a fraction of 0.0004 is not "0.00".
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.4g", options_.memory_fraction);
    msg += std::string("  Limit: memory_fraction ") + fraction + " caps reserved at " + format_bytes(memory_limit_) +
           ".\n";
  }
  msg += "  Try: free tensors you no longer need (del in Python, dropping the last reference in C++) or reduce the batch size";
  if (memory_limit_ != SIZE_MAX) msg += "; raise set_memory_fraction()";
  if (reserved > allocated && s.largest_free_block < bytes)
    msg += "; the cache is fragmented (free memory in pieces smaller than the request): allocate large, "
           "long-lived buffers first, or call empty_cache() between phases";
  if (bytes > info.total_bytes) {
    msg += "; the request is larger than the device's total memory, so split the work into smaller pieces";
  } else if (info.free_bytes < bytes && static_cast<unsigned long long>(info.total_bytes - info.free_bytes) > reserved) {
    msg += "; other processes (or other allocators) hold " +
           format_bytes(info.total_bytes - info.free_bytes - std::min<unsigned long long>(reserved, info.total_bytes - info.free_bytes)) +
           " on this device";
  }
  msg += ".";
  genesis::detail::throw_out_of_memory(__FILE__, __LINE__, msg);
}

// ---------------------------------------------------------------------------
// Event recording (Note [Event history])

void detail::Arena::set_event_recording_arena(bool on) {
  Lock lock(mutex_);
  events_.set(on, caches_);
}

void detail::Arena::events_arena(std::vector<MemoryEvent>& out) const {
  Lock lock(mutex_);
  events_.copy_events(caches_, out);
}

void detail::Arena::clear_events_arena() {
  Lock lock(mutex_);
  events_.clear(caches_);
}

void detail::Arena::event_totals_arena(EventTotals& out, std::uint64_t& lost_until_ns) const {
  Lock lock(mutex_);
  events_.add_totals(caches_, out, lost_until_ns);
}

}  // namespace genesis::memory
