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
// device segments step after step. So the automatic setting starts device
// memory as one pool, where threads still take their repeated sizes from
// their own caches without the lock, and spreads threads over arenas from
// the start only for host and pinned memory, which data-loading threads
// allocate in parallel and where a few extra cached megabytes cost little.
// `arenas:N` asks for N arenas on any memory, threads dealt round-robin.
//
// Note [Threads that contend move out]: one pool for device memory made
// threads that really do allocate at the same time queue on its lock: 8
// threads running `mixed` on an H200 did 0.15x one thread's pairs per
// second (PyTorch's one lock: 0.18x), where the same threads on host memory,
// one arena each, did 5-9x. A training loop's threads rarely allocate at
// the same moment (the program's thread waits while the autograd engine's
// runs the backward pass), and those are the ones whose free memory must be
// shared. So the automatic setting tells the two apart by what the lock
// sees: new threads of device memory all go to arena 0, and a thread whose
// acquisitions of its lock (on allocations that miss its cache) waited for
// another thread in at least a quarter of a window of arena_move_window
// misses moves at its next miss (Arena::move_thread) to the arena with the
// fewest threads among 1..N-1 (as many as arenas auto gives host memory),
// if that one has fewer than arena 0 keeps without it: the last threads to
// contend would otherwise only trade places. A move claims its place
// before it happens (residents_), so two threads moving at once go to
// different arenas; with both in one, their contention would stay and no
// further move could end it. The mover's cache goes back to arena 0's pool
// first; its blocks still out go back there when freed (they name their
// arena). Moving is one way: a thread that stops contending keeps its
// arena. An arena whose threads have all exited holds no cache: what it
// has free goes back to the device then, and each block freed into it
// later goes back as its segment empties. Its threads were independent
// ones, and no new thread may ever come.
// On an H200, 8 threads running `mixed` on device memory then did 6.9-7.1x
// one thread's pairs with fixed work each and 6.7-8.5x in a window (one
// pool: 0.14-0.15x); the arenas do not share, so the run's peak reserved
// was 2.7x one pool's. Threads that take turns, like a training loop's,
// never wait for each other and never move (bench/RESULTS.md, "Allocator
// threads").
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
  /// The most arenas for AllocatorOptions::arenas on memory of `kind` (0,
  /// auto: one per hardware thread, at most kMaxArenas; for device memory one
  /// when threads may not move out, a `move_window` of 0);
  /// InvalidArgumentError above kMaxArenas.
  static std::uint32_t limit_for(std::uint32_t requested, MemoryKind kind, std::uint32_t move_window);
  /// Whether threads are dealt over every arena as they first allocate
  /// (false: all start in arena 0 and move out when they contend, Note
  /// [Threads that contend move out]): everywhere but device memory with
  /// arenas auto.
  static bool deals_all(std::uint32_t requested, MemoryKind kind) noexcept {
    return requested != 0 || kind != MemoryKind::kDevice;
  }

  /// `limit` arenas at most; new threads are dealt over all of them, or
  /// all go to arena 0 unless `deal_all` (then they may move out later).
  ArenaSet(std::uint32_t limit, bool deal_all) : limit_(limit), deal_limit_(deal_all ? limit : 1) {}
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
  /// Whether threads start in arena 0 and may move out (Note [Threads that
  /// contend move out]).
  bool moves() const noexcept { return deal_limit_ == 1 && limit_ > 1; }
  /// Claims a place in the arena other than 0 with the fewest threads, made
  /// or not (the lowest number on a tie), for a thread moving out of arena 0,
  /// and returns its number; `threads`: how many it had. Two threads moving
  /// at once claim different places. unclaim() gives a place back.
  std::uint32_t claim_quietest_other(std::uint32_t* threads) noexcept;
  void unclaim(std::uint32_t k) noexcept { residents_[k].fetch_sub(1, std::memory_order_relaxed); }
  /// A thread came to arena k (dealt, not moved: a move claims) or left it.
  void arrived(std::uint32_t k) noexcept { residents_[k].fetch_add(1, std::memory_order_relaxed); }
  void left(std::uint32_t k) noexcept { residents_[k].fetch_sub(1, std::memory_order_relaxed); }
  /// Arena k, made now (with the root's current options) if need be.
  Arena& made(std::uint32_t k);
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
  const std::uint32_t deal_limit_;  // new threads go to arenas 0..deal_limit_-1
  std::atomic<Arena*> ptrs_[kMaxArenas] = {};
  std::unique_ptr<Arena> made_[kMaxArenas];  // 1..limit-1; guarded by mutex_
  std::mutex mutex_;
  // Written by new threads and by growth in any arena: lines of their own,
  // away from the root arena's slot and generation, which every arena's
  // threads read on every call.
  alignas(64) std::atomic<std::uint32_t> threads_seen_{0};
  // Threads with a cache in each arena, and places claimed by threads moving
  // there (Note [Threads that contend move out]).
  std::atomic<std::uint32_t> residents_[kMaxArenas] = {};
  std::atomic<std::int64_t> reserved_{0};
  alignas(64) RecordingLevels levels_;
};

}  // namespace genesis::memory::detail
