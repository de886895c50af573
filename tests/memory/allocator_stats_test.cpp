// Statistics, summaries, snapshots and large-allocation reports of the
// caching allocator, checked with exact values on scripted, single-threaded
// sequences. The event history is in allocator_events_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/events.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

constexpr std::int64_t K = 1024;
constexpr std::int64_t M = 1024 * 1024;

struct CP {
  std::int64_t cur;
  std::int64_t peak;
};

// Current and peak of one StatArray: aggregate, small pool, large pool.
void ExpectStat(const char* what, const StatArray& s, CP all, CP small, CP large) {
  SCOPED_TRACE(what);
  EXPECT_EQ(s[kStatAggregate].current, all.cur) << what << " (all) current";
  EXPECT_EQ(s[kStatAggregate].peak, all.peak) << what << " (all) peak";
  EXPECT_EQ(s[kStatSmallPool].current, small.cur) << what << " (small) current";
  EXPECT_EQ(s[kStatSmallPool].peak, small.peak) << what << " (small) peak";
  EXPECT_EQ(s[kStatLargePool].current, large.cur) << what << " (large) current";
  EXPECT_EQ(s[kStatLargePool].peak, large.peak) << what << " (large) peak";
}

// Running totals of one StatArray (aggregate only).
void ExpectTotals(const char* what, const Stat& s, std::int64_t allocated, std::int64_t freed) {
  EXPECT_EQ(s.allocated, allocated) << what << " total allocated";
  EXPECT_EQ(s.freed, freed) << what << " total freed";
}

struct Counters {
  std::int64_t allocs, frees, hits, misses, thread_hits, upstream_allocs, upstream_frees;
};

void ExpectCounters(const MemoryStats& s, Counters c) {
  EXPECT_EQ(s.num_allocs, c.allocs) << "num_allocs";
  EXPECT_EQ(s.num_frees, c.frees) << "num_frees";
  EXPECT_EQ(s.num_cache_hits, c.hits) << "num_cache_hits";
  EXPECT_EQ(s.num_cache_misses, c.misses) << "num_cache_misses";
  EXPECT_EQ(s.num_thread_cache_hits, c.thread_hits) << "num_thread_cache_hits";
  EXPECT_EQ(s.num_upstream_allocs, c.upstream_allocs) << "num_upstream_allocs";
  EXPECT_EQ(s.num_upstream_frees, c.upstream_frees) << "num_upstream_frees";
  // Every allocation is either a hit or a miss.
  EXPECT_EQ(s.num_cache_hits + s.num_cache_misses, s.num_allocs) << "hits + misses != allocs";
}

class AllocatorStatsTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(bool thread_cache, std::size_t capacity = 1 << 30) {
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    AllocatorOptions o = classic();  // the exact values below follow the classic segment layout
    o.thread_cache = thread_cache;
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

// Every statistic on a scripted sequence through the pool (no thread cache).
TEST_F(AllocatorStatsTest, ExactValuesThroughThePool) {
  auto a = make(/*thread_cache=*/false);
  MemoryStats s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, 0}, {0, 0}, {0, 0});
  ExpectStat("reserved", s.reserved_bytes, {0, 0}, {0, 0}, {0, 0});
  ExpectCounters(s, {0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(s.cache_hit_rate(), 0.0);
  EXPECT_EQ(s.fragmentation_ratio(), 0.0);
  EXPECT_EQ(s.largest_free_block, 0u);
  EXPECT_EQ(s.memory_limit, 0u);
  EXPECT_EQ(s.cache_limit, 0u);

  // 1. 1000 bytes: a 2 MiB small segment, block of 1 KiB.
  void* pa = a->allocate(1000);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {K, K}, {K, K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {1000, 1000}, {1000, 1000}, {0, 0});
  ExpectStat("reserved", s.reserved_bytes, {2 * M, 2 * M}, {2 * M, 2 * M}, {0, 0});
  ExpectStat("active", s.active_bytes, {K, K}, {K, K}, {0, 0});
  ExpectStat("inactive_split", s.inactive_split_bytes, {2 * M - K, 2 * M - K}, {2 * M - K, 2 * M - K}, {0, 0});
  ExpectStat("cached", s.cached_bytes, {2 * M - K, 2 * M - K}, {2 * M - K, 2 * M - K}, {0, 0});
  ExpectStat("allocation_count", s.allocation_count, {1, 1}, {1, 1}, {0, 0});
  ExpectStat("segment_count", s.segment_count, {1, 1}, {1, 1}, {0, 0});
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 1);
  ExpectCounters(s, {1, 0, 0, 1, 0, 1, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], K, 0);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 2 * M, 0);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 1, 0);
  EXPECT_EQ(s.total_allocated, K);
  EXPECT_EQ(s.largest_free_block, static_cast<std::size_t>(2 * M - K));

  // 2. 3 MiB: a 20 MiB large segment, split.
  void* pb = a->allocate(3 * M);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {3 * M + K, 3 * M + K}, {K, K}, {3 * M, 3 * M});
  ExpectStat("requested", s.requested_bytes, {3 * M + 1000, 3 * M + 1000}, {1000, 1000}, {3 * M, 3 * M});
  ExpectStat("reserved", s.reserved_bytes, {22 * M, 22 * M}, {2 * M, 2 * M}, {20 * M, 20 * M});
  ExpectStat("inactive_split", s.inactive_split_bytes, {19 * M - K, 19 * M - K}, {2 * M - K, 2 * M - K},
             {17 * M, 17 * M});
  ExpectStat("cached", s.cached_bytes, {19 * M - K, 19 * M - K}, {2 * M - K, 2 * M - K}, {17 * M, 17 * M});
  ExpectStat("allocation_count", s.allocation_count, {2, 2}, {1, 1}, {1, 1});
  ExpectStat("segment_count", s.segment_count, {2, 2}, {1, 1}, {1, 1});
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 2);
  ExpectCounters(s, {2, 0, 0, 2, 0, 2, 0});
  EXPECT_EQ(s.largest_free_block, static_cast<std::size_t>(17 * M));

  // 3. 1000 bytes again: carved from the small segment's remainder (a hit).
  void* pc = a->allocate(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pc), reinterpret_cast<std::uintptr_t>(pa) + K);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {3 * M + 2 * K, 3 * M + 2 * K}, {2 * K, 2 * K}, {3 * M, 3 * M});
  ExpectStat("inactive_split", s.inactive_split_bytes, {19 * M - 2 * K, 19 * M - K}, {2 * M - 2 * K, 2 * M - K},
             {17 * M, 17 * M});
  ExpectStat("allocation_count", s.allocation_count, {3, 3}, {2, 2}, {1, 1});
  ExpectCounters(s, {3, 0, 1, 2, 0, 2, 0});
  EXPECT_DOUBLE_EQ(s.cache_hit_rate(), 1.0 / 3.0);

  // 4. Free the first block: its neighbour is allocated, so it stays a free
  //    split block of its own (inactive split).
  a->deallocate(pa);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {3 * M + K, 3 * M + 2 * K}, {K, 2 * K}, {3 * M, 3 * M});
  ExpectStat("requested", s.requested_bytes, {3 * M + 1000, 3 * M + 2000}, {1000, 2000}, {3 * M, 3 * M});
  ExpectStat("active", s.active_bytes, {3 * M + K, 3 * M + 2 * K}, {K, 2 * K}, {3 * M, 3 * M});
  ExpectStat("inactive_split", s.inactive_split_bytes, {19 * M - K, 19 * M - K}, {2 * M - K, 2 * M - K},
             {17 * M, 17 * M});
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 3);
  EXPECT_EQ(s.inactive_split_count[kStatSmallPool].current, 2);
  ExpectStat("allocation_count", s.allocation_count, {2, 3}, {1, 2}, {1, 1});
  ExpectCounters(s, {3, 1, 1, 2, 0, 2, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 3 * M + 2 * K, K);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 3, 1);

  // 5. Free the 3 MiB block: it merges with its remainder into one free block
  //    filling the segment, which is no longer "split".
  a->deallocate(pb);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {K, 3 * M + 2 * K}, {K, 2 * K}, {0, 3 * M});
  ExpectStat("reserved", s.reserved_bytes, {22 * M, 22 * M}, {2 * M, 2 * M}, {20 * M, 20 * M});
  ExpectStat("inactive_split", s.inactive_split_bytes, {2 * M - K, 19 * M - K}, {2 * M - K, 2 * M - K},
             {0, 17 * M});
  ExpectStat("cached", s.cached_bytes, {22 * M - K, 22 * M - K}, {2 * M - K, 2 * M - K}, {20 * M, 20 * M});
  ExpectStat("allocation_count", s.allocation_count, {1, 3}, {1, 2}, {0, 1});
  EXPECT_EQ(s.largest_free_block, static_cast<std::size_t>(20 * M));
  // The count of split blocks keeps its peak like every other statistic:
  // three at step 4, two now (the small segment's two free pieces).
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 2);
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].peak, 3);
  EXPECT_EQ(s.inactive_split_count[kStatLargePool].peak, 1);
  EXPECT_DOUBLE_EQ(s.fragmentation_ratio(), static_cast<double>(22 * M - K) / static_cast<double>(22 * M));

  // 6. reset_peak_stats: peaks drop to the current values.
  a->reset_peak_stats();
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {K, K}, {K, K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {1000, 1000}, {1000, 1000}, {0, 0});
  ExpectStat("inactive_split", s.inactive_split_bytes, {2 * M - K, 2 * M - K}, {2 * M - K, 2 * M - K}, {0, 0});
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].peak, 2);
  ExpectStat("allocation_count", s.allocation_count, {1, 1}, {1, 1}, {0, 0});
  ExpectStat("reserved", s.reserved_bytes, {22 * M, 22 * M}, {2 * M, 2 * M}, {20 * M, 20 * M});
  ExpectCounters(s, {3, 2, 1, 2, 0, 2, 0});  // counters are not peaks

  // 7. 12 MiB is served from the free 20 MiB block (split: 8 MiB left).
  void* pd = a->allocate(12 * M);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {12 * M + K, 12 * M + K}, {K, K}, {12 * M, 12 * M});
  ExpectStat("inactive_split", s.inactive_split_bytes, {10 * M - K, 10 * M - K}, {2 * M - K, 2 * M - K},
             {8 * M, 8 * M});
  ExpectCounters(s, {4, 2, 2, 2, 0, 2, 0});
  EXPECT_DOUBLE_EQ(s.cache_hit_rate(), 0.5);

  // 8. empty_cache cannot release segments with live blocks.
  a->empty_cache();
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 22 * M);
  EXPECT_EQ(s.num_cache_flushes, 1);

  // 9. Free everything and release it.
  a->deallocate(pd);
  a->deallocate(pc);
  s = a->stats();
  ExpectStat("inactive_split", s.inactive_split_bytes, {0, 10 * M - K}, {0, 2 * M - K}, {0, 8 * M});
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].peak, 3);  // step 7: two small pieces, one large
  a->empty_cache();
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, 12 * M + K}, {0, K}, {0, 12 * M});
  ExpectStat("reserved", s.reserved_bytes, {0, 22 * M}, {0, 2 * M}, {0, 20 * M});
  // Between the frees and empty_cache() all 22 MiB were cached.
  ExpectStat("cached", s.cached_bytes, {0, 22 * M}, {0, 2 * M}, {0, 20 * M});
  ExpectStat("segment_count", s.segment_count, {0, 2}, {0, 1}, {0, 1});
  ExpectStat("allocation_count", s.allocation_count, {0, 2}, {0, 1}, {0, 1});
  ExpectCounters(s, {4, 4, 2, 2, 0, 2, 2});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 15 * M + 2 * K, 15 * M + 2 * K);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 22 * M, 22 * M);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 4, 4);
  EXPECT_EQ(s.num_cache_flushes, 2);
  EXPECT_EQ(s.largest_free_block, 0u);
  EXPECT_EQ(s.fragmentation_ratio(), 0.0);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_upstream_failures, 0);
  EXPECT_EQ(sim_->bytes_in_use(), 0u);

  // 10. reset_memory_stats: counters, totals and peaks restart from here.
  a->reset_memory_stats();
  s = a->stats();
  ExpectCounters(s, {0, 0, 0, 0, 0, 0, 0});
  ExpectStat("allocated", s.allocated_bytes, {0, 0}, {0, 0}, {0, 0});
  ExpectStat("reserved", s.reserved_bytes, {0, 0}, {0, 0}, {0, 0});
  ExpectStat("allocation_count", s.allocation_count, {0, 0}, {0, 0}, {0, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 0, 0);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 0, 0);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 0, 0);
  EXPECT_EQ(s.num_cache_flushes, 0);
  EXPECT_EQ(s.total_allocated, 0);
  void* pe = a->allocate(5000);
  s = a->stats();
  ExpectCounters(s, {1, 0, 0, 1, 0, 1, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 5120, 0);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 2 * M, 0);
  a->deallocate(pe);
}

