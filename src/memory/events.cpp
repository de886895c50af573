#include "genesis/memory/events.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <time.h>

namespace genesis::memory {

std::string_view event_action_name(EventAction a) noexcept {
  switch (a) {
    case EventAction::kAlloc: return "alloc";
    case EventAction::kFree: return "free_requested";
    case EventAction::kSegmentAlloc: return "segment_alloc";
    case EventAction::kSegmentFree: return "segment_free";
    case EventAction::kOOM: return "oom";
  }
  return "unknown";
}

void EventTotals::add(const MemoryEvent& e) noexcept {
  const int a = static_cast<int>(e.action);
  ++count[a];
  bytes[a] += e.size;
  block_bytes[a] += e.block_size;
  if (e.action == EventAction::kAlloc) {
    cache_hits += e.cache_hit ? 1 : 0;
    alloc_ns += e.duration_ns;
  } else if (e.action == EventAction::kFree && e.duration_ns != 0) {
    lifetime_ns += e.duration_ns;
    ++lifetimes;
  }
}

EventTotals& EventTotals::operator+=(const EventTotals& o) noexcept {
  for (int a = 0; a < kNumEventActions; ++a) {
    count[a] += o.count[a];
    bytes[a] += o.bytes[a];
    block_bytes[a] += o.block_bytes[a];
  }
  cache_hits += o.cache_hits;
  alloc_ns += o.alloc_ns;
  lifetime_ns += o.lifetime_ns;
  lifetimes += o.lifetimes;
  return *this;
}

EventTotals EventTotals::since(const EventTotals& o) const noexcept {
  EventTotals d;
  for (int a = 0; a < kNumEventActions; ++a) {
    d.count[a] = count[a] - o.count[a];
    d.bytes[a] = bytes[a] - o.bytes[a];
    d.block_bytes[a] = block_bytes[a] - o.block_bytes[a];
  }
  d.cache_hits = cache_hits - o.cache_hits;
  d.alloc_ns = alloc_ns - o.alloc_ns;
  d.lifetime_ns = lifetime_ns - o.lifetime_ns;
  d.lifetimes = lifetimes - o.lifetimes;
  return d;
}

std::uint64_t EventTotals::events() const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t c : count) n += c;
  return n;
}

