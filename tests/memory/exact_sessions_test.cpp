// Sessions longer than the event rings (Note [Exact sessions]): totals, levels,
// peaks and "allocated since" stay exact after millions of events, while the
// event list itself says that it lost its start.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/events.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// What the test itself counts, to compare with the allocator's summary.
struct Expected {
  std::uint64_t allocs = 0, frees = 0, bytes_allocated = 0, bytes_freed = 0, largest = 0;
  std::int64_t level = 0, peak = 0;
  void alloc(std::size_t requested, std::size_t block) {
    ++allocs;
    bytes_allocated += requested;
    largest = std::max<std::uint64_t>(largest, requested);
    level += static_cast<std::int64_t>(block);
    peak = std::max(peak, level);
  }
  void free(std::size_t requested, std::size_t block) {
    ++frees;
    bytes_freed += requested;
    level -= static_cast<std::int64_t>(block);
  }
};

// More than ten million events (a quarter of that under the sanitizers, where
// the same loop took 20-90 s: still 600 times the ring) through a thread cache
// and the pool, with a leak planted at an address that was live before the
// session: exact totals, peak and leak, although the rings kept only the last
// few.
TEST(ExactSessionsTest, MillionsOfEventsKeepTotalsPeakAndLeaks) {
  const int iterations = under_tsan() || under_asan() ? 1'275'000 : 5'100'000;
  auto sim = std::make_shared<SimulatedDevice>(4 * GiB);
  AllocatorOptions o;
  o.record_events = true;
  o.event_capacity_per_thread = 1 << 12;
  CachingAllocator a(sim, o);
  void* before = a.allocate(3 * MiB);  // live when the session starts
  const std::size_t before_block = a.allocation_size(before);

  const RecordingMark mark = a.mark_recording();
  Expected x;
  x.free(3 * MiB, before_block);
  a.deallocate(before);
  void* leak = a.allocate(3 * MiB);  // the same block again: an address the session started with
  ASSERT_EQ(leak, before);
  x.alloc(3 * MiB, a.allocation_size(leak));

  const std::size_t sizes[] = {512, 1000, 4096, 70000, 1 * MiB + 1, 5 * MiB};
  std::vector<void*> live;
  std::vector<std::size_t> live_sizes;
  for (int i = 0; i < iterations; ++i) {
    const std::size_t n = sizes[i % 6] + static_cast<std::size_t>(i % 7) * 512;
    void* p = a.allocate(n);
    live.push_back(p);
    live_sizes.push_back(n);
    x.alloc(n, a.allocation_size(p));
    if (i == iterations / 5) {  // the session's peak: 200 MiB on top of whatever is live
      void* big = a.allocate(200 * MiB);
      x.alloc(200 * MiB, a.allocation_size(big));
      x.free(200 * MiB, a.allocation_size(big));
      a.deallocate(big);
    }
    if (live.size() == 3 || i % 5 == 0) {
      while (!live.empty()) {
        x.free(live_sizes.back(), a.allocation_size(live.back()));
        a.deallocate(live.back());
        live.pop_back();
        live_sizes.pop_back();
      }
    }
  }
  for (std::size_t k = 0; k < live.size(); ++k) {
    x.free(live_sizes[k], a.allocation_size(live[k]));
    a.deallocate(live[k]);
  }

  const RecordingSummary s = a.recording_since(mark);
  const EventTotals& t = s.totals;
  ASSERT_GT(x.allocs + x.frees, 2 * static_cast<std::uint64_t>(iterations));
  EXPECT_EQ(t.of(EventAction::kAlloc), x.allocs);
  EXPECT_EQ(t.of(EventAction::kFree), x.frees);
  EXPECT_EQ(t.bytes[static_cast<int>(EventAction::kAlloc)], x.bytes_allocated);
  EXPECT_EQ(t.bytes[static_cast<int>(EventAction::kFree)], x.bytes_freed);
  EXPECT_EQ(s.allocated_change, x.level);
  EXPECT_EQ(s.peak_allocated_rise, x.peak);
  EXPECT_EQ(s.largest_alloc, 200 * MiB);
  EXPECT_LE(t.cache_hits, x.allocs);
  EXPECT_GT(t.lifetimes, 0u);
  // The allocator's own statistics agree with the recorded levels.
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current,
            static_cast<std::int64_t>(before_block) + s.allocated_change);

  // The window: the history lost the session's start and says so.
  EXPECT_GE(s.lost_until_ns, mark.time_ns);
  const std::vector<MemoryEvent> kept = a.events();
  EXPECT_LT(kept.size(), t.events());

  // Allocated since the mark: the planted leak, and nothing else.
  std::vector<AllocationInfo> since;
  for (const AllocationInfo& i : a.large_allocations(0))
    if (i.alloc_time_ns >= mark.time_ns) since.push_back(i);
  ASSERT_EQ(since.size(), 1u);
  EXPECT_EQ(since[0].address, addr_of(leak));
  a.release_mark(mark);
  a.deallocate(leak);
}