// reset_memory_stats() with live blocks: totals restart, currents stay.
TEST_F(AllocatorStatsTest, ResetMemoryStatsKeepsCurrentValues) {
  auto a = make(/*thread_cache=*/false);
  void* p = a->allocate(4 * M);
  void* q = a->allocate(1000);
  a->deallocate(a->allocate(2000));
  a->reset_memory_stats();
  MemoryStats s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {4 * M + K, 4 * M + K}, {K, K}, {4 * M, 4 * M});
  ExpectStat("allocation_count", s.allocation_count, {2, 2}, {1, 1}, {1, 1});
  ExpectCounters(s, {0, 0, 0, 0, 0, 0, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 0, 0);
  a->deallocate(q);
  s = a->stats();
  ExpectCounters(s, {0, 1, 0, 0, 0, 0, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 0, K);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 0, 1);
  a->deallocate(p);
}

// reset_accumulated_stats(): totals and counters restart as with
// reset_memory_stats(), currents stay, and every peak stays where it was
// (torch.cuda.reset_accumulated_memory_stats keeps them too).
TEST_F(AllocatorStatsTest, ResetAccumulatedStatsKeepsPeaks) {
  auto a = make(/*thread_cache=*/false);
  a->deallocate(a->allocate(8 * M));
  void* p = a->allocate(4 * M);
  void* q = a->allocate(1000);
  const MemoryStats before = a->stats();
  a->reset_accumulated_stats();
  MemoryStats s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {4 * M + K, 8 * M}, {K, K}, {4 * M, 8 * M});
  ExpectCounters(s, {0, 0, 0, 0, 0, 0, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 0, 0);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 0, 0);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 0, 0);
  for (int i = 0; i < kNumStatTypes; ++i) {
    EXPECT_EQ(s.allocated_bytes[i].peak, before.allocated_bytes[i].peak) << i;
    EXPECT_EQ(s.requested_bytes[i].peak, before.requested_bytes[i].peak) << i;
    EXPECT_EQ(s.reserved_bytes[i].peak, before.reserved_bytes[i].peak) << i;
    EXPECT_EQ(s.active_bytes[i].peak, before.active_bytes[i].peak) << i;
    EXPECT_EQ(s.allocation_count[i].peak, before.allocation_count[i].peak) << i;
    EXPECT_EQ(s.segment_count[i].peak, before.segment_count[i].peak) << i;
    EXPECT_EQ(s.reserved_bytes[i].current, before.reserved_bytes[i].current) << i;
  }
  a->deallocate(q);
  s = a->stats();
  ExpectCounters(s, {0, 1, 0, 0, 0, 0, 0});
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 0, K);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].peak, 8 * M);
  // reset_memory_stats() then takes the peaks down to the current values.
  a->reset_memory_stats();
  s = a->stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].peak, 4 * M);
  a->deallocate(p);
}

