// Physical chunks of expandable segments (Note [Physical chunks] in
// expandable_segments.cpp): how many chunks a block's pages are mapped as,
// when a chunk is split under a new block, and that no chunk is ever cut.
#include <gtest/gtest.h>

#include <memory>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using testing_support::GiB;
using testing_support::MiB;

class AllocatorChunksTest : public ::testing::Test {
 protected:
  CachingAllocator& make(std::uint32_t chunk_pages, std::uint32_t strand_pages = 0) {
    a_.reset();
    sim_ = std::make_shared<SimulatedDevice>(4 * GiB);
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    o.thread_cache = false;  // frees go straight back to the pool
    o.chunk_pages = chunk_pages;
    o.chunk_strand_pages = strand_pages;
    a_ = std::make_unique<CachingAllocator>(sim_, o);
    return *a_;
  }
  std::int64_t reserved() const { return a_->stats().reserved_bytes[kStatAggregate].current; }
  void TearDown() override {
    if (a_ == nullptr) return;
    a_->empty_cache();
    a_.reset();
    EXPECT_EQ(sim_->num_misuses(), 0u) << "a chunk was cut";
    EXPECT_EQ(sim_->mapped_bytes(), 0u);
  }
  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> a_;
};

TEST_F(AllocatorChunksTest, AutoIsOnePagePerChunkWhereMappingIsCheap) {
  CachingAllocator& a = make(0);
  void* p = a.allocate(40 * MiB);
  EXPECT_EQ(sim_->num_chunks_mapped(), 20u);
  EXPECT_EQ(sim_->num_map_calls(), 1u);  // the run in one call all the same
  a.deallocate(p);
}

TEST_F(AllocatorChunksTest, BlockInteriorIsMappedInChunksOfAtMostChunkPages) {
  CachingAllocator& a = make(8);
  void* p = a.allocate(40 * MiB);  // 20 whole pages: 8 + 8 + 4
  EXPECT_EQ(sim_->num_chunks_mapped(), 3u);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(40 * MiB));
  a.deallocate(p);
}

TEST_F(AllocatorChunksTest, PagesSharedWithANeighbourAreChunksOfTheirOwn) {
  CachingAllocator& a = make(64);
  void* p = a.allocate(41 * MiB);  // 20 whole pages and the page it shares with the free rest
  EXPECT_EQ(sim_->num_chunks_mapped(), 2u);
  void* q = a.allocate(5 * MiB);  // starts in that shared page: maps 2 more pages (41..46 MiB)
  EXPECT_EQ(sim_->num_chunks_mapped(), 3u);
  EXPECT_EQ(sim_->num_chunks_unmapped(), 0u);
  a.deallocate(p);
  // p's 20 whole pages are one chunk wholly inside free memory: releasable.
  EXPECT_EQ(a.compact(), 40 * MiB);
  a.deallocate(q);
}

TEST_F(AllocatorChunksTest, ABlockTakingPartOfAFreeChunkSplitsIt) {
  CachingAllocator& a = make(64);
  void* p = a.allocate(40 * MiB);  // one chunk of 20 pages
  a.deallocate(p);                 // free, still mapped (the cache)
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(40 * MiB));
  void* q = a.allocate(10 * MiB);  // reuses the start: the chunk would reach 15 pages past it
  EXPECT_EQ(q, p);
  EXPECT_EQ(sim_->num_chunks_unmapped(), 1u);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(10 * MiB));  // q's pages mapped again, the rest not
  a.deallocate(q);
  EXPECT_EQ(a.compact(), 10 * MiB);
}

TEST_F(AllocatorChunksTest, AChunkReachingFewPagesPastTheBlockStaysWhole) {
  CachingAllocator& a = make(64, /*strand_pages=*/15);
  void* p = a.allocate(40 * MiB);
  a.deallocate(p);
  void* q = a.allocate(10 * MiB);  // 15 pages outside q: kept mapped
  EXPECT_EQ(sim_->num_chunks_unmapped(), 0u);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(a.compact(), 0u);  // the free pages share q's chunk
  a.deallocate(q);
  EXPECT_EQ(a.compact(), 40 * MiB);

  void* r = a.allocate(40 * MiB);
  a.deallocate(r);
  void* s = a.allocate(8 * MiB);  // 16 pages outside: more than 15, split
  EXPECT_EQ(sim_->num_chunks_unmapped(), 2u);
  a.deallocate(s);
}

