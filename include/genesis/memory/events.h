// Allocation event history (SPEC M8).
//
// Note [Event history]: when recording is on, every allocation and free, every
// segment the allocator takes from or gives back to its upstream, and every
// out-of-memory error becomes one MemoryEvent. Each thread writes into its own
// ring (a short spin lock that only readers contend for), so recording never
// serialises the threads of a program; reads merge the rings by time. The same
// record is what the replay tool and the exported traces use (STYLE 11).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "genesis/memory/upstream.h"

namespace genesis::memory {

enum class EventAction : std::uint8_t {
  kAlloc = 0,        ///< a user allocation
  kFree = 1,         ///< a user free (free_requested in traces)
  kSegmentAlloc = 2, ///< a segment taken from the upstream
  kSegmentFree = 3,  ///< a segment returned to the upstream
  kOOM = 4,          ///< an allocation that failed with out of memory
};

/// The trace-format name of an action: "alloc", "free_requested",
/// "segment_alloc", "segment_free", "oom".
std::string_view event_action_name(EventAction a) noexcept;

struct MemoryEvent {
  std::uint64_t time_ns = 0;     ///< steady-clock time stamp
  std::uintptr_t address = 0;
  std::uint64_t size = 0;        ///< requested bytes (alloc/free/oom) or segment bytes
  std::uint64_t block_size = 0;  ///< rounded block size (alloc/free)
  StreamId stream = 0;
  /// alloc: nanoseconds spent inside the allocator; free: the block's lifetime.
  std::uint64_t duration_ns = 0;
  std::uint32_t thread = 0;      ///< small per-process thread number
  EventAction action = EventAction::kAlloc;
  bool cache_hit = false;        ///< alloc served without a new segment
};

namespace detail {

/// A fixed-capacity ring of events written by one thread. Oldest events are
/// overwritten; `dropped()` counts them.
class EventRing {
 public:
  explicit EventRing(std::size_t capacity);
  void push(const MemoryEvent& e) noexcept;
  /// Appends the ring's events, oldest first, to `out`.
  void copy_to(std::vector<MemoryEvent>& out) const;
  void clear() noexcept;
  std::uint64_t dropped() const noexcept;

 private:
  void lock() const noexcept;
  void unlock() const noexcept { lock_.clear(std::memory_order_release); }

  mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::vector<MemoryEvent> slots_;
  std::uint64_t head_ = 0;  // total events pushed; slot = head_ % capacity
  std::uint64_t cleared_at_ = 0;
};

/// Small sequential number of the calling thread (1, 2, ...).
std::uint32_t this_thread_number() noexcept;

/// Nanoseconds of the steady clock.
std::uint64_t now_ns() noexcept;

/// The same clock read coarsely (a few ms resolution, a few ns to read): for
/// idle times of cached segments, which garbage collection compares in
/// seconds, on the allocator's slow path where a full clock read would cost
/// a tenth of the call.
std::uint64_t coarse_now_ns() noexcept;

}  // namespace detail
}  // namespace genesis::memory
