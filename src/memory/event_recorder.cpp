// The event history of one arena: Note [Event history] and Note [Exact
// sessions] in genesis/memory/events.h.
#include "genesis/memory/detail/event_recorder.h"

#include <algorithm>

namespace genesis::memory::detail {

namespace {

void give_ring(ThreadCache& tc, std::size_t capacity) {
  if (tc.ring_owner) return;
  tc.ring_owner = std::make_unique<EventRing>(capacity);
  tc.ring.store(tc.ring_owner.get(), std::memory_order_release);
}

}  // namespace

EventRecorder::EventRecorder(bool on, std::size_t capacity_per_thread) : on_(on), capacity_(capacity_per_thread) {
  if (on) shared_ = std::make_unique<EventRing>(capacity_);
}

EventRecorder::~EventRecorder() = default;

void EventRecorder::set(bool on, const std::vector<ThreadCache*>& caches) {
  if (on) {
    for (ThreadCache* tc : caches) give_ring(*tc, capacity_);
    if (!shared_) shared_ = std::make_unique<EventRing>(capacity_);
    if (!on_.load(std::memory_order_relaxed)) since_ns_.store(now_ns(), std::memory_order_relaxed);
  }
  on_.store(on, std::memory_order_release);
}

void EventRecorder::attach(ThreadCache& tc) {
  if (on_.load(std::memory_order_relaxed)) give_ring(tc, capacity_);
}

void EventRecorder::retire(ThreadCache& tc) {
  if (tc.ring_owner) retired_.push_back(std::move(tc.ring_owner));
}

void EventRecorder::record(ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
                           std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit) {
  MemoryEvent e;
  e.time_ns = now_ns();
  e.action = action;
  e.address = addr;
  e.size = size;
  e.block_size = block_size;
  e.stream = stream;
  e.duration_ns = duration;
  e.cache_hit = hit;
  e.thread = this_thread_number();
  if (action == EventAction::kAlloc || action == EventAction::kFree || action == EventAction::kOOM)
    e.site = tls_allocation_context;
  EventRing* ring = tc != nullptr ? tc->ring.load(std::memory_order_acquire) : nullptr;
  // The shared ring is safe: the caller holds the arena's mutex.
  if (ring == nullptr) ring = shared_.get();
  if (ring == nullptr) return;
  ring->push(e);
  levels_->note(e);
}

std::uint64_t EventRecorder::lifetime(const Block& b) const noexcept {
  const std::uint64_t born = b.alloc_time_ns.load(std::memory_order_relaxed);
  return born >= since_ns_.load(std::memory_order_relaxed) && born != 0 ? now_ns() - born : 0;
}

void EventRecorder::record_hot_alloc(ThreadCache* tc, Block* b, std::size_t bytes) noexcept {
  MemoryEvent e;
  e.time_ns = now_ns();
  // Stamped even without a ring: leak checks rely on it (Note [Exact sessions]).
  b->alloc_time_ns.store(e.time_ns, std::memory_order_relaxed);
  EventRing* ring = tc->ring.load(std::memory_order_acquire);
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
  levels_->note(e);
}

void EventRecorder::record_hot_free(ThreadCache* tc, const Block* b) noexcept {
  EventRing* ring = tc->ring.load(std::memory_order_acquire);
  if (ring == nullptr) return;
  MemoryEvent e;
  e.time_ns = now_ns();
  e.action = EventAction::kFree;
  e.address = b->addr;
  e.size = b->get_requested();
  e.block_size = b->size;
  e.stream = b->stream;
  // A block allocated before recording started has no (or a stale) time.
  const std::uint64_t born = b->alloc_time_ns.load(std::memory_order_relaxed);
  e.duration_ns = born >= since_ns_.load(std::memory_order_relaxed) && e.time_ns > born ? e.time_ns - born : 0;
  e.thread = tc->thread_number;
  e.site = tls_allocation_context;
  ring->push(e);
  levels_->note(e);
}

void EventRecorder::copy_events(const std::vector<ThreadCache*>& caches, std::vector<MemoryEvent>& out) const {
  for (const ThreadCache* tc : caches)
    if (tc->ring_owner) tc->ring_owner->copy_to(out);
  for (const auto& r : retired_) r->copy_to(out);
  if (shared_) shared_->copy_to(out);
}

void EventRecorder::clear(const std::vector<ThreadCache*>& caches) {
  for (ThreadCache* tc : caches)
    if (tc->ring_owner) tc->ring_owner->clear();
  // Their totals outlive them (Note [Exact sessions]).
  for (const auto& r : retired_) {
    r->add_totals_to(cleared_totals_);
    r->clear();
    cleared_lost_until_ns_ = std::max(cleared_lost_until_ns_, r->lost_until_ns());
  }
  retired_.clear();
  if (shared_) shared_->clear();
}

void EventRecorder::add_totals(const std::vector<ThreadCache*>& caches, EventTotals& out,
                               std::uint64_t& lost_until_ns) const {
  auto add = [&](const EventRing& r) {
    r.add_totals_to(out);
    lost_until_ns = std::max(lost_until_ns, r.lost_until_ns());
  };
  for (const ThreadCache* tc : caches)
    if (tc->ring_owner) add(*tc->ring_owner);
  for (const auto& r : retired_) add(*r);
  if (shared_) add(*shared_);
  out += cleared_totals_;
  lost_until_ns = std::max(lost_until_ns, cleared_lost_until_ns_);
}

}  // namespace genesis::memory::detail
