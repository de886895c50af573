// Caching allocator: releasing memory (empty_cache, garbage collection, cache
// and fraction caps, warm-up), out-of-memory reports and event recording.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "genesis/core/bytes.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using detail::Block;
using detail::BlockState;
using detail::Segment;
using detail::ThreadCache;

void CachingAllocator::release_segment(Segment* seg) {
  Block* b = seg->first;
  index_erase(b);
  map_.erase(b->addr);
  delete_block(b);
  if (seg->prev_seg != nullptr) seg->prev_seg->next_seg = seg->next_seg;
  else segments_ = seg->next_seg;
  if (seg->next_seg != nullptr) seg->next_seg->prev_seg = seg->prev_seg;
  --counters_.segments[seg->pool];
  if (seg->expandable) {
    unmap_range(seg, 0, seg->mapped_limit);
    upstream_->release_address_range(seg->addr, seg->size);
    expandable_segments_.erase(std::remove(expandable_segments_.begin(), expandable_segments_.end(), seg),
                               expandable_segments_.end());
    delete seg;
    return;
  }
  add_reserved(seg->pool, -static_cast<std::int64_t>(seg->size));
  counters_.reserved_freed[seg->pool] += static_cast<std::int64_t>(seg->size);
  ++counters_.num_upstream_frees;
  if (recording_.load(std::memory_order_relaxed))
    record_event(nullptr, EventAction::kSegmentFree, seg->addr, seg->size, seg->size, seg->stream, 0, false);
  upstream_->deallocate(reinterpret_cast<void*>(seg->addr), seg->size);
  delete seg;
}

void CachingAllocator::release_free_segments(std::uint64_t idle_before_ns, std::size_t* released,
                                             bool keep_expandable) {
  for (Segment* seg = segments_; seg != nullptr;) {
    Segment* next = seg->next_seg;
    Block* b = seg->first;
    if (b->next == nullptr && b->load_state() == BlockState::kFree && seg->last_used_ns <= idle_before_ns &&
        !(keep_expandable && seg->expandable)) {
      if (released != nullptr) *released += seg->expandable ? seg->mapped_bytes : seg->size;
      release_segment(seg);
    }
    seg = next;
  }
  if (map_.has_retired()) synchronize_readers();
}

void CachingAllocator::empty_cache_arena() {
  Lock lock(mutex_);
  ++counters_.num_cache_flushes;
  wait_all_pending();
  reclaim_thread_caches(true);
  release_free_pages();
  release_free_segments(UINT64_MAX, nullptr);
}

std::size_t CachingAllocator::collect_garbage_arena(std::chrono::nanoseconds max_idle) {
  Lock lock(mutex_);
  process_events();
  reclaim_thread_caches(true);
  const std::uint64_t now = detail::coarse_now_ns();
  const auto idle = static_cast<std::uint64_t>(max_idle.count());
  std::size_t released = 0;
  release_free_segments(now >= idle ? now - idle : 0, &released);
  // Expandable segments rarely become wholly free; their idle cache is the
  // free pages inside, released when the segment has been idle long enough.
  for (Segment* seg : std::vector<Segment*>(expandable_segments_)) {
    if (seg->last_used_ns > (now >= idle ? now - idle : 0)) continue;
    free_[seg->pool].for_each([&](Block* b) {
      if (b->segment != seg) return;
      std::size_t first = page_ceil(b->addr - seg->addr);
      std::size_t end = std::min(seg->mapped_limit, page_floor(b->addr + b->size - seg->addr));
      if (first >= end) return;
      whole_chunks(seg, first, end);
      if (first < end) released += unmap_range(seg, first, end);
    });
  }
  return released;
}

void CachingAllocator::set_memory_fraction_arena(double fraction) {
  Lock lock(mutex_);
  options_.memory_fraction = fraction;
  total_capacity_ = upstream_->mem_info().total_bytes;
  memory_limit_ = fraction >= 1.0 || total_capacity_ == 0
                      ? SIZE_MAX
                      : static_cast<std::size_t>(fraction * static_cast<double>(total_capacity_));
}

std::size_t CachingAllocator::memory_limit() const {
  Lock lock(mutex_);
  return memory_limit_;
}

