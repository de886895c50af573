// The simulated device's cost model for page mappings (Note [Simulated
// mapping costs] in simulated_device.cpp): parsing, what it changes about the
// device (cheap_page_mapping, hence Expandable::kAuto), and the page counters
// the allocator's no-churn tests read.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using std::chrono::nanoseconds;
using VmmCost = SimulatedDevice::VmmCost;
using testing_support::GiB;
using testing_support::MiB;

TEST(SimulatedVmmCostTest, ParsesNamesAndNumbers) {
  EXPECT_FALSE(VmmCost::parse("none").any());
  EXPECT_FALSE(VmmCost{}.any());
  const VmmCost cuda = VmmCost::parse("cuda");
  EXPECT_TRUE(cuda.any());
  EXPECT_EQ(cuda.map, VmmCost::cuda().map);
  EXPECT_EQ(cuda.map, nanoseconds(7320));
  EXPECT_EQ(cuda.set_access, nanoseconds(21740));
  EXPECT_EQ(cuda.unmap, nanoseconds(21590));
  const VmmCost c = VmmCost::parse("1,2.5,0");
  EXPECT_EQ(c.map, nanoseconds(1000));
  EXPECT_EQ(c.set_access, nanoseconds(2500));
  EXPECT_EQ(c.unmap, nanoseconds(0));
}

TEST(SimulatedVmmCostTest, RejectsMalformedText) {
  for (const char* bad : {"", "fast", "1,2", "1,2,x", "1,,3", "-1,0,0", "1,2,3,4"}) {
    EXPECT_THROW((void)VmmCost::parse(bad), InvalidArgumentError) << bad;
  }
}

TEST(SimulatedVmmCostTest, CostlyMappingIsNotCheapAndAutoPicksClassic) {
  auto free_maps = std::make_shared<SimulatedDevice>(1 * GiB);
  EXPECT_TRUE(free_maps->cheap_page_mapping());
  EXPECT_TRUE(CachingAllocator(free_maps).expandable_segments());

  auto cuda_like = std::make_shared<SimulatedDevice>(1 * GiB, 1, VmmCost::parse("0.01,0.01,0.01"));
  EXPECT_FALSE(cuda_like->cheap_page_mapping());
  EXPECT_TRUE(cuda_like->supports_virtual_memory());
  EXPECT_FALSE(CachingAllocator(cuda_like).expandable_segments());  // kAuto: like CUDA
  AllocatorOptions on;
  on.expandable_segments = AllocatorOptions::Expandable::kOn;
  EXPECT_TRUE(CachingAllocator(cuda_like, on).expandable_segments());
}

TEST(SimulatedVmmCostTest, CountsPagesMappedAndUnmapped) {
  SimulatedDevice dev(1 * GiB, 0, VmmCost::parse("0.01,0.01,0.01"));
  const std::uintptr_t base = dev.reserve_address_range(64 * MiB);
  ASSERT_NE(base, 0u);
  ASSERT_TRUE(dev.map_pages(base, 6 * MiB, 2 * MiB));
  ASSERT_TRUE(dev.map_pages(base + 8 * MiB, 2 * MiB, 2 * MiB));
  EXPECT_EQ(dev.num_map_calls(), 2u);
  EXPECT_EQ(dev.num_pages_mapped(), 4u);
  EXPECT_EQ(dev.mapped_bytes(), 8 * MiB);
  dev.unmap_pages(base + 2 * MiB, 4 * MiB);
  EXPECT_EQ(dev.num_pages_unmapped(), 2u);
  dev.unmap_pages(base + 2 * MiB, 2 * MiB);  // no longer mapped: a misuse, not a page
  EXPECT_EQ(dev.num_pages_unmapped(), 2u);
  EXPECT_EQ(dev.num_misuses(), 1u);
  // A refused mapping (capacity) maps nothing and counts no page.
  dev.fail_next_allocations(1);
  EXPECT_FALSE(dev.map_pages(base + 20 * MiB, 2 * MiB, 2 * MiB));
  EXPECT_EQ(dev.num_pages_mapped(), 4u);
  dev.unmap_pages(base, 2 * MiB);
  dev.unmap_pages(base + 8 * MiB, 2 * MiB);
  dev.release_address_range(base, 64 * MiB);
  EXPECT_EQ(dev.num_pages_unmapped(), 4u);
  EXPECT_EQ(dev.mapped_bytes(), 0u);
}

// One map_pages call of several chunks: a head per chunk; unmapping part of
// a chunk is a misuse (CUDA cannot), what is left of it becomes a chunk.
TEST(SimulatedVmmCostTest, ChunksAreUnmappedWhole) {
  SimulatedDevice dev(1 * GiB);
  const std::uintptr_t base = dev.reserve_address_range(64 * MiB);
  ASSERT_NE(base, 0u);
  EXPECT_THROW((void)dev.map_pages(base, 6 * MiB, 4 * MiB), InvalidArgumentError);  // 4 does not divide 6
  EXPECT_THROW((void)dev.map_pages(base, 8 * MiB, 3 * MiB), InvalidArgumentError);  // not whole pages
  ASSERT_TRUE(dev.map_pages(base, 8 * MiB, 4 * MiB));   // two chunks of two pages
  ASSERT_TRUE(dev.map_pages(base + 8 * MiB, 6 * MiB, 6 * MiB));  // one chunk of three
  EXPECT_EQ(dev.num_chunks_mapped(), 3u);
  EXPECT_EQ(dev.num_map_calls(), 2u);
  dev.unmap_pages(base, 4 * MiB);  // the first chunk, whole
  EXPECT_EQ(dev.num_misuses(), 0u);
  EXPECT_EQ(dev.num_chunks_unmapped(), 1u);
  dev.unmap_pages(base + 4 * MiB, 6 * MiB);  // the second chunk and the first page of the third
  EXPECT_EQ(dev.num_misuses(), 1u);
  EXPECT_EQ(dev.mapped_bytes(), 4 * MiB);
  dev.unmap_pages(base + 10 * MiB, 4 * MiB);  // the rest of the cut chunk, whole again
  EXPECT_EQ(dev.num_misuses(), 1u);
  EXPECT_EQ(dev.mapped_bytes(), 0u);
  dev.release_address_range(base, 64 * MiB);
  EXPECT_EQ(dev.num_misuses(), 1u);
}

// A mapping costs map + set_access per chunk, not per page.
TEST(SimulatedVmmCostTest, CostIsPerChunk) {
  SimulatedDevice dev(1 * GiB, 0, VmmCost::parse("0,2000,0"));  // 2 ms per chunk
  const std::uintptr_t base = dev.reserve_address_range(64 * MiB);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(dev.map_pages(base, 32 * MiB, 32 * MiB));  // 16 pages, one chunk
  const auto one = std::chrono::steady_clock::now() - t0;
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(dev.map_pages(base + 32 * MiB, 8 * MiB, 2 * MiB));  // 4 chunks
  const auto four = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(one, std::chrono::milliseconds(2));
  EXPECT_LT(one, std::chrono::milliseconds(32));  // per page it would be 16 x 2 ms
  EXPECT_GE(four, std::chrono::milliseconds(8));
  dev.unmap_pages(base, 40 * MiB);
  dev.release_address_range(base, 64 * MiB);
  EXPECT_EQ(dev.num_misuses(), 0u);
}

}  // namespace
}  // namespace genesis::memory
