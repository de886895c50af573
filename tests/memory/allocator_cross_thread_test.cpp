// Memory freed by one thread and needed by another (Note [Cross-thread frees]
// in detail/arena.h, Note [Arenas] in detail/arena_set.h): a thread
// cache takes back only what it handed out, holds a bounded number of large
// blocks, and device memory stays in one pool by default, so that a program
// whose threads free each other's memory (a training loop: activations made
// by the program's thread, freed by the autograd thread) reserves no more
// than one thread would.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// A second thread that lives across steps, like the autograd engine's: it
// runs each job it is given, one at a time, while the caller waits.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !job_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || job_; });
      if (stop_) return;
      lock.unlock();
      job_();
      lock.lock();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

TEST(CrossThread, AFreeByAnotherThreadGoesToThePool) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  const std::vector<std::size_t> sizes = {512, 4096, 100 * KiB, 1 * MiB, 3 * MiB, 24 * MiB};
  std::vector<void*> ptrs;
  for (std::size_t s : sizes) ptrs.push_back(a.allocate(s));
  const std::int64_t upstream_allocs = a.stats().num_upstream_allocs;
  on_thread([&] {
    for (void* p : ptrs) a.deallocate(p);
    EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 0u) << "another thread's block was cached";
  });
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  // The allocating thread gets the same memory back without growing.
  for (std::size_t s2 : sizes) a.deallocate(a.allocate(s2));
  EXPECT_EQ(a.stats().num_upstream_allocs, upstream_allocs);
  EXPECT_EQ(sim->num_misuses(), 0u);
}

TEST(CrossThread, AFreeByTheAllocatingThreadIsStillCached) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  void* p = a.allocate(4096);
  a.deallocate(p);
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 1u);
  const std::int64_t hits = a.stats().num_thread_cache_hits;
  EXPECT_EQ(a.allocate(4096), p);
  EXPECT_EQ(a.stats().num_thread_cache_hits, hits + 1);
  a.deallocate(p);
}

// A block freed through free_block by another thread is not cached either.
TEST(CrossThread, BlockApiFollowsTheSameRule) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  std::vector<CachingAllocator::Block*> blocks;
  for (std::size_t s : {std::size_t{512}, 64 * KiB, 4 * MiB}) blocks.push_back(a.allocate_block(s));
  on_thread([&] {
    for (auto* b : blocks) a.free_block(b);
    EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 0u);
  });
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, 0);
}

// A thread keeps at most thread_cache_large_park large blocks however many
// it frees: a free that finds the cache at the limit sends them all to the
// pool, where they merge.
TEST(CrossThread, AThreadParksAtMostTheLargeParkLimit) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  AllocatorOptions o = classic();
  o.thread_cache_large_park = 3;
  CachingAllocator a(sim, o);
  std::vector<void*> ptrs;
  for (int i = 0; i < 10; ++i) ptrs.push_back(a.allocate((2 + i) * MiB));
  for (void* p : ptrs) a.deallocate(p);
  std::size_t large_cached = 0;
  for (const SegmentInfo& seg : a.snapshot())
    for (const BlockInfo& b : seg.blocks) large_cached += b.state == "thread_cached" && b.size > 1 * MiB;
  EXPECT_GT(large_cached, 0u);
  EXPECT_LE(large_cached, 3u);
  // What is not parked is free in the pool: the same sizes come back
  // without the pool growing.
  const std::int64_t upstream_allocs = a.stats().num_upstream_allocs;
  ptrs.clear();
  for (int i = 0; i < 10; ++i) ptrs.push_back(a.allocate((2 + i) * MiB));
  EXPECT_EQ(a.stats().num_upstream_allocs, upstream_allocs);
  for (void* p : ptrs) a.deallocate(p);
}

struct LoopResult {
  std::int64_t peak_reserved = 0;
  std::int64_t peak_allocated = 0;
  std::int64_t live_peak = 0;
};

