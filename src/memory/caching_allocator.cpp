// Caching allocator: the object users hold (its arenas, construction, the
// public members that span every arena).
//
// Arenas: Note [Arenas] in genesis/memory/detail/arena_set.h.
#include <algorithm>
#include <string>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/detail/allocator_registry.h"
#include "genesis/memory/detail/idle_release.h"

namespace genesis::memory {

using genesis::detail::format_address;
using detail::Block;
using detail::BlockState;
using detail::ThreadCache;

// ---------------------------------------------------------------------------
// Construction

CachingAllocator::CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options)
    : arena0_(std::move(upstream), options, 0),
      arenas_(detail::ArenaSet::limit_for(options.arenas, arena0_.upstream_->kind(), options.arena_move_window),
              detail::ArenaSet::deals_all(options.arenas, arena0_.upstream_->kind())) {
  arenas_.set_root(&arena0_);
  arena0_.join(arenas_);
  arena0_.generation_ = detail::AllocatorRegistry::instance().attach(this, &arena0_.slot_);
  if (options.idle_release_ms != 0) detail::watch_idle(this, std::chrono::milliseconds(options.idle_release_ms));
}

CachingAllocator::~CachingAllocator() {
  if (arena0_.options_.idle_release_ms != 0) detail::unwatch_idle(this);  // first: no release may race the rest
  // After detach no exiting thread touches our caches (the registry lock
  // orders us after any retire in progress).
  detail::AllocatorRegistry::instance().detach(arena0_.slot_, arena0_.generation_);
  // The other arenas first, each returning its own segments; arena 0 then
  // goes with this object.
  arenas_.destroy_made();
}

void CachingAllocator::retire_thread_cache(detail::ThreadCache* tc) { tc->owner->retire_thread_cache(tc); }

std::uint32_t CachingAllocator::arenas_in_use() const noexcept { return arenas_.in_use(); }

// ---------------------------------------------------------------------------
// One allocation, wherever it lives

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  GENESIS_CHECK(ptr != nullptr, "record_stream: pointer is null");
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const bool live = arenas_.with_live_block(addr, [&](Block& b) {
    if (stream == b.stream) return;  // its own stream orders the work already
    // Validate the stream now (an event on it must be recordable at free
    // time): an unusable stream is an error here, not a block that can never
    // be freed.
    arena0_.upstream_->release_event(arena0_.upstream_->record_event(stream));
    if (b.stream_uses == nullptr) b.stream_uses = new std::vector<StreamId>();
    if (std::find(b.stream_uses->begin(), b.stream_uses->end(), stream) == b.stream_uses->end())
      b.stream_uses->push_back(stream);
  });
  GENESIS_CHECK(live, "record_stream: ", format_address(addr), " is not a live allocation of allocator '", arena0_.upstream_->name(),
                "'");
}

void* CachingAllocator::allocate_at(void* ptr, std::size_t size, std::size_t requested) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  detail::Block* b = nullptr;
  arenas_.for_each([&](detail::Arena& a) {
    if (b == nullptr) b = a.allocate_at_arena(addr, size, requested);
  });
  GENESIS_CHECK(b != nullptr, "allocate_at: no segment of this allocator holds ", format_address(addr));
  return b->ptr();
}

bool CachingAllocator::owns(const void* ptr) const noexcept {
  return arenas_.with_live_block(reinterpret_cast<std::uintptr_t>(ptr), [](Block&) {});
}

std::size_t CachingAllocator::allocation_size(const void* ptr) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  std::size_t size = 0;
  GENESIS_CHECK(arenas_.with_live_block(addr, [&](const Block& b) { size = b.size; }), "allocation_size: ", format_address(addr),
                " is not a live allocation of allocator '", arena0_.upstream_->name(), "'");
  return size;
}

// ---------------------------------------------------------------------------
// Members over every arena

MemoryStats CachingAllocator::stats() const {
  const detail::ArenaSet::Locked view = arenas_.lock_all();
  MemoryStats s = arena0_.stats_locked();
  for (const detail::Arena* a : view.arenas)
    if (a != &arena0_) detail::AllocatorStatistics::add(s, a->stats_locked());
  return s;
}

void CachingAllocator::reset_peak_stats() {
  arenas_.for_each([](detail::Arena& a) { a.reset_peak_stats_arena(); });
}

