#include "genesis/memory/events.h"

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

namespace detail {

EventRing::EventRing(std::size_t capacity) : slots_(capacity == 0 ? 1 : capacity) {}

void EventRing::lock() const noexcept {
  while (lock_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
}

void EventRing::push(const MemoryEvent& e) noexcept {
  lock();
  slots_[head_ % slots_.size()] = e;
  ++head_;
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
  cleared_at_ = head_;
  unlock();
}

std::uint64_t EventRing::dropped() const noexcept {
  lock();
  const std::uint64_t n = slots_.size();
  std::uint64_t written = head_ - cleared_at_;
  std::uint64_t d = written > n ? written - n : 0;
  unlock();
  return d;
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
