// How many blocks of one small size a thread cache keeps
// (AllocatorOptions::thread_cache_small_count): that many frees of a size go
// to the thread cache and come back as hits; the rest go to the pool.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// Allocates n blocks of `size`, frees them all, allocates n again; returns
// how many of the second round were thread-cache hits.
std::int64_t hits_after_burst(CachingAllocator& a, std::size_t size, int n) {
  std::vector<void*> ptrs;
  for (int i = 0; i < n; ++i) ptrs.push_back(a.allocate(size));
  for (void* p : ptrs) a.deallocate(p);
  const std::int64_t before = a.stats().num_thread_cache_hits;
  for (void*& p : ptrs) p = a.allocate(size);
  const std::int64_t hits = a.stats().num_thread_cache_hits - before;
  for (void* p : ptrs) a.deallocate(p);
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, 0);
  return hits;
}

TEST(ThreadCacheSmallCount, DefaultKeeps128BlocksOfOneSize) {
  EXPECT_EQ(AllocatorOptions{}.thread_cache_small_count, 128u);
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim);
  EXPECT_EQ(hits_after_burst(a, 4096, 130), 128);
  EXPECT_EQ(sim->num_misuses(), 0u);
}

TEST(ThreadCacheSmallCount, ExplicitCountIsHonoured) {
  for (bool expandable : {false, true}) {
    auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
    AllocatorOptions o = expandable ? AllocatorOptions{} : classic();
    o.expandable_segments = expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
    o.thread_cache_small_count = 3;
    CachingAllocator a(sim, o);
    EXPECT_EQ(hits_after_burst(a, 64 * KiB, 10), 3) << "expandable " << expandable;
    EXPECT_EQ(sim->num_misuses(), 0u);
  }
}

}  // namespace
}  // namespace genesis::memory
