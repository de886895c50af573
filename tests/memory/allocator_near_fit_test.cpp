// Near fits of the thread cache (Note [Near fits] in src/memory/arena.cpp):
// a small request whose exact size is not cached takes the smallest cached
// block at most 1/N larger, whole, and the statistics count the block's size.
#include <gtest/gtest.h>

#include <memory>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

class NearFitTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(std::uint32_t near_fit = 4) {
    sim_ = std::make_shared<SimulatedDevice>(1 * GiB);
    AllocatorOptions o = classic();
    o.thread_cache_near_fit = near_fit;
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

TEST_F(NearFitTest, SlightlySmallerRequestReusesTheCachedBlockWhole) {
  auto a = make();
  void* keep = a->allocate(4 * KiB);  // keeps the segment from being one free block
  void* p = a->allocate(64 * KiB);
  a->deallocate(p);  // into the thread cache
  const MemoryStats before = a->stats();
  void* q = a->allocate(60 * KiB);  // 64 KiB is 6.7% larger: a near fit
  EXPECT_EQ(q, p);
  EXPECT_EQ(a->allocation_size(q), 64 * KiB);
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.num_thread_cache_hits, before.num_thread_cache_hits + 1);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(68 * KiB));
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, static_cast<std::int64_t>(64 * KiB));
  EXPECT_EQ(s.num_upstream_allocs, before.num_upstream_allocs);
  // Freed, it goes back to the list of its own size: an exact hit for 64 KiB.
  a->deallocate(q);
  EXPECT_EQ(a->allocate(64 * KiB), p);
  a->deallocate(p);
  a->deallocate(keep);
}

TEST_F(NearFitTest, TakesTheSmallestBlockWithinTheBound) {
  auto a = make();
  void* b80 = a->allocate(80 * KiB);
  void* b70 = a->allocate(70 * KiB);
  void* b90 = a->allocate(90 * KiB);
  a->deallocate(b90);
  a->deallocate(b80);
  a->deallocate(b70);
  void* q = a->allocate(64 * KiB);  // 70 and 80 KiB are within 1/4; 70 is the smaller
  EXPECT_EQ(q, b70);
  void* r = a->allocate(64 * KiB);
  EXPECT_EQ(r, b80);
  void* t = a->allocate(64 * KiB);  // 90 KiB is 40% larger: not a near fit
  EXPECT_NE(t, b90);
  EXPECT_EQ(a->allocation_size(t), 64 * KiB);
  for (void* p : {q, r, t}) a->deallocate(p);
}

TEST_F(NearFitTest, BeyondTheBoundTheBlockIsNotUsed) {
  auto a = make();
  void* p = a->allocate(64 * KiB);
  a->deallocate(p);
  void* q = a->allocate(48 * KiB);  // 64 KiB is 33% larger
  EXPECT_NE(q, p);
  EXPECT_EQ(a->allocation_size(q), 48 * KiB);
  a->deallocate(q);
}

TEST_F(NearFitTest, ZeroMeansExactSizesOnly) {
  auto a = make(/*near_fit=*/0);
  void* p = a->allocate(64 * KiB);
  a->deallocate(p);
  void* q = a->allocate(60 * KiB);
  EXPECT_EQ(a->allocation_size(q), 60 * KiB);
  a->deallocate(q);
}

TEST_F(NearFitTest, LargePoolIsExempt) {
  auto a = make();
  void* keep = a->allocate(3 * MiB);
  void* p = a->allocate(4 * MiB);
  a->deallocate(p);
  void* q = a->allocate(3 * MiB + 512 * KiB);  // 4 MiB is 14% larger, but large blocks need exact sizes
  EXPECT_EQ(a->allocation_size(q), 3 * MiB + 512 * KiB);
  a->deallocate(q);
  a->deallocate(keep);
}

TEST_F(NearFitTest, EmptyListsWithStaleMarksAreSkipped) {
  auto a = make();
  // 66 KiB is cached, then taken again by an exact hit: its list is empty but
  // still marked; a later near-fit search must pass over it.
  void* p66 = a->allocate(66 * KiB);
  void* p72 = a->allocate(72 * KiB);
  a->deallocate(p66);
  a->deallocate(p72);
  void* again = a->allocate(66 * KiB);
  EXPECT_EQ(again, p66);
  void* q = a->allocate(64 * KiB);
  EXPECT_EQ(q, p72);
  a->deallocate(again);
  a->deallocate(q);
}

TEST_F(NearFitTest, BoundForAnyNIsExact) {
  // N = 3: the bound i + i/3 (in 512-byte bins) without a division on the hot
  // path (CachingAllocator::near_mul_). 60 KiB = 120 bins: up to 160 bins =
  // 80 KiB fits; 59.5 KiB = 119 bins: up to 158 bins = 79 KiB, so 80 does not.
  auto a = make(3);
  void* keep = a->allocate(4 * KiB);
  void* p = a->allocate(80 * KiB);
  a->deallocate(p);
  void* q = a->allocate(59 * KiB + 512);
  EXPECT_NE(q, p);
  EXPECT_EQ(a->allocation_size(q), 59 * KiB + 512);
  void* r = a->allocate(60 * KiB);
  EXPECT_EQ(r, p);
  for (void* x : {q, r, keep}) a->deallocate(x);
}

TEST_F(NearFitTest, SearchCrossesMaskWords) {
  // Marks are 64 bins to a word: 55 KiB is bin 110 (word 1), 65 KiB bin 130
  // (word 2), within 110 + 110/4 = 137.
  auto a = make();
  void* keep = a->allocate(4 * KiB);
  void* p = a->allocate(65 * KiB);
  a->deallocate(p);
  void* q = a->allocate(55 * KiB);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a->allocation_size(q), 65 * KiB);
  a->deallocate(q);
  a->deallocate(keep);
}

TEST(NearFitExpandableTest, ExpandableSegmentsUseExactSizesOnly) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  CachingAllocator a(sim, o);
  void* p = a.allocate(64 * KiB);
  a.deallocate(p);
  void* q = a.allocate(60 * KiB);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.allocation_size(q), 60 * KiB);
  a.deallocate(q);
  EXPECT_EQ(a.allocate(64 * KiB), p);  // still cached, exact hit
  a.deallocate(p);
}

}  // namespace
}  // namespace genesis::memory