namespace detail {

EventRing::EventRing(std::size_t capacity) : slots_(capacity == 0 ? 1 : capacity) {}

void EventRing::lock() const noexcept {
  while (lock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
}

void EventRing::push(const MemoryEvent& e) noexcept {
  lock();
  MemoryEvent& slot = slots_[head_ % slots_.size()];
  if (head_ >= slots_.size() && slot.time_ns > lost_until_ns_) lost_until_ns_ = slot.time_ns;
  slot = e;
  ++head_;
  totals_.add(e);
  unlock();
}

void EventRing::copy_to(std::vector<MemoryEvent>& out) const {
  lock();
  const std::uint64_t n = slots_.size();
  std::uint64_t first = head_ > n ? head_ - n : 0;
  if (first < cleared_at_) first = cleared_at_;
  for (std::uint64_t i = first; i < head_; ++i) out.push_back(slots_[i % n]);
  unlock();
}

void EventRing::clear() noexcept {
  lock();
  if (head_ > cleared_at_) {
    const MemoryEvent& newest = slots_[(head_ - 1) % slots_.size()];
    if (newest.time_ns > lost_until_ns_) lost_until_ns_ = newest.time_ns;
  }
  cleared_at_ = head_;
  unlock();
}

void EventRing::add_totals_to(EventTotals& out) const noexcept {
  lock();
  out += totals_;
  unlock();
}

std::uint64_t EventRing::lost_until_ns() const noexcept {
  lock();
  const std::uint64_t t = lost_until_ns_;
  unlock();
  return t;
}

std::uint64_t EventRing::dropped() const noexcept {
  lock();
  const std::uint64_t n = slots_.size();
  std::uint64_t written = head_ - cleared_at_;
  std::uint64_t d = written > n ? written - n : 0;
  unlock();
  return d;
}

void RecordingLevels::note(const MemoryEvent& e) noexcept {
  const auto block = static_cast<std::int64_t>(e.block_size);
  switch (e.action) {
    case EventAction::kAlloc:
      raise(peak_allocated_, allocated_.fetch_add(block, std::memory_order_relaxed) + block);
      raise(largest_, static_cast<std::int64_t>(e.size));
      break;
    case EventAction::kFree: allocated_.fetch_sub(block, std::memory_order_relaxed); break;
    case EventAction::kSegmentAlloc: {
      const auto bytes = static_cast<std::int64_t>(e.size);
      raise(peak_reserved_, reserved_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
      break;
    }
    case EventAction::kSegmentFree:
      reserved_.fetch_sub(static_cast<std::int64_t>(e.size), std::memory_order_relaxed);
      break;
    case EventAction::kOOM: break;
  }
}

void RecordingLevels::mark(RecordingMark& m) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t a = allocated_.load(std::memory_order_relaxed);
  const std::int64_t r = reserved_.load(std::memory_order_relaxed);
  // The epoch closes with its peaks; the new one starts at the present
  // levels. An event between the two reads lands in either: it happened at
  // the moment of the mark.
  closed_.push_back({peak_allocated_.exchange(a, std::memory_order_relaxed),
                     peak_reserved_.exchange(r, std::memory_order_relaxed),
                     largest_.exchange(0, std::memory_order_relaxed)});
  raise(peak_allocated_, allocated_.load(std::memory_order_relaxed));
  raise(peak_reserved_, reserved_.load(std::memory_order_relaxed));
  m.id = first_epoch_ + closed_.size();
  m.allocated = a;
  m.reserved = r;
  held_.insert(m.id);
}

void RecordingLevels::since(const RecordingMark& m, RecordingSummary& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::int64_t pa = peak_allocated_.load(std::memory_order_relaxed);
  std::int64_t pr = peak_reserved_.load(std::memory_order_relaxed);
  std::int64_t largest = largest_.load(std::memory_order_relaxed);
  for (std::uint64_t i = m.id > first_epoch_ ? m.id - first_epoch_ : 0; i < closed_.size(); ++i) {
    pa = std::max(pa, closed_[i].peak_allocated);
    pr = std::max(pr, closed_[i].peak_reserved);
    largest = std::max(largest, closed_[i].largest);
  }
  out.allocated_change = allocated_.load(std::memory_order_relaxed) - m.allocated;
  out.reserved_change = reserved_.load(std::memory_order_relaxed) - m.reserved;
  out.peak_allocated_rise = std::max<std::int64_t>(0, pa - m.allocated);
  out.peak_reserved_rise = std::max<std::int64_t>(0, pr - m.reserved);
  out.largest_alloc = static_cast<std::uint64_t>(largest);
}

void RecordingLevels::release(const RecordingMark& m) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = held_.find(m.id); it != held_.end()) held_.erase(it);
  // Epochs older than every held mark are read by no one.
  const std::uint64_t keep_from = held_.empty() ? first_epoch_ + closed_.size() : *held_.begin();
  while (first_epoch_ < keep_from && !closed_.empty()) {
    closed_.pop_front();
    ++first_epoch_;
  }
}

std::uint32_t this_thread_number() noexcept {
  static std::atomic<std::uint32_t> next{1};
  thread_local std::uint32_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::uint64_t coarse_now_ns() noexcept {
#if defined(CLOCK_MONOTONIC_COARSE)
  // steady_clock is CLOCK_MONOTONIC on Linux: the coarse variant shares its
  // origin, so values compare with now_ns() (lagging by at most a tick).
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
#endif
  return now_ns();
}

}  // namespace detail
}  // namespace genesis::memory
