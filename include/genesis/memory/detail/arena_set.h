// The arenas of one caching allocator: how threads are dealt to them, and
// what they share.
//
// Note [Arenas]: with one pool, threads that miss their thread caches at the
// same time serialise on its mutex, and worse, each takes over the cache
// lines of free lists, blocks, segments and counters that another core wrote
// last. On a 16-vCPU GPU host, 8 threads running `mixed` (43% of pairs miss)
// together ran several times slower per pair than one thread alone, and a
// better lock changed little; the same 8 threads with one allocator each
// scaled about 6-8x (see bench/RESULTS.md): the pool's shared data, not the
// lock's algorithm, was the cost.
//
// So an allocator is a family of arenas (Arena): arena 0 belongs to the
// object users hold (CachingAllocator); arenas 1..N-1 are made by this set
// when a thread is first dealt to them, each with its own mutex, free index,
// pointer map, segments, thread caches and counters. Threads are dealt out
// round-robin in the order they first allocate, so a single-threaded program
// only ever has arena 0 and runs exactly as a one-pool allocator. A thread of
// arena k > 0 finds its cache in the allocator's thread-local slot like any
// other (ThreadCache::owner names its arena): the allocator's hot path runs
// on arena 0 for threads of arena 0 and on the owner for the others (Note
// [Arena dispatch] in caching_allocator.h).
//
// What crosses arenas, and how:
//   - a block is freed into the pool of the arena that made it: Block::arena
//     says which, and the hot free path declines other arenas' blocks; a free
//     of a pointer the arena does not know is looked up in the others, each
//     under its own mutex, never two mutexes at once (no lock order, no
//     deadlock);
//   - the memory fraction caps the reserved bytes of all arenas together
//     (reserved()); an arena out of memory first releases its own cache,
//     then what the other arenas cache, skipping any whose mutex is taken
//     (try_lock: two arenas out of memory at once must not wait on each
//     other);
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
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "genesis/memory/detail/arena.h"
#include "genesis/memory/events.h"

namespace genesis::memory {
struct AllocatorFork;
}

namespace genesis::memory::detail {

class ArenaSet {
 public:
  /// Most arenas one allocator spreads threads over.
  static constexpr std::uint32_t kMaxArenas = 8;
  /// The number of arenas for AllocatorOptions::arenas on memory of `kind`
  /// (0, auto: one for device memory, else one per hardware thread, at most
  /// kMaxArenas); InvalidArgumentError above kMaxArenas.
  static std::uint32_t limit_for(std::uint32_t requested, MemoryKind kind);

  explicit ArenaSet(std::uint32_t limit) : limit_(limit) {}
  /// Destroys the arenas it made (arena 0 is the allocator's).
  ~ArenaSet();
  ArenaSet(const ArenaSet&) = delete;
  ArenaSet& operator=(const ArenaSet&) = delete;

  /// Arena 0, the allocator's own; set once, before any thread is dealt.
  void set_root(Arena* root) noexcept { ptrs_[0].store(root, std::memory_order_release); }
  Arena* root() const noexcept { return ptrs_[0].load(std::memory_order_relaxed); }
  std::uint32_t limit() const noexcept { return limit_; }
  /// Arena k, or null if not made yet.
  Arena* get(std::uint32_t k) const noexcept { return ptrs_[k].load(std::memory_order_acquire); }
  /// Calls f(Arena&) for the root and every arena made so far, in order.
  template <class F>
  void for_each(F&& f) const {
    for (std::uint32_t i = 0; i < limit_; ++i)
      if (Arena* a = ptrs_[i].load(std::memory_order_acquire); a != nullptr) f(*a);
  }
  std::uint32_t in_use() const noexcept;
  /// The arena of a thread that allocates for the first time: round-robin,
  /// made (with the root's current options) when first dealt.
  Arena& deal();
  /// Destroys the arenas made here; the allocator's destructor calls it
  /// before its own arena goes.
  void destroy_made();

  /// Every arena's mutex, held for the life of the view; `arenas` lists
  /// exactly the arenas locked. Walk those, never for_each: an arena made
  /// after the locks were taken is not locked, and its first segment may be
  /// half linked (a snapshot saw a segment with no blocks that way).
  struct Locked {
    std::vector<Arena*> arenas;
    std::vector<Arena::Lock> locks;
  };
  Locked lock_all() const;
  /// Calls f(block) for the live allocation that starts at `addr`, under the
  /// mutex of the arena holding it; the arenas are asked one at a time, each
  /// under its own mutex (another arena's map may be rebuilt, and its old
  /// table freed, at any moment outside it). False, f not called: no arena
  /// has it.
  template <class F>
  bool with_live_block(std::uintptr_t addr, F&& f) const {
    bool found = false;
    for_each([&](Arena& a) {
      if (found) return;
      Arena::Lock lock(a.mutex_);
      Block* b = a.pool_.map().find(addr);
      if (b != nullptr && b->load_state() == BlockState::kAllocated) {
        found = true;
        f(*b);
      }
    });
    return found;
  }

  /// Taken while arenas are made and while options change over every arena,
  /// so that a new arena copies the options either before or after a change.
  std::mutex& mutex() noexcept { return mutex_; }
  /// Reserved bytes of all arenas together: the memory fraction caps this.
  std::atomic<std::int64_t>& reserved() noexcept { return reserved_; }
  /// The recorded levels of every arena (Note [Exact sessions]).
  RecordingLevels& levels() noexcept { return levels_; }
  const RecordingLevels& levels() const noexcept { return levels_; }

 private:
  friend struct genesis::memory::AllocatorFork;
  const std::uint32_t limit_;
  std::atomic<Arena*> ptrs_[kMaxArenas] = {};
  std::unique_ptr<Arena> made_[kMaxArenas];  // 1..limit-1; guarded by mutex_
  std::mutex mutex_;
  // Written by new threads and by growth in any arena: lines of their own,
  // away from the root arena's slot and generation, which every arena's
  // threads read on every call.
  alignas(64) std::atomic<std::uint32_t> threads_seen_{0};
  std::atomic<std::int64_t> reserved_{0};
  alignas(64) RecordingLevels levels_;
};

}  // namespace genesis::memory::detail
