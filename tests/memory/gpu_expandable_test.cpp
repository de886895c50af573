// Expandable segments on a real GPU: pages mapped through the CUDA VMM API
// must hold data, be released by compact()/empty_cache(), and survive being
// unmapped and mapped again. Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/cuda_resource.h"
#include "support/allocator_test_util.h"

#if GENESIS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace genesis::memory {
namespace {

using testing_support::MiB;

class GpuExpandableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available: expandable-segment GPU tests skipped";
    }
    resource_ = std::make_shared<CudaDeviceResource>(0);
    if (!resource_->supports_virtual_memory()) GTEST_SKIP() << "device 0 has no VMM support";
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    allocator_ = std::make_unique<CachingAllocator>(resource_, o);
  }
  std::shared_ptr<CudaDeviceResource> resource_;
  std::unique_ptr<CachingAllocator> allocator_;
};

#if GENESIS_WITH_CUDA

// Fills `bytes` at `p` with a pattern derived from `seed` and reads it back.
std::vector<std::uint32_t> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::uint32_t> host(bytes / 4);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint32_t>(i * 2654435761u + seed);
  return host;
}

// Reads `bytes` at `p` back and compares them with pattern(bytes, seed).
void verify(const void* p, std::size_t bytes, unsigned seed) {
  std::vector<std::uint32_t> back(bytes / 4, 0);
  ASSERT_EQ(cudaMemcpy(back.data(), p, back.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(back, pattern(bytes, seed));
}

void write_and_verify(void* p, std::size_t bytes, unsigned seed) {
  const std::vector<std::uint32_t> host = pattern(bytes, seed);
  ASSERT_EQ(cudaMemcpy(p, host.data(), host.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  verify(p, bytes, seed);
}

TEST_F(GpuExpandableTest, MappedPagesHoldData) {
  ASSERT_TRUE(allocator_->expandable_segments());
  std::vector<void*> ptrs;
  const std::size_t sizes[] = {512, 3 * MiB + 512, 64 * MiB, 1536, 40 * MiB};
  unsigned seed = 1;
  for (std::size_t s : sizes) {
    void* p = allocator_->allocate(s);
    ASSERT_NE(p, nullptr);
    write_and_verify(p, s & ~std::size_t{3}, seed++);
    ptrs.push_back(p);
  }
  const MemoryStats st = allocator_->stats();
  // Reserved is mapped pages: at least what is allocated, and far less than
  // the address space the segments reserve.
  EXPECT_GE(st.reserved_bytes[kStatAggregate].current, st.allocated_bytes[kStatAggregate].current);
  EXPECT_LT(st.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(200 * MiB));
  for (void* p : ptrs) allocator_->deallocate(p);
}

TEST_F(GpuExpandableTest, CompactReleasesFreePagesAndTheyComeBack) {
  void* a = allocator_->allocate(64 * MiB);
  void* b = allocator_->allocate(256 * MiB);
  void* c = allocator_->allocate(64 * MiB);
  write_and_verify(a, 64 * MiB, 7);
  write_and_verify(c, 64 * MiB, 9);
  const auto before = allocator_->stats().reserved_bytes[kStatAggregate].current;
  allocator_->deallocate(b);
  const std::size_t released = allocator_->compact();
  const auto after = allocator_->stats().reserved_bytes[kStatAggregate].current;
  // The pages wholly inside b's range (256 MiB minus at most the two shared
  // edge pages) went back to the device; a and c keep their data.
  EXPECT_GE(released, 252 * MiB);
  EXPECT_EQ(before - after, static_cast<std::int64_t>(released));
  write_and_verify(a, 64 * MiB, 11);
  write_and_verify(c, 64 * MiB, 13);
  // The hole is mapped again on demand.
  void* d = allocator_->allocate(200 * MiB);
  write_and_verify(d, 200 * MiB, 15);
  allocator_->deallocate(a);
  allocator_->deallocate(c);
  allocator_->deallocate(d);
  allocator_->empty_cache();
  EXPECT_EQ(allocator_->stats().reserved_bytes[kStatAggregate].current, 0);
}

TEST_F(GpuExpandableTest, OutOfMemoryIsExplainedAndRecoverable) {
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  try {
    (void)allocator_->allocate(total_b + 4096 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA OOM"), std::string::npos) << e.what();
  }
  // Nothing leaked; the allocator keeps working.
  EXPECT_EQ(allocator_->stats().allocated_bytes[kStatAggregate].current, 0);
  void* p = allocator_->allocate(32 * MiB);
  write_and_verify(p, 32 * MiB, 3);
  allocator_->deallocate(p);
}

// Chunks of several pages (CUDA's default, Note [Physical chunks]): a block
// reusing part of a free chunk splits it (the chunk is unmapped, the block's
// pages mapped again), and the neighbours' data does not move.
TEST_F(GpuExpandableTest, SplitChunksKeepNeighboursData) {
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  o.thread_cache = false;  // a freed block goes straight back to the pool
  allocator_ = std::make_unique<CachingAllocator>(resource_, o);
  void* a = allocator_->allocate(64 * MiB);  // one chunk of 32 pages
  void* b = allocator_->allocate(64 * MiB);
  write_and_verify(b, 64 * MiB, 21);
  std::vector<std::uint32_t> keep(64 * MiB / 4);
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<std::uint32_t>(i ^ 0x5a5a5a5au);
  ASSERT_EQ(cudaMemcpy(b, keep.data(), 64 * MiB, cudaMemcpyHostToDevice), cudaSuccess);
  allocator_->deallocate(a);
  const auto before = allocator_->stats().reserved_bytes[kStatAggregate].current;
  void* c = allocator_->allocate(10 * MiB);  // the start of a's chunk: split
  EXPECT_EQ(c, a);
  EXPECT_EQ(allocator_->stats().reserved_bytes[kStatAggregate].current, before - static_cast<std::int64_t>(54 * MiB));
  write_and_verify(c, 10 * MiB, 22);
  void* d = allocator_->allocate(20 * MiB + 512);  // after c, in the unmapped rest
  write_and_verify(d, 20 * MiB, 23);
  std::vector<std::uint32_t> back(keep.size());
  ASSERT_EQ(cudaMemcpy(back.data(), b, 64 * MiB, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, keep);
  for (void* p : {b, c, d}) allocator_->deallocate(p);
  allocator_->empty_cache();
  EXPECT_EQ(allocator_->stats().reserved_bytes[kStatAggregate].current, 0);
}

TEST_F(GpuExpandableTest, ManyMapUnmapCyclesStayConsistent) {
  for (int round = 0; round < 20; ++round) {
    std::vector<void*> ptrs;
    for (int i = 0; i < 16; ++i) ptrs.push_back(allocator_->allocate((static_cast<std::size_t>(i % 5) + 1) * 3 * MiB + 512));
    write_and_verify(ptrs[static_cast<std::size_t>(round) % ptrs.size()], 3 * MiB, static_cast<unsigned>(round));
    for (std::size_t i = 0; i < ptrs.size(); i += 2) allocator_->deallocate(ptrs[i]);
    allocator_->compact();
    for (std::size_t i = 1; i < ptrs.size(); i += 2) allocator_->deallocate(ptrs[i]);
  }
  allocator_->empty_cache();
  EXPECT_EQ(allocator_->stats().reserved_bytes[kStatAggregate].current, 0);
}

// An allocator with idle_release, over the driver with either kind of
// segment: once nothing is allocated for the idle period its cache goes back
// to the driver (cudaMemGetInfo sees it) while live blocks keep their data.
TEST_F(GpuExpandableTest, IdleReleaseGivesTheCacheBackToTheDriver) {
  for (const bool expandable : {false, true}) {
    AllocatorOptions o;
    o.expandable_segments = expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
    o.idle_release_ms = 100;
    CachingAllocator a(resource_, o);
    void* live = a.allocate(8 * MiB);
    write_and_verify(live, 8 * MiB, 31);
    void* cached = a.allocate(256 * MiB);
    write_and_verify(cached, 256 * MiB, 32);
    a.deallocate(cached);
    const std::size_t free_before = cuda::mem_get_info(0).free_bytes;
    ASSERT_GE(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(264 * MiB));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (a.stats().reserved_bytes[kStatAggregate].current >= static_cast<std::int64_t>(256 * MiB) &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_LT(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(256 * MiB))
        << (expandable ? "expandable" : "classic");
    EXPECT_GE(cuda::mem_get_info(0).free_bytes, free_before + 250 * MiB) << (expandable ? "expandable" : "classic");
    EXPECT_GE(a.stats().allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(8 * MiB));
    verify(live, 8 * MiB, 31);
    a.deallocate(live);
  }
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis::memory