TEST(ExactSessionsTest, OverlappingMarksSeeTheirOwnPeaks) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  AllocatorOptions o = classic();
  o.record_events = true;
  CachingAllocator a(sim, o);
  const RecordingMark outer = a.mark_recording();
  a.deallocate(a.allocate(100 * MiB));
  const RecordingMark inner = a.mark_recording();
  void* p = a.allocate(10 * MiB);
  EXPECT_EQ(a.recording_since(inner).peak_allocated_rise, static_cast<std::int64_t>(10 * MiB));
  EXPECT_EQ(a.recording_since(outer).peak_allocated_rise, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(a.recording_since(inner).largest_alloc, 10 * MiB);
  EXPECT_EQ(a.recording_since(outer).largest_alloc, 100 * MiB);
  a.release_mark(outer);  // the inner mark still reads its epochs
  a.deallocate(p);
  const RecordingSummary s = a.recording_since(inner);
  EXPECT_EQ(s.peak_allocated_rise, static_cast<std::int64_t>(10 * MiB));
  EXPECT_EQ(s.allocated_change, 0);
  EXPECT_EQ(s.totals.of(EventAction::kAlloc), 1u);
  EXPECT_EQ(s.totals.of(EventAction::kFree), 1u);
  // Reserved memory: the inner session took no segment (the 100 MiB one was cached).
  EXPECT_EQ(s.peak_reserved_rise, 0);
  EXPECT_GT(a.recording_since(outer).peak_reserved_rise, 0);
  a.release_mark(inner);
  const RecordingMark later = a.mark_recording();
  EXPECT_EQ(a.recording_since(later).peak_allocated_rise, 0);
  a.release_mark(later);
}

TEST(ExactSessionsTest, ClearingEventsKeepsTotals) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  AllocatorOptions o = classic();
  o.record_events = true;
  CachingAllocator a(sim, o);
  const RecordingMark m = a.mark_recording();
  std::thread([&] { a.deallocate(a.allocate(MiB)); }).join();  // a retired ring
  a.deallocate(a.allocate(MiB));
  a.clear_events();
  EXPECT_TRUE(a.events().empty());
  const RecordingSummary s = a.recording_since(m);
  EXPECT_EQ(s.totals.of(EventAction::kAlloc), 2u);
  EXPECT_EQ(s.totals.of(EventAction::kFree), 2u);
  EXPECT_GE(s.lost_until_ns, m.time_ns);  // the cleared events are missing from events()
  a.release_mark(m);
}

TEST(ExactSessionsTest, ThreadsCountExactly) {
  auto sim = std::make_shared<SimulatedDevice>(4 * GiB);
  AllocatorOptions o;
  o.record_events = true;
  o.event_capacity_per_thread = 1 << 10;
  CachingAllocator a(sim, o);
  const RecordingMark m = a.mark_recording();
  constexpr int kThreads = 4, kPairs = 200'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&a, t] {
      for (int i = 0; i < kPairs; ++i) a.deallocate(a.allocate(512 * static_cast<std::size_t>(1 + (i + t) % 9)));
    });
  for (auto& th : threads) th.join();
  const RecordingSummary s = a.recording_since(m);
  EXPECT_EQ(s.totals.of(EventAction::kAlloc), static_cast<std::uint64_t>(kThreads) * kPairs);
  EXPECT_EQ(s.totals.of(EventAction::kFree), static_cast<std::uint64_t>(kThreads) * kPairs);
  EXPECT_EQ(s.allocated_change, 0);
  // At most every thread's block at once, at least one.
  EXPECT_GE(s.peak_allocated_rise, 512);
  EXPECT_LE(s.peak_allocated_rise, kThreads * 9 * 512);
  a.release_mark(m);
}

}  // namespace
}  // namespace genesis::memory