void CachingAllocator::set_cache_size_arena(std::size_t bytes) {
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

void CachingAllocator::set_cache_size(std::string_view size) { set_cache_size(parse_bytes(size)); }

void CachingAllocator::enforce_cache_limit() {
  if (options_.cache_size_limit == SIZE_MAX) return;
  auto cached = [&]() {
    const std::int64_t reserved = counters_.reserved[0] + counters_.reserved[1];
    const std::int64_t allocated = out_bytes_total_.load(std::memory_order_relaxed) - thread_cached_total_locked();
    return reserved - allocated;
  };
  // Each arena keeps its even share of the cap (Note [Arenas]).
  const auto limit = static_cast<std::int64_t>(options_.cache_size_limit / (arena_limit_ > 1 ? root_->arenas_in_use() : 1));
  if (cached() <= limit) return;
  // Release whole free segments, least recently used first.
  auto release_lru = [&]() {
    std::vector<Segment*> candidates;
    for (Segment* s = segments_; s != nullptr; s = s->next_seg)
      if (s->first->next == nullptr && s->first->load_state() == BlockState::kFree) candidates.push_back(s);
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
  if (map_.has_retired()) synchronize_readers();
}

void CachingAllocator::warmup(const std::vector<std::pair<std::size_t, int>>& sizes, StreamId stream) {
  std::vector<Block*> blocks;
  try {
    for (const auto& [size, count] : sizes) {
      GENESIS_CHECK(size > 0 && count >= 0, "warmup: sizes must be positive and counts non-negative, got (",
                    size, ", ", count, ")");
      for (int i = 0; i < count; ++i) blocks.push_back(allocate_block(size, stream));
    }
  } catch (...) {
    for (Block* b : blocks) free_block(b);
    throw;
  }
  for (Block* b : blocks) free_block(b);
}

void CachingAllocator::throw_oom(std::size_t bytes, StreamId stream, const std::string& why) {
  ++counters_.num_ooms;
  const MemInfo info = upstream_->mem_info();
  // An OOM event's address is the memory the device still had free (what
  // PyTorch's traces call device_free): it has no address of its own.
  if (recording_.load(std::memory_order_relaxed))
    record_event(nullptr, EventAction::kOOM, info.free_bytes, bytes, detail::round_size(bytes), stream, 0, false);
  const MemoryStats s = stats_locked();
  using genesis::detail::format_bytes;
  const auto allocated = static_cast<unsigned long long>(s.allocated_bytes[kStatAggregate].current);
  const auto reserved = static_cast<unsigned long long>(s.reserved_bytes[kStatAggregate].current);
  std::string msg;
  msg += upstream_->is_cuda() ? "CUDA OOM: " : "Out of memory (" + upstream_->name() + "): ";
  msg += "tried to allocate " + format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) on " +
         upstream_->name();
  if (stream != 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, stream);
    msg += " stream " + std::string(buf);
  }
  msg += "; " + why + ".\n";
  msg += "  Device: " + format_bytes(info.total_bytes) + " total, " + format_bytes(info.free_bytes) + " free.\n";
  // One decimal: to_string(x).substr(0, 4) printed "100.%" for 100% and
  // "9.50%" below 10%.
  char frag[16];
  std::snprintf(frag, sizeof frag, "%.1f", s.fragmentation_ratio() * 100.0);
  msg += "  Genesis: " + format_bytes(allocated) + " allocated, " + format_bytes(reserved) + " reserved, " +
         format_bytes(reserved - std::min(reserved, allocated)) + " cached; largest free cached block " +
         format_bytes(s.largest_free_block) + "; fragmentation " + frag + "%.\n";
  if (memory_limit_ != SIZE_MAX)
    msg += "  Limit: memory_fraction " + std::to_string(options_.memory_fraction).substr(0, 4) + " caps reserved at " +
           format_bytes(memory_limit_) + ".\n";
  msg += "  Try: free tensors you no longer need (del) or reduce the batch size";
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

void CachingAllocator::set_event_recording_arena(bool on) {
  Lock lock(mutex_);
  if (on) {
    for (ThreadCache* tc : caches_) {
      if (!tc->ring_owner) {
        tc->ring_owner = std::make_unique<detail::EventRing>(options_.event_capacity_per_thread);
        tc->ring.store(tc->ring_owner.get(), std::memory_order_release);
      }
    }
  }
  if (on && !shared_ring_) shared_ring_ = std::make_unique<detail::EventRing>(options_.event_capacity_per_thread);
  if (on && !recording_.load(std::memory_order_relaxed)) recording_since_ns_.store(detail::now_ns(), std::memory_order_relaxed);
  recording_.store(on, std::memory_order_release);
}

void CachingAllocator::record_event(ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
                                    std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit) {
  MemoryEvent e;
  e.time_ns = detail::now_ns();
  e.action = action;
  e.address = addr;
  e.size = size;
  e.block_size = block_size;
  e.stream = stream;
  e.duration_ns = duration;
  e.cache_hit = hit;
  e.thread = detail::this_thread_number();
  if (action == EventAction::kAlloc || action == EventAction::kFree || action == EventAction::kOOM)
    e.site = detail::tls_allocation_context;
  detail::EventRing* ring = tc != nullptr ? tc->ring.load(std::memory_order_acquire) : nullptr;
  // Called with the mutex held when ring is null, so the shared ring is safe.
  if (ring == nullptr) ring = shared_ring_.get();  // under the mutex (see callers)
  if (ring == nullptr) return;
  ring->push(e);
  root_->levels_.note(e);
}

void CachingAllocator::record_event_hot_alloc(ThreadCache* tc, Block* b, std::size_t bytes) noexcept {
  MemoryEvent e;
  e.time_ns = detail::now_ns();
  // Stamped even without a ring: leak checks rely on it (Note [Exact sessions]).
  b->alloc_time_ns.store(e.time_ns, std::memory_order_relaxed);
  detail::EventRing* ring = tc->ring.load(std::memory_order_acquire);
  if (ring == nullptr) return;  // recording switched on a moment ago
  e.action = EventAction::kAlloc;
  e.address = b->addr;
  e.size = bytes;
  e.block_size = b->size;
  e.stream = b->stream;
  e.cache_hit = true;
  e.thread = tc->thread_number;
  e.site = b->get_location();
  ring->push(e);
  root_->levels_.note(e);
}

void CachingAllocator::record_event_hot_free(ThreadCache* tc, Block* b) noexcept {
  detail::EventRing* ring = tc->ring.load(std::memory_order_acquire);
  if (ring == nullptr) return;
  MemoryEvent e;
  e.time_ns = detail::now_ns();
  e.action = EventAction::kFree;
  e.address = b->addr;
  e.size = b->get_requested();
  e.block_size = b->size;
  e.stream = b->stream;
  // A block allocated before recording started has no (or a stale) time.
  const std::uint64_t born = b->alloc_time_ns.load(std::memory_order_relaxed);
  e.duration_ns = born >= recording_since_ns_.load(std::memory_order_relaxed) && e.time_ns > born ? e.time_ns - born : 0;
  e.thread = tc->thread_number;
  e.site = detail::tls_allocation_context;
  ring->push(e);
  root_->levels_.note(e);
}

void CachingAllocator::events_arena(std::vector<MemoryEvent>& out) const {
  Lock lock(mutex_);
  for (const ThreadCache* tc : caches_)
    if (tc->ring_owner) tc->ring_owner->copy_to(out);
  for (const auto& r : retired_rings_) r->copy_to(out);
  if (shared_ring_) shared_ring_->copy_to(out);
}

void CachingAllocator::clear_events_arena() {
  Lock lock(mutex_);
  for (ThreadCache* tc : caches_)
    if (tc->ring_owner) tc->ring_owner->clear();
  // Their totals outlive them (Note [Exact sessions]).
  for (const auto& r : retired_rings_) {
    r->add_totals_to(cleared_totals_);
    r->clear();
    cleared_lost_until_ns_ = std::max(cleared_lost_until_ns_, r->lost_until_ns());
  }
  retired_rings_.clear();
  if (shared_ring_) shared_ring_->clear();
}

void CachingAllocator::event_totals_arena(EventTotals& out, std::uint64_t& lost_until_ns) const {
  Lock lock(mutex_);
  auto add = [&](const detail::EventRing& r) {
    r.add_totals_to(out);
    lost_until_ns = std::max(lost_until_ns, r.lost_until_ns());
  };
  for (const ThreadCache* tc : caches_)
    if (tc->ring_owner) add(*tc->ring_owner);
  for (const auto& r : retired_rings_) add(*r);
  if (shared_ring_) add(*shared_ring_);
  out += cleared_totals_;
  lost_until_ns = std::max(lost_until_ns, cleared_lost_until_ns_);
}

}  // namespace genesis::memory