// The same kind of script with the thread cache on: frees go to the cache
// ("thread_cached"), re-allocations pop from it, and the stats see both.
TEST_F(AllocatorStatsTest, ExactValuesWithThreadCache) {
  auto a = make(/*thread_cache=*/true);
  void* pa = a->allocate(1000);
  MemoryStats s = a->stats();
  ExpectCounters(s, {1, 0, 0, 1, 0, 1, 0});

  a->deallocate(pa);  // hot path: into this thread's cache
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, K}, {0, K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {0, 1000}, {0, 1000}, {0, 0});
  ExpectStat("active", s.active_bytes, {0, K}, {0, K}, {0, 0});
  ExpectStat("cached", s.cached_bytes, {2 * M, 2 * M}, {2 * M, 2 * M}, {0, 0});
  ExpectStat("reserved", s.reserved_bytes, {2 * M, 2 * M}, {2 * M, 2 * M}, {0, 0});
  // The cached block is not in the pool: only the remainder is inactive split.
  ExpectStat("inactive_split", s.inactive_split_bytes, {2 * M - K, 2 * M - K}, {2 * M - K, 2 * M - K}, {0, 0});
  ExpectStat("allocation_count", s.allocation_count, {0, 1}, {0, 1}, {0, 0});
  ExpectCounters(s, {1, 1, 0, 1, 0, 1, 0});
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_EQ(snap[0].blocks[0].state, "thread_cached");
  EXPECT_EQ(snap[0].blocks[0].size, static_cast<std::size_t>(K));
  EXPECT_EQ(snap[0].blocks[1].state, "free");
  EXPECT_EQ(snap[0].allocated_bytes, 0u);

  void* pb = a->allocate(700);  // same rounded size: popped from the cache
  EXPECT_EQ(pb, pa);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {K, K}, {K, K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {700, 1000}, {700, 1000}, {0, 0});
  ExpectCounters(s, {2, 1, 1, 1, 1, 1, 0});
  EXPECT_EQ(a->snapshot()[0].blocks[0].state, "allocated");
  EXPECT_EQ(a->snapshot()[0].blocks[0].requested, 700u);

  void* pc = a->allocate(1000);  // cache empty for this size: from the pool
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pc), reinterpret_cast<std::uintptr_t>(pa) + K);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {2 * K, 2 * K}, {2 * K, 2 * K}, {0, 0});
  ExpectCounters(s, {3, 1, 2, 1, 1, 1, 0});
  EXPECT_DOUBLE_EQ(s.cache_hit_rate(), 2.0 / 3.0);

  a->deallocate(pb);
  a->deallocate(pc);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, 2 * K}, {0, 2 * K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {0, 1700}, {0, 1700}, {0, 0});
  ExpectCounters(s, {3, 3, 2, 1, 1, 1, 0});
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 2u);

  a->empty_cache();  // takes the blocks back from the thread cache
  s = a->stats();
  ExpectStat("reserved", s.reserved_bytes, {0, 2 * M}, {0, 2 * M}, {0, 0});
  // The cached peak (2 MiB, reached while blocks sat in the thread cache) is
  // checked by HotPathPeaksAreExactForOneThread.
  EXPECT_EQ(s.cached_bytes[kStatAggregate].current, 0);
  ExpectCounters(s, {3, 3, 2, 1, 1, 1, 1});
  EXPECT_EQ(sim_->bytes_in_use(), 0u);
}

// The allocated peak is exact for one thread even when only the lock-free
// path runs.
TEST_F(AllocatorStatsTest, PeakTrackedOnTheHotPath) {
  auto a = make(/*thread_cache=*/true);
  void* x = a->allocate(1 * M);
  void* y = a->allocate(1 * M);
  a->deallocate(x);
  a->deallocate(y);
  a->reset_peak_stats();
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].peak, 0);
  const std::int64_t thread_hits = a->stats().num_thread_cache_hits;
  void* p = a->allocate(1 * M);  // both from the thread cache
  void* q = a->allocate(1 * M);
  EXPECT_EQ(a->stats().num_thread_cache_hits, thread_hits + 2);
  a->deallocate(p);
  a->deallocate(q);
  MemoryStats s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, 2 * M}, {0, 2 * M}, {0, 0});
  EXPECT_EQ(s.active_bytes[kStatAggregate].peak, 2 * M);
}