// Training-like steps: this thread allocates "activations"; a persistent
// worker frees them, then allocates and frees "gradients" of other sizes.
LoopResult autograd_like_loop(CachingAllocator& a, int steps) {
  std::mt19937 rng(7);
  std::vector<std::size_t> sizes;
  const std::size_t mib[] = {1, 3, 5, 6, 12, 24, 48};
  for (int i = 0; i < 120; ++i) sizes.push_back(mib[rng() % 7] * MiB + rng() % 4096);
  for (int i = 0; i < 200; ++i) sizes.push_back(1 + rng() % 300000);
  std::shuffle(sizes.begin(), sizes.end(), rng);
  std::int64_t live = 0;
  for (std::size_t s : sizes) live += static_cast<std::int64_t>(round512(s));
  Worker worker;
  for (int step = 0; step < steps; ++step) {
    std::vector<void*> acts;
    for (std::size_t s : sizes) acts.push_back(a.allocate(s));
    worker.run([&] {
      for (auto it = acts.rbegin(); it != acts.rend(); ++it) a.deallocate(*it);
      std::vector<void*> grads;
      for (std::size_t i = 0; i < sizes.size() / 2; ++i) grads.push_back(a.allocate(sizes[i] / 2 + 1));
      for (void* g : grads) a.deallocate(g);
    });
  }
  const MemoryStats s = a.stats();
  return {s.reserved_bytes[kStatAggregate].peak, s.allocated_bytes[kStatAggregate].peak, live};
}

TEST(CrossThread, AnAutogradLikeLoopReservesWhatOneThreadWould) {
  for (bool expandable : {true, false}) {
    SCOPED_TRACE(expandable ? "expandable segments" : "classic segments");
    AllocatorOptions cached = expandable ? AllocatorOptions{} : classic();
    cached.expandable_segments =
        expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
    AllocatorOptions uncached = cached;
    uncached.thread_cache = false;
    CachingAllocator with_cache(std::make_shared<SimulatedDevice>(16 * GiB), cached);
    CachingAllocator without_cache(std::make_shared<SimulatedDevice>(16 * GiB), uncached);
    const LoopResult r = autograd_like_loop(with_cache, 5);
    const LoopResult base = autograd_like_loop(without_cache, 5);
    // The thread cache costs at most 3% more memory than no thread cache.
    EXPECT_LE(static_cast<double>(r.peak_reserved), 1.03 * static_cast<double>(base.peak_reserved))
        << r.peak_reserved << " vs " << base.peak_reserved;
    if (expandable) {
      EXPECT_LE(static_cast<double>(r.peak_reserved), 1.03 * static_cast<double>(r.live_peak));
    }
    // The reported peak of allocated bytes stays close to the true one
    // (another thread's cached blocks are the only excess).
    EXPECT_GE(r.peak_allocated, r.live_peak);
    EXPECT_LE(static_cast<double>(r.peak_allocated), 1.03 * static_cast<double>(r.live_peak));
  }
}

// The peaks of requested bytes and of live allocations stay bounded when
// each thread frees through its cache blocks the pool counted: the worker
// takes its own blocks on the slow path (at most one large block parks) and
// frees them into its cache, and frees every block the main thread took.
// Counted as the pool's share plus one thread's own change, these peaks
// once grew with every step (300 GB of "requested" after 30 steps of a
// 14 GB PyTorch job).
TEST(CrossThread, PeaksOfRequestedBytesAndLiveAllocationsStayTrue) {
  for (bool expandable : {true, false}) {
    SCOPED_TRACE(expandable ? "expandable segments" : "classic segments");
    AllocatorOptions o = expandable ? AllocatorOptions{} : classic();
    o.expandable_segments = expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
    CachingAllocator a(std::make_shared<SimulatedDevice>(16 * GiB), o);
    Worker worker;
    std::int64_t live = 0, live_peak = 0, count = 0, count_peak = 0;
    auto note = [&](std::int64_t bytes, int n) {
      live += bytes;
      count += n;
      live_peak = std::max(live_peak, live);
      count_peak = std::max(count_peak, count);
    };
    for (int step = 0; step < 300; ++step) {
      std::vector<void*> mine;
      std::int64_t mine_bytes = 0;
      for (int i = 0; i < 20; ++i) {
        const std::size_t bytes = i % 3 == 0 ? (std::size_t{3} << 20) + i * 4096 : 100000 + i * 1000;
        mine.push_back(a.allocate(bytes));
        mine_bytes += static_cast<std::int64_t>(bytes);
        note(static_cast<std::int64_t>(bytes), 1);
      }
      worker.run([&] {
        for (void* p : mine) a.deallocate(p);
        note(-mine_bytes, -static_cast<int>(mine.size()));
        void* big = a.allocate(5 << 20);
        void* small = a.allocate(700);
        note((5 << 20) + 700, 2);
        a.deallocate(big);
        a.deallocate(small);
        note(-(5 << 20) - 700, -2);
      });
    }
    const MemoryStats s = a.stats();
    EXPECT_EQ(s.requested_bytes[0].current, 0);
    EXPECT_EQ(s.allocation_count[0].current, 0);
    EXPECT_EQ(s.num_allocs, s.num_frees);
    EXPECT_EQ(s.num_allocs, 300 * 22);
    // Never below the truth; above it by at most what one thread's cache
    // holds (a few blocks here), never by what the steps added up to.
    EXPECT_GE(s.requested_bytes[0].peak, live_peak);
    EXPECT_LE(s.requested_bytes[0].peak, live_peak + (std::int64_t{8} << 20));
    EXPECT_LE(s.requested_bytes[0].peak, s.allocated_bytes[0].peak + (std::int64_t{8} << 20));
    EXPECT_GE(s.allocation_count[0].peak, count_peak);
    EXPECT_LE(s.allocation_count[0].peak, count_peak + 4);
  }
}

