// The event history of one arena of the caching allocator (Note [Event
// history] in genesis/memory/events.h): whether recording is on, the rings
// events go into, and the totals that outlive them (Note [Exact sessions]).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "genesis/memory/detail/block.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/events.h"

namespace genesis::memory::detail {

// Rings: each thread cache owns one (ThreadCache::ring_owner) while
// recording is or was on; threads without a cache, and the pool's own
// events (segments, OOM), use the shared ring under the arena's mutex.
// Members other than on() and the hot path's two are called with the arena's
// mutex held.
class EventRecorder {
 public:
  EventRecorder(bool on, std::size_t capacity_per_thread);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  /// The allocator's levels (one for every arena: Note [Exact sessions]);
  /// set before the first event.
  void set_levels(RecordingLevels* levels) noexcept { levels_ = levels; }

  /// Read by the hot path on every call: one relaxed load.
  bool on() const noexcept { return on_.load(std::memory_order_relaxed); }

  /// Hot path, owner thread: an allocation served from tc's cache (b
  /// stamped with its time even without a ring, for leak checks), a free
  /// into it.
  void record_hot_alloc(ThreadCache* tc, Block* b, std::size_t bytes) noexcept;
  void record_hot_free(ThreadCache* tc, const Block* b) noexcept;

  /// One event of the slow path; tc null (or without a ring): the shared ring.
  void record(ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
              std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit);
  /// How long the block being freed lived, if it was made while recording
  /// was on (else 0: its time is stale).
  std::uint64_t lifetime(const Block& b) const noexcept;

  /// Switches recording; on gives every cache in `caches` a ring.
  void set(bool on, const std::vector<ThreadCache*>& caches);
  /// A new thread cache: its ring, if recording is on.
  void attach(ThreadCache& tc);
  /// tc's thread exits: its ring stays readable.
  void retire(ThreadCache& tc);

  /// Appends the events still in the rings (unordered).
  void copy_events(const std::vector<ThreadCache*>& caches, std::vector<MemoryEvent>& out) const;
  /// Forgets the events; totals stay (Note [Exact sessions]).
  void clear(const std::vector<ThreadCache*>& caches);
  /// Adds the totals of every event recorded so far; raises lost_until_ns
  /// to the newest event that is no longer in a ring.
  void add_totals(const std::vector<ThreadCache*>& caches, EventTotals& out, std::uint64_t& lost_until_ns) const;

 private:
  std::atomic<bool> on_;
  RecordingLevels* levels_ = nullptr;
  const std::size_t capacity_;
  std::atomic<std::uint64_t> since_ns_{0};  // lifetimes only for blocks allocated after this
  std::unique_ptr<EventRing> shared_;       // made when recording starts
  std::vector<std::unique_ptr<EventRing>> retired_;  // of exited threads
  EventTotals cleared_totals_;              // of retired rings that clear() dropped
  std::uint64_t cleared_lost_until_ns_ = 0;  // newest event those rings held
};

}  // namespace genesis::memory::detail