// stats.h: "Peaks: exact for single-threaded programs". Every peak, also
// those reached only on the lock-free path, and a reported peak never drops
// without a reset.
TEST_F(AllocatorStatsTest, HotPathPeaksAreExactForOneThread) {
  auto a = make(/*thread_cache=*/true);
  void* x = a->allocate(1000);
  void* y = a->allocate(1000);
  a->deallocate(x);  // both into the thread cache
  a->deallocate(y);
  a->reset_peak_stats();
  MemoryStats s = a->stats();
  ExpectStat("cached", s.cached_bytes, {2 * M, 2 * M}, {2 * M, 2 * M}, {0, 0});
  ExpectStat("allocation_count", s.allocation_count, {0, 0}, {0, 0}, {0, 0});
  void* p = a->allocate(1024);  // thread-cache hits, larger requests than before
  void* q = a->allocate(1024);
  a->deallocate(p);
  a->deallocate(q);
  s = a->stats();
  ExpectStat("allocated", s.allocated_bytes, {0, 2 * K}, {0, 2 * K}, {0, 0});
  ExpectStat("active", s.active_bytes, {0, 2 * K}, {0, 2 * K}, {0, 0});
  ExpectStat("requested", s.requested_bytes, {0, 2048}, {0, 2048}, {0, 0});
  ExpectStat("allocation_count", s.allocation_count, {0, 2}, {0, 2}, {0, 0});
  ExpectStat("cached", s.cached_bytes, {2 * M, 2 * M}, {2 * M, 2 * M}, {0, 0});
  void* r = a->allocate(1000);  // cached drops below its peak on the hot path
  s = a->stats();
  ExpectStat("cached", s.cached_bytes, {2 * M - K, 2 * M}, {2 * M - K, 2 * M}, {0, 0});
  a->deallocate(r);
}

// Hits served by a thread's cache still count after the thread exits.
TEST_F(AllocatorStatsTest, ThreadCacheHitsSurviveThreadExit) {
  auto a = make(/*thread_cache=*/true);
  std::thread t([&] {
    void* p = a->allocate(4096);  // miss: new segment
    a->deallocate(p);             // into this thread's cache
    void* q = a->allocate(4096);  // thread-cache hit
    a->deallocate(q);
  });
  t.join();
  MemoryStats s = a->stats();
  ExpectCounters(s, {2, 2, 1, 1, 1, 1, 0});
  EXPECT_DOUBLE_EQ(s.cache_hit_rate(), 0.5);
  // The exited thread's cached block went back to the pool.
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].peak, 4096);
  // And a reset followed by another thread's exit does not go negative.
  a->reset_memory_stats();
  std::thread u([&] {
    void* p = a->allocate(4096);
    a->deallocate(p);
    a->deallocate(a->allocate(4096));
  });
  u.join();
  s = a->stats();
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_frees, 2);
  EXPECT_EQ(s.num_cache_hits + s.num_cache_misses, s.num_allocs);
  EXPECT_GE(s.num_thread_cache_hits, 1);
  EXPECT_LE(s.num_thread_cache_hits, s.num_cache_hits);
}

// The summary has PyTorch's rows and the right numbers in them.
TEST_F(AllocatorStatsTest, MemorySummaryRows) {
  auto a = make(/*thread_cache=*/false, 64 * M);
  void* p = a->allocate(1000);
  void* q = a->allocate(3 * M);
  a->deallocate(a->allocate(2000));
  EXPECT_THROW(a->allocate(100 * M), OutOfMemoryError);
  const std::string text = a->memory_summary();
  EXPECT_TRUE(SummaryHasRows(text));
  EXPECT_NE(text.find("sim:0"), std::string::npos) << text;
  auto row = [&](const std::string& label) -> std::string {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("| " + label, 0) == 0) return line;
    ADD_FAILURE() << "no row '" << label << "' in\n" << text;
    return {};
  };
  // Allocated: current 3 MiB + 1 KiB, peak 3 MiB + 3 KiB.
  EXPECT_NE(row("Allocated memory").find("3.00 MiB"), std::string::npos) << row("Allocated memory");
  EXPECT_NE(row("Reserved memory").find("22.00 MiB"), std::string::npos) << row("Reserved memory");
  const std::string allocs = row("Allocations");
  EXPECT_NE(allocs.find(" 2 "), std::string::npos) << allocs;  // current
  EXPECT_NE(allocs.find(" 3 "), std::string::npos) << allocs;  // peak and total allocated
  EXPECT_NE(row("Segments").find(" 2 "), std::string::npos) << row("Segments");
  EXPECT_NE(row("Out-of-memory errors").find(" 1 |"), std::string::npos) << row("Out-of-memory errors");
  // 1 hit (the 2000-byte block) out of 3 allocations.
  EXPECT_NE(row("Cache hit rate").find("33.33"), std::string::npos) << row("Cache hit rate");
  // A row that promises two numbers shows both.
  EXPECT_NE(row("Allocs / frees").find("3 / 1"), std::string::npos) << row("Allocs / frees");
  EXPECT_NE(row("Upstream allocs / frees").find("2 / 0"), std::string::npos) << row("Upstream allocs / frees");
  a->deallocate(p);
  a->deallocate(q);
}

