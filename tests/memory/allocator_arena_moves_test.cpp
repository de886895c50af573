// Device memory with arenas auto (Note [Threads that contend move out] in
// genesis/memory/detail/arena_set.h): every thread starts in the shared pool,
// and a thread whose slow-path locks keep waiting for another thread moves to
// an arena of its own; blocks it took before still go back to the pool that
// made them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// Device memory from the heap whose allocations can be held at a gate: a
// thread that grows the pool while the gate is closed waits inside the
// upstream call, holding the arena's lock, so another thread's slow path
// must wait for it.
class GatedDevice final : public UpstreamResource {
 public:
  MemoryKind kind() const noexcept override { return MemoryKind::kDevice; }
  Device device() const noexcept override { return Device(DeviceType::kCPU); }
  std::string name() const override { return "gated device"; }
  MemInfo mem_info() const override { return MemInfo{std::size_t{1} << 40, std::size_t{1} << 40}; }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
    waiting_ = false;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  std::size_t frees() const noexcept { return frees_.load(); }
  // Until an allocation waits at the closed gate; false after 10 s.
  bool wait_for_waiter() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_; });
  }

 private:
  void* do_allocate(std::size_t bytes) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!open_) {
        waiting_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return open_; });
      }
    }
    return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  }
  void do_deallocate(void* ptr, std::size_t) noexcept override {
    std::free(ptr);
    ++frees_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  bool waiting_ = false;
  std::atomic<std::size_t> frees_{0};
};

AllocatorOptions moving_after(std::uint32_t window) {
  AllocatorOptions o;
  o.arena_move_window = window;
  return o;
}

// One round: a worker with a cache of its own misses it (a size it has not
// seen) while thread h grows the pool at the closed gate, holding the lock,
// so that the worker's lock waits; then it misses once more. Its blocks go
// to `out`. `settle`: how long the worker is given to reach the lock.
void contend_once(CachingAllocator& a, GatedDevice& up, std::vector<void*>& out, std::size_t round,
                  std::chrono::milliseconds settle) {
  std::atomic<bool> ready{false}, go{false};
  void* first = nullptr;
  void* second = nullptr;
  std::thread w([&] {
    a.deallocate(a.allocate(512));  // its cache exists before the lock is held
    ready = true;
    while (!go.load()) std::this_thread::yield();
    first = a.allocate(3 * MiB + round * 4096);   // waits at the lock
    second = a.allocate(5 * MiB + round * 4096);  // the next miss: a thread marked to move moves here
  });
  while (!ready.load()) std::this_thread::yield();
  up.close();
  std::thread h([&] {
    // Larger than any segment so far: a new one, which waits at the gate
    // under the lock.
    void* p = a.allocate((std::size_t{64} << 20) * (round + 1));
    a.deallocate(p);
  });
  const bool held = up.wait_for_waiter();
  if (!held) up.open();  // let h finish, then fail below
  go = true;
  std::this_thread::sleep_for(settle);
  up.open();
  h.join();
  w.join();
  out.push_back(first);
  out.push_back(second);
  EXPECT_TRUE(held) << "the growing thread never reached the upstream";
}

TEST(ArenaMoves, DeviceMemoryStartsAsOnePoolWhateverTheThreads) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim);
  const std::uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(a.arena_limit(), std::min(CachingAllocator::kMaxArenas, hw));  // the most it may spread to
  a.deallocate(a.allocate(4096));
  for (int i = 0; i < 6; ++i) on_thread([&] { a.deallocate(a.allocate(4096 * static_cast<std::size_t>(i + 1))); });
  EXPECT_EQ(a.arenas_in_use(), 1u);  // threads that never waited for each other share the pool
}

// A thread whose locks wait moves out; the pool it leaves keeps working for
// the others, and every block, taken before or after the move, goes back.
TEST(ArenaMoves, AThreadThatWaitsForTheLockMovesToAnArenaOfItsOwn) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread: arenas auto is one pool";
  auto up = std::make_shared<GatedDevice>();
  CachingAllocator a(up, moving_after(1));  // every slow-path lock is a window of its own
  a.deallocate(a.allocate(512));            // this thread keeps a cache in arena 0 throughout
  std::vector<void*> blocks;
  // A worker that did not reach the lock before the gate opened did not
  // wait: try again, giving it longer each time.
  for (std::size_t round = 0; round < 20 && a.arenas_in_use() < 2; ++round)
    contend_once(a, *up, blocks, round, std::chrono::milliseconds(20 * (round + 1)));
  ASSERT_EQ(a.arenas_in_use(), 2u) << "no worker moved out in 20 rounds of waiting for the lock";
  // The pool left behind still serves this thread.
  a.deallocate(a.allocate(7 * MiB));
  // Blocks the workers took in arena 0 and in arena 1 all go back, whoever
  // frees them (the workers have exited). Arena 1 has no threads left, so
  // what it had goes back to the device; the shared pool keeps its cache
  // (classic segments are given back only on empty_cache or out of memory).
  EXPECT_EQ(up->frees(), 0u);
  const std::int64_t reserved_before = a.stats().reserved_bytes[kStatAggregate].current;
  for (void* p : blocks) a.deallocate(p);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_GE(up->frees(), 1u);
  EXPECT_LT(s.reserved_bytes[kStatAggregate].current, reserved_before);
  a.check_invariants();
}

// Waiting moves nobody when moves are off (a window of 0) or the arenas were
// asked for by number.
TEST(ArenaMoves, NoMovesWithAWindowOfZeroOrArenasSetExplicitly) {
  AllocatorOptions one = moving_after(1);
  one.arenas = 1;
  for (const AllocatorOptions& o : {moving_after(0), one}) {
    auto up = std::make_shared<GatedDevice>();
    CachingAllocator a(up, o);
    EXPECT_EQ(a.arena_limit(), 1u);
    a.deallocate(a.allocate(512));
    std::vector<void*> blocks;
    for (std::size_t round = 0; round < 2; ++round) contend_once(a, *up, blocks, round, std::chrono::milliseconds(20));
    EXPECT_EQ(a.arenas_in_use(), 1u);
    for (void* p : blocks) a.deallocate(p);
    EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, 0);
  }
}

}  // namespace
}  // namespace genesis::memory
