// CachingAllocator::allocate_at: a block re-created at a given address, as
// restoring a CUDA graph pool to a checkpoint needs. The range must lie free
// inside one classic segment; what lies before and after it stays free and
// usable, the statistics count it as any allocation, and every misuse is a
// clear error that leaves the allocator as it was.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

class AllocateAtTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    sim_ = std::make_shared<SimulatedDevice>(256 * MiB);
    AllocatorOptions o = classic();
    o.thread_cache = GetParam();
    alloc_ = std::make_unique<CachingAllocator>(sim_, o);
  }
  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> alloc_;
};

TEST_P(AllocateAtTest, RecreatesFreedBlocksAtTheirAddresses) {
  CachingAllocator& a = *alloc_;
  // Four blocks of one large segment, as a capture would leave them.
  std::vector<void*> p;
  for (int i = 0; i < 4; ++i) p.push_back(a.allocate(4 * MiB));
  const std::vector<std::size_t> sizes = {a.allocation_size(p[0]), a.allocation_size(p[1]), a.allocation_size(p[2]),
                                          a.allocation_size(p[3])};
  const MemoryStats before = a.stats();
  for (void* q : p) a.deallocate(q);
  a.check_invariants();
  // Back in another order: the middle ones first, then the ends.
  for (int i : {2, 1, 3, 0}) {
    void* q = a.allocate_at(p[static_cast<std::size_t>(i)], sizes[static_cast<std::size_t>(i)], 3 * MiB);
    EXPECT_EQ(q, p[static_cast<std::size_t>(i)]);
    EXPECT_EQ(a.allocation_size(q), sizes[static_cast<std::size_t>(i)]);
    a.check_invariants();
  }
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.allocated_bytes[kStatAggregate].current, before.allocated_bytes[kStatAggregate].current);
  EXPECT_EQ(after.reserved_bytes[kStatAggregate].current, before.reserved_bytes[kStatAggregate].current);
  EXPECT_EQ(after.allocation_count[kStatAggregate].current, 4);
  EXPECT_EQ(after.requested_bytes[kStatAggregate].current, 4 * 3 * MiB);
  for (void* q : p) a.deallocate(q);
  a.check_invariants();
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, 0);
}

TEST_P(AllocateAtTest, LeavesWhatLiesAroundTheRangeFreeAndUsable) {
  CachingAllocator& a = *alloc_;
  void* big = a.allocate(16 * MiB);
  const std::size_t big_size = a.allocation_size(big);
  a.deallocate(big);
  // A block carved from the middle of the free segment.
  void* mid = a.allocate_at(at(big, 4 * MiB), 2 * MiB, 2 * MiB);
  EXPECT_EQ(mid, at(big, 4 * MiB));
  a.check_invariants();
  // The 4 MiB before it and the rest after it serve requests of their size.
  void* before = a.allocate(4 * MiB);
  EXPECT_EQ(before, big);
  void* after = a.allocate(big_size - 6 * MiB);
  EXPECT_EQ(after, at(big, 6 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(big_size));
  a.check_invariants();
  for (void* q : {before, mid, after}) a.deallocate(q);
  a.check_invariants();
  // Everything merged back into one free block: the whole segment fits again.
  void* again = a.allocate(big_size);
  EXPECT_EQ(again, big);
  a.deallocate(again);
}

TEST_P(AllocateAtTest, RefusesRangesThatAreNotFreeOrNotHeldWithAClearError) {
  CachingAllocator& a = *alloc_;
  void* x = a.allocate(4 * MiB);
  void* y = a.allocate(4 * MiB);
  const std::size_t y_size = a.allocation_size(y);
  auto message = [&](void* ptr, std::size_t size) {
    try {
      a.allocate_at(ptr, size, size);
    } catch (const InvalidArgumentError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::int64_t allocated = a.stats().allocated_bytes[kStatAggregate].current;
  EXPECT_NE(message(y, y_size).find("in use"), std::string::npos);
  int local = 0;
  EXPECT_NE(message(&local, 512).find("no segment"), std::string::npos);
  a.deallocate(y);
  const std::int64_t freed = a.stats().allocated_bytes[kStatAggregate].current;
  EXPECT_EQ(freed, allocated - static_cast<std::int64_t>(y_size));
  EXPECT_NE(message(y, 1000).find("multiples of 512"), std::string::npos);
  EXPECT_NE(message(at(y, 100), 512).find("multiples of 512"), std::string::npos);
  // Starting in the free block but running on into x's (x lies before y, so
  // ask from inside x's block instead).
  EXPECT_NE(message(at(x, 512), y_size).find("in use"), std::string::npos);
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, freed);
  a.check_invariants();
  // The refusals changed nothing: y's range can still be taken back.
  EXPECT_EQ(a.allocate_at(y, y_size, 1), y);
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, allocated);
  a.deallocate(y);
  a.deallocate(x);
  a.check_invariants();
}

TEST(AllocateAtTest, RefusesExpandableSegments) {
  auto sim = std::make_shared<SimulatedDevice>(256 * MiB);
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  CachingAllocator a(sim, o);
  void* p = a.allocate(4 * MiB);
  const std::size_t size = a.allocation_size(p);
  a.deallocate(p);
  EXPECT_THROW(a.allocate_at(p, size, size), InvalidArgumentError);
  a.check_invariants();
}

// A graph pool's allocator keeps its segments: a replay writes the
// capture's temporaries into blocks that are free between replays, so not
// even out of memory may hand a free segment back.
TEST(KeepSegmentsTest, NoSegmentGoesBackWhileTheAllocatorLives) {
  auto sim = std::make_shared<SimulatedDevice>(64 * MiB);
  AllocatorOptions o = classic();
  o.keep_segments = true;
  o.cache_size_limit = 0;
  CachingAllocator a(sim, o);
  void* p = a.allocate(40 * MiB);
  a.deallocate(p);
  const std::int64_t reserved = a.stats().reserved_bytes[kStatAggregate].current;
  EXPECT_GE(reserved, 40 * static_cast<std::int64_t>(MiB));
  a.empty_cache();
  a.collect_garbage(std::chrono::nanoseconds(0));
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, reserved);
  // 40 MiB more does not fit beside the kept segment: out of memory, and the
  // segment is still there (a plain allocator would have released it and
  // succeeded).
  EXPECT_THROW(a.allocate(48 * MiB), OutOfMemoryError);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, reserved);
  a.check_invariants();

  AllocatorOptions plain = classic();
  CachingAllocator b(std::make_shared<SimulatedDevice>(64 * MiB), plain);
  b.deallocate(b.allocate(40 * MiB));
  void* q = b.allocate(48 * MiB);
  b.deallocate(q);
}

INSTANTIATE_TEST_SUITE_P(ThreadCache, AllocateAtTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? std::string("Cached") : std::string("Uncached"); });

}  // namespace
}  // namespace genesis::memory