TEST_F(AllocatorStatsTest, SnapshotShowsBlockStatesAndRequests) {
  auto a = make(/*thread_cache=*/true);
  void* p = a->allocate(1000);
  void* q = a->allocate(3000);
  void* r = a->allocate(5 * M + 1);
  a->deallocate(q);
  const auto snap = a->snapshot();
  EXPECT_TRUE(SnapshotConsistent(snap));
  ASSERT_EQ(snap.size(), 2u);
  // Sorted by address; find each by pool.
  const SegmentInfo& small = snap[0].pool == "small" ? snap[0] : snap[1];
  const SegmentInfo& large = snap[0].pool == "small" ? snap[1] : snap[0];
  ASSERT_EQ(small.blocks.size(), 3u);
  EXPECT_EQ(small.blocks[0].state, "allocated");
  EXPECT_EQ(small.blocks[0].requested, 1000u);
  EXPECT_EQ(small.blocks[0].address, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(small.blocks[1].state, "thread_cached");
  EXPECT_EQ(small.blocks[1].size, 3072u);
  EXPECT_EQ(small.blocks[2].state, "free");
  EXPECT_EQ(small.allocated_bytes, 1024u);
  EXPECT_EQ(small.stream, 0u);
  ASSERT_EQ(large.blocks.size(), 2u);
  EXPECT_EQ(large.size, 20 * static_cast<std::size_t>(M));
  EXPECT_EQ(large.blocks[0].state, "allocated");
  EXPECT_EQ(large.blocks[0].size, static_cast<std::size_t>(5 * M + 512));
  EXPECT_EQ(large.blocks[0].requested, static_cast<std::size_t>(5 * M + 1));
  EXPECT_EQ(large.blocks[1].state, "free");
  a->deallocate(p);
  a->deallocate(r);
}

TEST_F(AllocatorStatsTest, LargeAllocationsWithLocations) {
  auto a = make(/*thread_cache=*/true);
  void* p8;
  void* p2;
  void* p4;
  void* small;
  {
    ScopedAllocationContext ctx("model.forward");
    p8 = a->allocate(8 * M);
    {
      ScopedAllocationContext inner(intern_location("optimizer.step:" + std::to_string(42)));
      p2 = a->allocate(2 * M);
    }
    small = a->allocate(1000);  // the outer context is back
  }
  p4 = a->allocate(4 * M);  // no context
  const auto all = a->large_allocations(1);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].address, reinterpret_cast<std::uintptr_t>(p8));
  EXPECT_EQ(all[0].size, static_cast<std::size_t>(8 * M));
  EXPECT_EQ(all[0].requested, static_cast<std::size_t>(8 * M));
  EXPECT_EQ(all[0].location, "model.forward");
  EXPECT_EQ(all[1].address, reinterpret_cast<std::uintptr_t>(p4));
  std::ostringstream hex;
  hex << "0x" << std::hex << reinterpret_cast<std::uintptr_t>(p4);
  EXPECT_EQ(all[1].location, hex.str());
  EXPECT_EQ(all[2].address, reinterpret_cast<std::uintptr_t>(p2));
  EXPECT_EQ(all[2].location, "optimizer.step:42");
  EXPECT_EQ(all[3].address, reinterpret_cast<std::uintptr_t>(small));
  EXPECT_EQ(all[3].location, "model.forward");
  EXPECT_EQ(all[3].stream, 0u);
  // The threshold filters by (rounded) size.
  const auto big = a->large_allocations(3 * M);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].size, static_cast<std::size_t>(8 * M));
  EXPECT_EQ(big[1].size, static_cast<std::size_t>(4 * M));
  EXPECT_TRUE(a->large_allocations(9 * M).empty());
  // intern_location: same text, same pointer.
  EXPECT_EQ(intern_location("abc"), intern_location(std::string("abc")));
  // A block re-allocated from the thread cache takes the new context.
  a->deallocate(small);
  {
    ScopedAllocationContext ctx("second.use");
    small = a->allocate(1000);
  }
  const auto again = a->large_allocations(1);
  EXPECT_EQ(again.back().location, "second.use");
  // Freed blocks are not reported.
  a->deallocate(p8);
  EXPECT_EQ(a->large_allocations(1).size(), 3u);
  a->deallocate(p2);
  a->deallocate(p4);
  a->deallocate(small);
  EXPECT_TRUE(a->large_allocations(1).empty());
}


