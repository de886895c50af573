// The watcher that gives idle allocators' caches back
// (genesis/memory/detail/idle_release.h).
//
// Note [Releasing when idle]: PyTorch's caching allocator and
// cudaMallocAsync's pool keep what they cached until the program asks
// (empty_cache, a trim): a server between bursts of requests holds its peak
// while it does nothing, and no other process on the GPU can have it. With
// idle_release an allocator gives its cached memory back once it has made no
// allocation for that long. One thread per process, started with the first
// watched allocator and never joined (it sleeps on a condition variable),
// looks at every watched allocator four times per idle period. "Idle" is
// read from the folded counts of allocations and frees: when neither has
// moved for the whole period and memory is cached, collect_garbage(0)
// releases it, the threads' caches included, so a thread asleep with blocks
// in its cache does not keep them. Frees count as activity because they make
// the cache: a program that computes for longer than the period while
// holding its blocks, then frees them and goes quiet, must lose that cache
// one period after its last free, not keep it until its next allocation
// (the release its quiet compute brought found nothing to give). Once
// released, nothing more happens until the next allocation or free starts a
// new period. The hot path pays nothing. The watcher
// holds its lock while it releases, so an allocator's destructor
// (unwatch_idle) waits for a release of it in progress instead of racing it;
// the lock ranks before the allocators' (Note [Fork]). A fork()ed child has
// no watcher thread; the next allocator watched there starts one.
#include "genesis/memory/detail/idle_release.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "genesis/core/fork.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Watched {
  CachingAllocator* allocator;
  std::chrono::milliseconds idle;
  std::int64_t activity;  // allocations + frees when they last moved
  Clock::time_point since;  // when it last moved
  bool released;         // released since it last moved
};

struct Watcher {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Watched> watched;  // guarded by mutex
  bool running = false;          // a thread serves this process (guarded by mutex)
  bool exiting = false;          // the process is exiting: release nothing more (guarded by mutex)
};

// Leaked: the thread may outlive static destruction.
Watcher& watcher() {
  static auto* w = new Watcher;
  return *w;
}

// The shortest idle period over four, within [1 ms, 1 s]: how often to look.
std::chrono::milliseconds period_locked(const Watcher& w) {
  auto p = std::chrono::milliseconds(1000);
  for (const Watched& x : w.watched) p = std::min(p, x.idle / 4);
  return std::max(p, std::chrono::milliseconds(1));
}

void run(Watcher& w) {
  std::unique_lock<std::mutex> lock(w.mutex);
  for (;;) {
    w.wake.wait_for(lock, period_locked(w));
    if (w.exiting) return;
    const Clock::time_point now = Clock::now();
    for (Watched& x : w.watched) {
      const MemoryStats s = x.allocator->stats();
      const std::int64_t activity = s.num_allocs + s.num_frees;
      if (activity != x.activity) {
        x.activity = activity;
        x.since = now;
        x.released = false;
        continue;
      }
      const bool cached = s.reserved_bytes[kStatAggregate].current > s.allocated_bytes[kStatAggregate].current;
      if (!x.released && now - x.since >= x.idle && cached) {
        x.allocator->collect_garbage(std::chrono::nanoseconds(0));
        x.released = true;
      }
    }
  }
}

// At exit the runtimes an allocator's upstream needs (CUDA's) may be torn
// down while the watcher would release into them: from here on it does
// nothing. Registered when the first allocator is watched, so it runs before
// the teardown of whatever was made before that.
void stop_at_exit() {
  Watcher& w = watcher();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.exiting = true;
  w.wake.notify_one();
}

void prepare() { watcher().mutex.lock(); }
void parent() { watcher().mutex.unlock(); }
void child() {
  Watcher& w = watcher();
  w.running = false;  // the parent's thread is not here, nor its wait:
  new (&w.wake) std::condition_variable();  // a fresh one (the old is leaked, never destroyed)
  w.mutex.unlock();
}

constexpr ForkHandlers kForkHandlers{&prepare, &parent, &child};
[[maybe_unused]] const bool kForkRegistered =
    (register_fork_handlers(ForkRank::kIdleRelease, &kForkHandlers), true);

}  // namespace

void watch_idle(CachingAllocator* a, std::chrono::milliseconds idle) {
  Watcher& w = watcher();
  static const bool registered = (std::atexit(&stop_at_exit), true);
  (void)registered;
  std::lock_guard<std::mutex> lock(w.mutex);
  w.watched.push_back(Watched{a, idle, -1, Clock::now(), false});
  if (!w.running && !w.exiting) {
    try {
      std::thread(run, std::ref(w)).detach();
      w.running = true;
    } catch (const std::system_error& e) {
      // No thread, no release when idle; the allocator works on.
      w.watched.pop_back();
      std::fprintf(stderr, "genesis: idle_release is off: the watcher thread could not start (%s)\n", e.what());
      return;
    }
  }
  w.wake.notify_one();  // a shorter period may apply now
}

void unwatch_idle(CachingAllocator* a) noexcept {
  Watcher& w = watcher();
  std::lock_guard<std::mutex> lock(w.mutex);
  std::erase_if(w.watched, [a](const Watched& x) { return x.allocator == a; });
}

}  // namespace genesis::memory::detail