// Note [Stranded pages]: where mapping is costly, the pages a chunk may keep
// past a block grow with the allocated peak (0.3% of it, at least one page);
// where it is cheap nothing strands (the test above).
TEST_F(AllocatorChunksTest, WhereMappingIsCostlyTheStrandAllowanceGrowsWithTheAllocatedPeak) {
  auto costly = [this](std::size_t capacity,
                       std::uint32_t strand = AllocatorOptions::kAutoStrandPages) -> CachingAllocator& {
    a_.reset();
    sim_ = std::make_shared<SimulatedDevice>(capacity, 0, SimulatedDevice::VmmCost::parse("0.001,0.001,0.001"));
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    o.thread_cache = false;
    o.chunk_pages = 64;
    o.chunk_strand_pages = strand;
    a_ = std::make_unique<CachingAllocator>(sim_, o);
    return *a_;
  };
  // A small program: one page of allowance, so 5 pages past a block split.
  {
    CachingAllocator& a = costly(4 * GiB);
    void* p = a.allocate(40 * MiB);  // one chunk of 20 pages
    a.deallocate(p);
    void* q = a.allocate(30 * MiB);  // 5 pages of the chunk past it
    EXPECT_EQ(q, p);
    EXPECT_EQ(sim_->num_chunks_unmapped(), 1u);
    EXPECT_EQ(reserved(), static_cast<std::int64_t>(30 * MiB));
    a.deallocate(q);
  }
  // With 4 GiB allocated the allowance is 2,068 * 0.3% = 6 pages: 5 strand,
  // 10 do not.
  {
    CachingAllocator& a = costly(64 * GiB);
    void* big = a.allocate(4 * GiB);
    void* p = a.allocate(40 * MiB);
    a.deallocate(p);
    void* q = a.allocate(30 * MiB);
    EXPECT_EQ(q, p);
    EXPECT_EQ(sim_->num_chunks_unmapped(), 0u);
    EXPECT_EQ(reserved(), static_cast<std::int64_t>(4 * GiB + 40 * MiB));  // the 5 pages stay, stranded
    a.deallocate(q);
    void* r = a.allocate(20 * MiB);  // 10 pages past it: split
    EXPECT_EQ(r, p);
    EXPECT_EQ(sim_->num_chunks_unmapped(), 1u);
    EXPECT_EQ(reserved(), static_cast<std::int64_t>(4 * GiB + 20 * MiB));
    a.deallocate(r);
    a.deallocate(big);
  }
  // An explicit chunk_strand_pages still means that many pages, costly or not.
  {
    CachingAllocator& a = costly(64 * GiB, /*strand=*/0);
    void* big = a.allocate(4 * GiB);
    void* p = a.allocate(40 * MiB);
    a.deallocate(p);
    void* q = a.allocate(30 * MiB);
    EXPECT_EQ(sim_->num_chunks_unmapped(), 1u);
    a.deallocate(q);
    a.deallocate(big);
  }
}

// A new peak releases free chunks, never the chunk under a live block.
TEST_F(AllocatorChunksTest, ReleaseAtANewPeakTakesWholeFreeChunksOnly) {
  CachingAllocator& a = make(4);
  void* x = a.allocate(16 * MiB);  // chunks of 4 pages: 2 of them
  void* y = a.allocate(16 * MiB);
  a.deallocate(x);                 // 8 free mapped pages below y
  const std::int64_t high = reserved();
  void* z = a.allocate(24 * MiB);  // does not fit below y: needs 12 new pages
  // Above the high-water mark only by what the freed chunks could not cover.
  EXPECT_EQ(reserved(), high + static_cast<std::int64_t>(8 * MiB));
  a.deallocate(y);
  a.deallocate(z);
}

// A large physical allocation the device refuses even after the cache is
// released is asked for again a page per chunk, without a second flush.
TEST_F(AllocatorChunksTest, RefusedChunkIsMappedAPagePerChunk) {
  sim_ = std::make_shared<SimulatedDevice>(4 * GiB);
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  o.thread_cache = false;
  o.arenas = 1;
  o.chunk_pages = 64;
  a_ = std::make_unique<CachingAllocator>(sim_, o);
  sim_->fail_next_allocations(2);  // the chunk, and the chunk again after the flush
  void* p = a_->allocate(40 * MiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(sim_->num_chunks_mapped(), 20u);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(40 * MiB));
  EXPECT_EQ(a_->stats().num_cache_flushes, 1);
  a_->deallocate(p);
  EXPECT_EQ(a_->compact(), 40 * MiB);  // page chunks are released like any others
}


// Note [Settled segments]: unmapping waits for the segment's stream only if
// a block went back to the pool since the last wait.
TEST_F(AllocatorChunksTest, UnmappingWaitsForTheStreamOnlyAfterAFree) {
  CachingAllocator& a = make(64);
  void* p1 = a.allocate(40 * MiB);  // two chunks of 20 pages, far apart
  void* gap = a.allocate(2 * MiB);
  void* p2 = a.allocate(40 * MiB);
  a.deallocate(p1);
  a.deallocate(p2);
  EXPECT_EQ(sim_->num_stream_syncs(), 0u);
  void* q1 = a.allocate(10 * MiB);  // splits p1's chunk: waits for the frees above
  EXPECT_EQ(sim_->num_chunks_unmapped(), 1u);
  EXPECT_EQ(sim_->num_stream_syncs(), 1u);
  void* q2 = a.allocate(34 * MiB);  // splits p2's (too large for p1's rest): nothing was freed since the wait
  EXPECT_EQ(sim_->num_chunks_unmapped(), 2u);
  EXPECT_EQ(sim_->num_stream_syncs(), 1u);
  a.deallocate(q1);  // a free: the next unmap waits again
  EXPECT_EQ(a.compact(), 10 * MiB);
  EXPECT_EQ(sim_->num_stream_syncs(), 2u);
  a.deallocate(q2);
  a.deallocate(gap);
  EXPECT_GT(a.compact(), 0u);
  EXPECT_EQ(sim_->num_stream_syncs(), 3u);
  EXPECT_EQ(reserved(), 0);
}

}  // namespace
}  // namespace genesis::memory