// Every statistic keeps PyTorch's running totals: what was added and what
// was taken away since the last reset. A scripted sequence with the values
// worked out by hand: one small block in a fresh 2 MiB segment, freed, and
// the segment released.
TEST_F(AllocatorStatsTest, RunningTotalsOfEveryStatistic) {
  auto a = make(/*thread_cache=*/false);
  void* p = a->allocate(1000);
  MemoryStats s = a->stats();
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], K, 0);
  ExpectTotals("requested_bytes", s.requested_bytes[kStatAggregate], 1000, 0);
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 2 * M, 0);
  ExpectTotals("active_bytes", s.active_bytes[kStatAggregate], K, 0);
  // The segment's free remainder is a free block beside an allocated one.
  ExpectTotals("inactive_split_bytes", s.inactive_split_bytes[kStatAggregate], 2 * M - K, 0);
  ExpectTotals("inactive_split_count", s.inactive_split_count[kStatAggregate], 1, 0);
  // Cached bytes rose by the segment and fell by the block taken from it.
  ExpectTotals("cached_bytes", s.cached_bytes[kStatAggregate], 2 * M, K);
  ExpectTotals("allocation_count", s.allocation_count[kStatAggregate], 1, 0);
  ExpectTotals("segment_count", s.segment_count[kStatAggregate], 1, 0);

  // The freed block merges with the remainder: no split block is left.
  a->deallocate(p);
  s = a->stats();
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], K, K);
  ExpectTotals("requested_bytes", s.requested_bytes[kStatAggregate], 1000, 1000);
  ExpectTotals("active_bytes", s.active_bytes[kStatAggregate], K, K);
  ExpectTotals("inactive_split_bytes", s.inactive_split_bytes[kStatAggregate], 2 * M - K, 2 * M - K);
  ExpectTotals("inactive_split_count", s.inactive_split_count[kStatAggregate], 1, 1);
  ExpectTotals("cached_bytes", s.cached_bytes[kStatAggregate], 2 * M + K, K);
  ExpectTotals("segment_count", s.segment_count[kStatAggregate], 1, 0);

  a->empty_cache();
  s = a->stats();
  ExpectTotals("reserved_bytes", s.reserved_bytes[kStatAggregate], 2 * M, 2 * M);
  ExpectTotals("cached_bytes", s.cached_bytes[kStatAggregate], 2 * M + K, 2 * M + K);
  ExpectTotals("segment_count", s.segment_count[kStatAggregate], 1, 1);
  // All of it in the small pool, none in the large one.
  EXPECT_EQ(s.requested_bytes[kStatSmallPool].allocated, 1000);
  EXPECT_EQ(s.segment_count[kStatSmallPool].freed, 1);
  EXPECT_EQ(s.requested_bytes[kStatLargePool].allocated, 0);
  EXPECT_EQ(s.segment_count[kStatLargePool].allocated, 0);
}

// A block freed while another stream still uses it stays active: active
// bytes are taken away only when that work is done.
TEST_F(AllocatorStatsTest, ActiveBytesAreTakenAwayWhenTheStreamsAreDone) {
  auto a = make(/*thread_cache=*/false);
  const StreamId s1 = sim_->create_stream();
  void* p = a->allocate(4 * M);
  a->record_stream(p, s1);
  sim_->submit_work(s1);
  a->deallocate(p);
  MemoryStats s = a->stats();
  ExpectTotals("allocated_bytes", s.allocated_bytes[kStatAggregate], 4 * M, 4 * M);
  ExpectTotals("active_bytes", s.active_bytes[kStatAggregate], 4 * M, 0);
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 4 * M);
  sim_->complete_work(s1);
  a->empty_cache();  // processes the completed event
  s = a->stats();
  ExpectTotals("active_bytes", s.active_bytes[kStatAggregate], 4 * M, 4 * M);
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 0);
}

const char* const kStatNames[] = {"allocated_bytes", "requested_bytes", "reserved_bytes",
                                  "active_bytes",    "inactive_split_bytes", "cached_bytes",
                                  "allocation_count", "segment_count", "inactive_split_count"};

std::vector<const StatArray*> stat_arrays(const MemoryStats& s) {
  return {&s.allocated_bytes, &s.requested_bytes,  &s.reserved_bytes,  &s.active_bytes,        &s.inactive_split_bytes,
          &s.cached_bytes,    &s.allocation_count, &s.segment_count,   &s.inactive_split_count};
}

// Checks the running totals of every statistic against the previous read
// and the values at the last reset: both totals only grow, neither is
// negative, the pools add up to the aggregate, and
//   current - allocated + freed == current at the reset.
class TotalsChecker {
 public:
  explicit TotalsChecker(const MemoryStats& at_reset) { reset(at_reset); }
  void reset(const MemoryStats& at_reset) {
    base_ = at_reset;
    last_ = at_reset;
    for (const StatArray* a : stat_arrays(last_))
      for (int i = 0; i < kNumStatTypes; ++i) {
        EXPECT_EQ((*a)[i].allocated, 0);
        EXPECT_EQ((*a)[i].freed, 0);
      }
  }
  void check(const MemoryStats& s, const std::string& step) {
    const auto now = stat_arrays(s), before = stat_arrays(last_), base = stat_arrays(base_);
    for (std::size_t k = 0; k < now.size(); ++k) {
      for (int i = 0; i < kNumStatTypes; ++i) {
        const Stat& st = (*now[k])[i];
        const std::string what = step + ": " + kStatNames[k] + "[" + std::to_string(i) + "]";
        EXPECT_GE(st.allocated, 0) << what;
        EXPECT_GE(st.freed, 0) << what;
        EXPECT_GE(st.allocated, (*before[k])[i].allocated) << what << " allocated went down";
        EXPECT_GE(st.freed, (*before[k])[i].freed) << what << " freed went down";
        EXPECT_EQ(st.current - st.allocated + st.freed, (*base[k])[i].current) << what;
      }
      const StatArray& a = *now[k];
      EXPECT_EQ(a[kStatAggregate].allocated, a[kStatSmallPool].allocated + a[kStatLargePool].allocated)
          << step << ": " << kStatNames[k];
      EXPECT_EQ(a[kStatAggregate].freed, a[kStatSmallPool].freed + a[kStatLargePool].freed)
          << step << ": " << kStatNames[k];
    }
    // Active bytes rise only when a block is allocated.
    EXPECT_EQ(s.active_bytes[kStatAggregate].allocated, s.allocated_bytes[kStatAggregate].allocated) << step;
    last_ = s;
  }