// A thread frees many blocks into its cache; another thread's growth past
// the expandable pool's high-water mark empties every cache into the pool
// (Note [New peaks empty the thread caches]) while the first thread sleeps.
// Its own count of requested bytes then went below zero by all it had
// freed, with nothing cached to show for it, and every candidate peak the
// other thread noted counted those bytes as live: under PyTorch a ResNet-50
// job reported a peak of requested bytes a third above its allocated bytes.
TEST(CrossThread, EmptyingAnotherThreadsCacheKeepsRequestedBytesTrue) {
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  CachingAllocator a(std::make_shared<SimulatedDevice>(16 * GiB), o);
  Worker worker;
  constexpr std::size_t kSmall = 900 * 1024;  // small pool: up to 128 cached per size
  constexpr int kBlocks = 100;
  std::int64_t live = 0, live_peak = 0;
  auto note = [&](std::int64_t bytes) {
    live += bytes;
    live_peak = std::max(live_peak, live);
  };
  std::vector<void*> held;
  for (int step = 0; step < 5; ++step) {
    worker.run([&] {
      std::vector<void*> mine;
      for (int i = 0; i < kBlocks; ++i) {
        mine.push_back(a.allocate(kSmall));
        note(static_cast<std::int64_t>(kSmall));
      }
      for (void* p : mine) a.deallocate(p);  // into this thread's cache
      note(-static_cast<std::int64_t>(kSmall) * kBlocks);
    });
    // Each step a new high-water mark: the worker's cache goes back to the pool.
    held.push_back(a.allocate((std::size_t{200} << 20) * (step + 1)));
    note(static_cast<std::int64_t>((std::size_t{200} << 20) * (step + 1)));
    for (int i = 0; i < 20; ++i) {  // more candidates while the worker sleeps
      void* p = a.allocate(4096);
      a.deallocate(p);
    }
  }
  const MemoryStats s = a.stats();
  EXPECT_GE(s.requested_bytes[0].peak, live_peak);
  // At most a few of the worker's small blocks above the truth, never the
  // hundreds it had freed before its cache was emptied.
  EXPECT_LE(s.requested_bytes[0].peak, live_peak + static_cast<std::int64_t>(4 * kSmall));
  EXPECT_LE(s.requested_bytes[0].peak, s.allocated_bytes[0].peak);
  for (void* p : held) a.deallocate(p);
  EXPECT_EQ(a.stats().requested_bytes[0].current, 0);
}

// Device memory: every thread starts in the one pool (threads move out only
// when they contend, allocator_arena_moves_test.cpp).
TEST(CrossThread, DeviceMemoryHasOnePoolByDefaultHostMemoryArenas) {
  CachingAllocator device(std::make_shared<SimulatedDevice>(1 * GiB));
  device.deallocate(device.allocate(4096));
  for (int i = 0; i < 3; ++i) on_thread([&] { device.deallocate(device.allocate(4096)); });
  EXPECT_EQ(device.arenas_in_use(), 1u);
  CachingAllocator host(std::make_shared<HostResource>());
  const std::uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(host.arena_limit(), std::min(CachingAllocator::kMaxArenas, hw));
  AllocatorOptions four;
  four.arenas = 4;
  CachingAllocator asked(std::make_shared<SimulatedDevice>(1 * GiB), four);
  EXPECT_EQ(asked.arena_limit(), 4u);
}

}  // namespace
}  // namespace genesis::memory
