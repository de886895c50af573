// Note [Flush until fit] (src/memory/arena.cpp): before the small pool grows,
// the thread's cached small blocks go back to it one at a time, largest first,
// until one merges into a block that fits; the others stay cached. The pool
// grows only once every cached block is back.
#include <gtest/gtest.h>

#include <memory>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

class FlushUntilFitTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(AllocatorOptions o = classic()) {
    sim_ = std::make_shared<SimulatedDevice>(1 * GiB);
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

TEST_F(FlushUntilFitTest, ReturnsOnlyWhatTheRequestNeeds) {
  auto a = make();
  // One 2 MiB small segment, tiled by five blocks, all freed into the cache.
  void* b1 = a->allocate(512 * KiB);
  void* b2 = a->allocate(512 * KiB);
  void* c1 = a->allocate(256 * KiB);
  void* c2 = a->allocate(256 * KiB);
  void* b3 = a->allocate(512 * KiB);
  ASSERT_EQ(a->stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));
  ASSERT_EQ(addr_of(b2), addr_of(b1) + 512 * KiB);
  for (void* p : {b1, b2, c1, c2, b3}) a->deallocate(p);
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 5u);
  const MemoryStats before = a->stats();
  // 600 KiB: no cached block is a near fit (all are smaller) and the pool has
  // nothing free. The 512 KiB blocks go back first: b3 (alone at the end,
  // its neighbour c2 still cached), then b2, then b1, which merges with b2
  // into 1 MiB: a fit. The 256 KiB blocks stay cached.
  void* p = a->allocate(600 * KiB);
  const MemoryStats after = a->stats();
  EXPECT_EQ(p, b1);
  EXPECT_EQ(after.num_upstream_allocs, before.num_upstream_allocs);
  EXPECT_EQ(after.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 2u);
  EXPECT_EQ(after.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(600 * KiB));
  // The blocks kept are still hits.
  void* c = a->allocate(256 * KiB);
  EXPECT_TRUE(c == c1 || c == c2);
  EXPECT_EQ(a->stats().num_thread_cache_hits, after.num_thread_cache_hits + 1);
  a->deallocate(c);
  a->deallocate(p);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);
}

TEST_F(FlushUntilFitTest, GrowsOnlyAfterEveryBlockIsBack) {
  auto a = make();
  void* x = a->allocate(768 * KiB);
  void* keep = a->allocate(512 * KiB);  // stays live between x and y
  void* y = a->allocate(768 * KiB);
  a->deallocate(x);
  a->deallocate(y);
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 2u);
  const MemoryStats before = a->stats();
  // 1 MiB fits neither cached block nor anything they merge into: both go
  // back, then the pool grows.
  void* p = a->allocate(1 * MiB);
  const MemoryStats after = a->stats();
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  EXPECT_EQ(after.num_upstream_allocs, before.num_upstream_allocs + 1);
  EXPECT_EQ(after.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(4 * MiB));
  // The returned blocks are free in the pool and serve what fits.
  void* q = a->allocate(700 * KiB);
  EXPECT_TRUE(q == x || q == y);
  EXPECT_EQ(a->stats().num_upstream_allocs, after.num_upstream_allocs);
  for (void* v : {p, q, keep}) a->deallocate(v);
}

// Only the requesting stream's cache is flushed: blocks cached for another
// stream live in that stream's segments. (With lending across streams on, a
// pool about to grow takes them back too, to lend them:
// allocator_borrow_test.cpp.)
TEST_F(FlushUntilFitTest, LeavesOtherStreamsCachesAlone) {
  AllocatorOptions o = classic();
  o.stream_borrow = false;
  auto a = make(o);
  void* s1 = a->allocate(512 * KiB, /*stream=*/1);
  a->deallocate(s1);  // into the thread's stream-1 cache
  void* x = a->allocate(1 * MiB, /*stream=*/0);
  void* y = a->allocate(1 * MiB, /*stream=*/0);  // stream 0's segment is full
  a->deallocate(x);
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 2u);
  const MemoryStats before = a->stats();
  // 768 KiB: x (1 MiB) is more than 1/4 larger, so no near fit; the flush
  // gives x back, which fits.
  void* p = a->allocate(768 * KiB, /*stream=*/0);
  EXPECT_EQ(p, x);
  EXPECT_EQ(a->stats().num_upstream_allocs, before.num_upstream_allocs);
  const auto snap = a->snapshot();
  EXPECT_EQ(count_blocks(snap, "thread_cached"), 1u);  // s1, stream 1's
  for (void* v : {p, y}) a->deallocate(v);
  EXPECT_EQ(a->allocate(512 * KiB, /*stream=*/1), s1);
  a->deallocate(s1);
}

}  // namespace
}  // namespace genesis::memory