 private:
  MemoryStats base_, last_;
};

struct TotalsCase {
  bool thread_cache;
  bool expandable;
};

class RunningTotalsTest : public ::testing::TestWithParam<TotalsCase> {};

// A sequence that moves every statistic (both pools, thread caches, a
// thread's exit, work on another stream, releases, an out-of-memory error)
// with the totals checked after each step, then again after
// reset_accumulated_stats() and reset_memory_stats() with blocks live.
TEST_P(RunningTotalsTest, EveryStatisticAddsUp) {
  auto sim = std::make_shared<SimulatedDevice>(256 * M);
  AllocatorOptions o;
  o.thread_cache = GetParam().thread_cache;
  o.expandable_segments =
      GetParam().expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
  CachingAllocator a(sim, o);
  const StreamId s1 = sim->create_stream();
  TotalsChecker check(a.stats());
  auto round = [&](const std::string& step) {
    const std::size_t sizes[] = {700, 1000, 4096, 70000, 3 * M + 5, 1000, 12 * M, 300};
    std::vector<void*> first, second;
    for (std::size_t n : sizes) first.push_back(a.allocate(n));
    check.check(a.stats(), step + ", allocated");
    for (std::size_t i = 0; i < first.size(); i += 2) {  // holes between live blocks: split blocks
      a.deallocate(first[i]);
      first[i] = nullptr;
    }
    check.check(a.stats(), step + ", every other freed");
    for (std::size_t n : sizes) second.push_back(a.allocate(n / 2 + 1));  // from the caches and the pools
    check.check(a.stats(), step + ", reallocated");
    void* pending = a.allocate(2 * M);
    a.record_stream(pending, s1);
    sim->submit_work(s1);
    a.deallocate(pending);
    check.check(a.stats(), step + ", freed while another stream uses it");
    on_thread([&] {
      void* x = a.allocate(5000);
      a.deallocate(x);
      a.deallocate(a.allocate(5000));
    });
    check.check(a.stats(), step + ", a thread exited");
    EXPECT_THROW(a.allocate(1024 * M), OutOfMemoryError);
    check.check(a.stats(), step + ", out of memory");
    sim->complete_work(s1);
    for (void* p : first)
      if (p != nullptr) a.deallocate(p);
    for (void* p : second) a.deallocate(p);
    check.check(a.stats(), step + ", all freed");
    a.empty_cache();
    check.check(a.stats(), step + ", empty_cache");
  };
  std::vector<void*> live;
  round("first round");
  round("second round");
  // Blocks live across the resets.
  live.push_back(a.allocate(3000));
  live.push_back(a.allocate(5 * M));
  a.reset_accumulated_stats();
  check.reset(a.stats());
  round("after reset_accumulated_stats");
  a.reset_memory_stats();
  check.reset(a.stats());
  round("after reset_memory_stats");
  for (void* p : live) a.deallocate(p);
  a.empty_cache();
  check.check(a.stats(), "all freed");
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.segment_count[kStatAggregate].current, 0);
  EXPECT_EQ(sim->num_misuses(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Configurations, RunningTotalsTest,
                         ::testing::Values(TotalsCase{false, false}, TotalsCase{true, false}, TotalsCase{false, true},
                                           TotalsCase{true, true}),
                         [](const ::testing::TestParamInfo<TotalsCase>& info) {
                           return std::string(info.param.thread_cache ? "ThreadCache" : "NoThreadCache") +
                                  (info.param.expandable ? "Expandable" : "Classic");
                         });

// The summary shows both totals on every row, as PyTorch's does.
TEST_F(AllocatorStatsTest, MemorySummaryShowsEveryTotal) {
  auto a = make(/*thread_cache=*/false);
  void* p = a->allocate(1000);
  a->deallocate(a->allocate(3000));
  const std::string text = a->memory_summary();
  auto row = [&](const std::string& label) -> std::string {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("| " + label, 0) == 0) return line;
    ADD_FAILURE() << "no row '" << label << "' in\n" << text;
    return {};
  };
  // Requested: 1000 + 3000 bytes asked for, 3000 of them given back.
  EXPECT_NE(row("Requested memory").find("3.91 KiB |   2.93 KiB |"), std::string::npos) << text;
  // Segments: one added, none released.
  EXPECT_NE(row("Segments").find("|          1 |          0 |"), std::string::npos) << text;
  EXPECT_NE(row("Non-releasable allocs").find("|"), std::string::npos) << text;
  a->deallocate(p);
}

}  // namespace
}  // namespace genesis::memory