void CachingAllocator::reset_memory_stats() {
  arenas_.for_each([](detail::Arena& a) { a.reset_memory_stats_arena(); });
}

void CachingAllocator::reset_accumulated_stats() {
  arenas_.for_each([](detail::Arena& a) { a.reset_memory_stats_arena(/*peaks=*/false); });
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::vector<SegmentInfo> out;
  const detail::ArenaSet::Locked view = arenas_.lock_all();
  for (const detail::Arena* a : view.arenas) {
    std::vector<SegmentInfo> v = a->snapshot_arena();
    out.insert(out.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  }
  if (arenas_.limit() > 1)
    std::sort(out.begin(), out.end(), [](const SegmentInfo& x, const SegmentInfo& y) { return x.address < y.address; });
  return out;
}

std::vector<AllocationInfo> CachingAllocator::large_allocations(std::size_t min_size) const {
  std::vector<AllocationInfo> out;
  arenas_.for_each([&](detail::Arena& a) {
    std::vector<AllocationInfo> v = a.large_allocations_arena(min_size);
    out.insert(out.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  });
  std::sort(out.begin(), out.end(), [](const AllocationInfo& a, const AllocationInfo& b) {
    return a.size != b.size ? a.size > b.size : a.address < b.address;
  });
  return out;
}

void CachingAllocator::empty_cache() {
  arenas_.for_each([](detail::Arena& a) { a.empty_cache_arena(); });
}

std::size_t CachingAllocator::collect_garbage(std::chrono::nanoseconds max_idle) {
  GENESIS_CHECK(max_idle.count() >= 0, "collect_garbage: max_idle must not be negative");
  std::size_t released = 0;
  arenas_.for_each([&](detail::Arena& a) { released += a.collect_garbage_arena(max_idle); });
  return released;
}

std::size_t CachingAllocator::compact() {
  std::size_t released = 0;
  arenas_.for_each([&](detail::Arena& a) { released += a.compact_arena(); });
  return released;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  GENESIS_CHECK(fraction > 0.0 && fraction <= 1.0, "set_memory_fraction: fraction must be in (0, 1], got ",
                fraction);
  // Under arena_mutex_: an arena created meanwhile copies the root's options
  // either before (and is updated below) or after the change.
  std::lock_guard<std::mutex> guard(arenas_.mutex());
  arenas_.for_each([&](detail::Arena& a) { a.set_memory_fraction_arena(fraction); });
}

void CachingAllocator::set_cache_size(std::size_t bytes) {
  std::lock_guard<std::mutex> guard(arenas_.mutex());
  arenas_.for_each([&](detail::Arena& a) { a.set_cache_size_arena(bytes); });
}

void CachingAllocator::set_event_recording(bool on) {
  std::lock_guard<std::mutex> guard(arenas_.mutex());
  arenas_.for_each([&](detail::Arena& a) { a.set_event_recording_arena(on); });
}

std::vector<MemoryEvent> CachingAllocator::events() const {
  std::vector<MemoryEvent> out;
  arenas_.for_each([&](detail::Arena& a) { a.events_arena(out); });
  std::stable_sort(out.begin(), out.end(),
                   [](const MemoryEvent& a, const MemoryEvent& b) { return a.time_ns < b.time_ns; });
  return out;
}

void CachingAllocator::clear_events() {
  arenas_.for_each([](detail::Arena& a) { a.clear_events_arena(); });
}

EventTotals CachingAllocator::event_totals() const {
  EventTotals out;
  std::uint64_t lost = 0;
  arenas_.for_each([&](detail::Arena& a) { a.event_totals_arena(out, lost); });
  return out;
}

RecordingMark CachingAllocator::mark_recording() {
  RecordingMark m;
  m.time_ns = detail::now_ns();
  m.totals = event_totals();
  arenas_.levels().mark(m);
  return m;
}

RecordingSummary CachingAllocator::recording_since(const RecordingMark& mark) const {
  RecordingSummary out;
  EventTotals now;
  arenas_.for_each([&](detail::Arena& a) { a.event_totals_arena(now, out.lost_until_ns); });
  arenas_.levels().since(mark, out);
  out.totals = now.since(mark.totals);
  return out;
}

void CachingAllocator::release_mark(const RecordingMark& mark) { arenas_.levels().release(mark); }

}  // namespace genesis::memory
