// Allocation event history.
//
// Note [Event history]: when recording is on, every allocation and free, every
// segment the allocator takes from or gives back to its upstream, and every
// out-of-memory error becomes one MemoryEvent. Each thread writes into its own
// ring (a short spin lock that only readers contend for), so recording never
// serialises the threads of a program; reads merge the rings by time. The same
// record is what the replay tool and the exported traces use. A ring keeps a
// thread's newest events only: the history is a window, and Note [Exact
// sessions] says what is exact however long a session runs.
//
// Note [Exact sessions]: profiling and leak checks must be exact in sessions
// of any length, so none of their common answers is read from the window:
//   - totals (counts, bytes, hits, times) are monotone sums that every ring
//     keeps of all it was ever given (EventTotals; clear_events() and
//     overwriting leave them): a session subtracts the reading at its start
//     from the reading at its end;
//   - levels (allocated and reserved bytes as the recorded events move them)
//     and their peaks are kept by RecordingLevels, one per allocator: a
//     session's peak is the highest level since its mark (mark_recording()),
//     so sessions that overlap each see their own peak;
//   - a live block carries the time of its allocation when recording was on
//     (AllocationInfo::alloc_time_ns), so a leak check is "live blocks made
//     since the session began", with no history at all.
// What remains window-bound is the event list itself and the timeline drawn
// from it: RecordingSummary::lost_until_ns says up to when events may be
// missing, and the Python reports carry a `truncated` flag and warn.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
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
  /// The block's address; for an OOM, the bytes the device still had free
  /// (upstream mem_info at the failure, PyTorch's device_free).
  std::uintptr_t address = 0;
  std::uint64_t size = 0;        ///< requested bytes (alloc/free/oom) or segment bytes
  std::uint64_t block_size = 0;  ///< rounded block size (alloc/free)
  StreamId stream = 0;
  /// alloc: nanoseconds spent inside the allocator; free: the block's lifetime.
  std::uint64_t duration_ns = 0;
  std::uint32_t thread = 0;      ///< small per-process thread number
  EventAction action = EventAction::kAlloc;
  bool cache_hit = false;        ///< alloc served without a new segment
  /// The thread's allocation context at the call (ScopedAllocationContext,
  /// a Python site: "file:line in function" lines, innermost first), for
  /// alloc, free and oom; null when none was set. Interned: it lives as long
  /// as the process. Last, so that positional initialisers of the fields
  /// above keep their meaning.
  const char* site = nullptr;
};

inline constexpr int kNumEventActions = 5;

/// Sums over recorded events (Note [Exact sessions]). Kept monotone: the
/// difference of two readings is what was recorded in between.
struct EventTotals {
  std::uint64_t count[kNumEventActions] = {};        ///< events, by EventAction
  std::uint64_t bytes[kNumEventActions] = {};        ///< sum of `size`, by action
  std::uint64_t block_bytes[kNumEventActions] = {};  ///< sum of `block_size`, by action
  std::uint64_t cache_hits = 0;   ///< allocations with cache_hit
  std::uint64_t alloc_ns = 0;     ///< sum of allocation durations
  std::uint64_t lifetime_ns = 0;  ///< sum of the lifetimes of freed blocks whose lifetime is known
  std::uint64_t lifetimes = 0;    ///< frees with a known lifetime (duration_ns != 0)

  void add(const MemoryEvent& e) noexcept;
  EventTotals& operator+=(const EventTotals& o) noexcept;
  /// This minus an earlier reading `o`.
  EventTotals since(const EventTotals& o) const noexcept;
  std::uint64_t events() const noexcept;
  std::uint64_t of(EventAction a) const noexcept { return count[static_cast<int>(a)]; }
};

/// A session's start: CachingAllocator::mark_recording(). Pass it back to
/// recording_since() and, when done, to release_mark().
struct RecordingMark {
  std::uint64_t id = 0;          ///< epoch of RecordingLevels
  std::uint64_t time_ns = 0;     ///< when the mark was taken
  EventTotals totals;            ///< totals at the mark
  std::int64_t allocated = 0;    ///< recorded levels at the mark
  std::int64_t reserved = 0;
};

/// What was recorded since a mark; exact however many events the rings
/// overwrote meanwhile (Note [Exact sessions]).
struct RecordingSummary {
  EventTotals totals;
  std::int64_t allocated_change = 0;   ///< allocated bytes now minus at the mark (block sizes)
  std::int64_t reserved_change = 0;    ///< segment bytes now minus at the mark
  std::int64_t peak_allocated_rise = 0;  ///< highest allocated level since the mark, minus the mark's (>= 0)
  std::int64_t peak_reserved_rise = 0;
  std::uint64_t largest_alloc = 0;     ///< largest requested size since the mark
  /// Events stamped at or before this time may be missing from events()
  /// (overwritten, or cleared); 0 when none was ever lost.
  std::uint64_t lost_until_ns = 0;
};

namespace detail {

/// A fixed-capacity ring of events written by one thread. Oldest events are
/// overwritten; `dropped()` counts them. Totals of every event pushed are kept
/// apart from the ring (Note [Exact sessions]).
class EventRing {
 public:
  explicit EventRing(std::size_t capacity);
  void push(const MemoryEvent& e) noexcept;
  /// Appends the ring's events, oldest first, to `out`.
  void copy_to(std::vector<MemoryEvent>& out) const;
  void clear() noexcept;
  std::uint64_t dropped() const noexcept;
  /// Adds the totals of every event ever pushed to `out`.
  void add_totals_to(EventTotals& out) const noexcept;
  /// Time of the newest event overwritten or cleared (0: none).
  std::uint64_t lost_until_ns() const noexcept;

 private:
  void lock() const noexcept;
  void unlock() const noexcept { lock_.clear(std::memory_order_release); }

  mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::vector<MemoryEvent> slots_;
  std::uint64_t head_ = 0;  // total events pushed; slot = head_ % capacity
  std::uint64_t cleared_at_ = 0;
  std::uint64_t lost_until_ns_ = 0;  // >= time of every event no longer readable
  EventTotals totals_;               // of all head_ events pushed
};

/// Allocated and reserved bytes as the recorded events move them, with their
/// peaks per epoch (Note [Exact sessions]). One per allocator (the root's);
/// written by every recording thread: relaxed atomics, whose modification
/// order is the order the peaks are taken in. Only recording pays for it.
class RecordingLevels {
 public:
  void note(const MemoryEvent& e) noexcept;
  /// Closes the current epoch and opens one that starts at the present
  /// levels; returns the new epoch's number (filled into `m`).
  void mark(RecordingMark& m);
  /// Levels and peaks since the mark (totals and lost_until_ns are the
  /// caller's).
  void since(const RecordingMark& m, RecordingSummary& out) const;
  void release(const RecordingMark& m);

 private:
  static void raise(std::atomic<std::int64_t>& peak, std::int64_t v) noexcept {
    std::int64_t p = peak.load(std::memory_order_relaxed);
    while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
    }
  }
  struct Epoch {
    std::int64_t peak_allocated, peak_reserved, largest;
  };
  std::atomic<std::int64_t> allocated_{0}, reserved_{0};
  // Of the current epoch: invariant peak_x_ >= x_ at the epoch's start.
  std::atomic<std::int64_t> peak_allocated_{0}, peak_reserved_{0}, largest_{0};
  mutable std::mutex mutex_;  // guards the members below
  std::deque<Epoch> closed_;  // epochs first_epoch_ .. current - 1
  std::uint64_t first_epoch_ = 0;
  std::multiset<std::uint64_t> held_;  // epochs marks still refer to
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
