// Parked large blocks (Note [Parked large blocks] in src/memory/arena.cpp):
// up to thread_cache_large_park large blocks wait in the thread cache, so
// that they come back as exact hits; more than that go to the pool when they
// are freed; and every cached block goes back before the pool
// grows, so parking never costs new memory.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

class LargeParkTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(std::uint32_t park, std::size_t capacity = 1 * GiB) {
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    AllocatorOptions o = classic();
    o.thread_cache_large_park = park;
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

// Frees `sizes` (allocated first, in order) into the thread cache, then makes
// one large request that misses the cache. Returns the freed pointers.
std::vector<void*> park_then_miss(CachingAllocator& a, const std::vector<std::size_t>& sizes, void** miss) {
  std::vector<void*> ptrs;
  for (std::size_t s : sizes) ptrs.push_back(a.allocate(s));
  for (void* p : ptrs) a.deallocate(p);
  *miss = a.allocate(7 * MiB + 512);  // no block of this size is cached
  return ptrs;
}

TEST_F(LargeParkTest, ParkedBlocksComeBackAsExactHitsAfterALargeMiss) {
  auto a = make(4);
  void* miss = nullptr;
  const std::vector<std::size_t> sizes{2 * MiB, 3 * MiB, 4 * MiB};
  const std::vector<void*> ptrs = park_then_miss(*a, sizes, &miss);
  const MemoryStats before = a->stats();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(a->allocate(sizes[i]), ptrs[i]) << "size " << sizes[i];
  }
  EXPECT_EQ(a->stats().num_thread_cache_hits, before.num_thread_cache_hits + 3);
  for (void* p : ptrs) a->deallocate(p);
  a->deallocate(miss);
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].current, 0);
}

TEST_F(LargeParkTest, ZeroReturnsEveryCachedLargeBlockAtASearch) {
  auto a = make(0);
  void* miss = nullptr;
  const std::vector<std::size_t> sizes{2 * MiB, 3 * MiB, 4 * MiB};
  const std::vector<void*> ptrs = park_then_miss(*a, sizes, &miss);
  const MemoryStats before = a->stats();
  std::vector<void*> again;
  for (std::size_t s : sizes) again.push_back(a->allocate(s));
  EXPECT_EQ(a->stats().num_thread_cache_hits, before.num_thread_cache_hits);  // all from the pool
  for (void* p : again) a->deallocate(p);
  a->deallocate(miss);
}

// A free that finds the limit's worth of large blocks already parked sends
// them to the pool with itself: the third free here empties the cache, and
// every later request is served by the pool.
TEST_F(LargeParkTest, MoreThanTheLimitGoBackToThePool) {
  auto a = make(2);
  void* miss = nullptr;
  const std::vector<std::size_t> sizes{2 * MiB, 3 * MiB, 4 * MiB};  // three freed, limit two
  park_then_miss(*a, sizes, &miss);
  std::size_t parked = 0;
  for (const SegmentInfo& seg : a->snapshot())
    for (const BlockInfo& b : seg.blocks) parked += b.state == "thread_cached" && b.size > 1 * MiB;
  EXPECT_EQ(parked, 0u);
  const MemoryStats before = a->stats();
  std::vector<void*> again;
  for (std::size_t s : sizes) again.push_back(a->allocate(s));
  EXPECT_EQ(a->stats().num_thread_cache_hits, before.num_thread_cache_hits);
  for (void* p : again) a->deallocate(p);
  a->deallocate(miss);
}

TEST_F(LargeParkTest, ParkedBlocksReturnBeforeThePoolGrows) {
  // 40 MiB: two 20 MiB segments of four 5 MiB blocks each fill the device.
  auto a = make(4, 40 * MiB);
  std::vector<void*> first, second;
  for (int i = 0; i < 4; ++i) first.push_back(a->allocate(5 * MiB));
  for (int i = 0; i < 4; ++i) second.push_back(a->allocate(5 * MiB));
  const MemoryStats full = a->stats();
  EXPECT_EQ(full.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(40 * MiB));
  for (void* p : first) a->deallocate(p);  // four parked blocks: one whole segment
  // 20 MiB fits only in the parked blocks merged: no growth, no refusal.
  void* big = a->allocate(20 * MiB);
  ASSERT_NE(big, nullptr);
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.num_upstream_allocs, full.num_upstream_allocs);
  EXPECT_EQ(s.num_upstream_failures, full.num_upstream_failures);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(40 * MiB));
  a->deallocate(big);
  for (void* p : second) a->deallocate(p);
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].current, 0);
}

TEST_F(LargeParkTest, StatisticsStayExactWhileBlocksAreParked) {
  auto a = make(4);
  void* miss = nullptr;
  const std::vector<std::size_t> sizes{2 * MiB, 3 * MiB};
  park_then_miss(*a, sizes, &miss);
  const MemoryStats s = a->stats();
  const auto alloc = static_cast<std::int64_t>(a->allocation_size(miss));
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, alloc);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 1);
  EXPECT_EQ(s.cached_bytes[kStatAggregate].current, s.reserved_bytes[kStatAggregate].current - alloc);
  a->empty_cache();  // parked blocks go back and whole free segments to the upstream
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].current, alloc);
  a->deallocate(miss);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);
}

}  // namespace
}  // namespace genesis::memory
