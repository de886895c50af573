// The caching allocator's contract, as a value-parameterised GoogleTest suite
// run over every upstream resource.
//
// Include this header from exactly ONE .cpp per test binary and instantiate
// the suite there:
//   INSTANTIATE_TEST_SUITE_P(Host, AllocatorContractTest,
//                            ::testing::Values(ContractUpstream{...}), contract_case_name);
// tests/memory/allocator_contract_test.cpp instantiates it over HostResource
// and SimulatedDevice (CPU binary); tests/memory/gpu_allocator_test.cpp over
// CudaDeviceResource and PinnedHostResource (GPU binary, skipped without a
// GPU). The bodies below use stream 0 only, so they hold for every upstream.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/upstream.h"
#include "support/allocator_test_util.h"

namespace genesis::memory::testing_support {

/// One upstream under test and what the suite may do with its memory.
struct ContractUpstream {
  std::string name;  // test-name suffix: [A-Za-z0-9_]
  std::function<std::shared_ptr<UpstreamResource>()> make;
  bool needs_cuda = false;
  /// Writes `pattern` over [p, p + n) (null: the memory is not addressable,
  /// as on the simulated device).
  std::function<void(void* p, std::size_t n, unsigned char pattern)> fill;
  /// True when [p, p + n) holds `pattern` everywhere.
  std::function<bool(const void* p, std::size_t n, unsigned char pattern)> check;
  /// Bytes the upstream has handed out and not taken back (null: unknown).
  std::function<std::size_t(UpstreamResource&)> in_use;
  /// Events recorded and not released (null: unknown).
  std::function<std::size_t(UpstreamResource&)> outstanding_events;
  /// Calls the upstream saw as misuse (bad frees, unknown events; null: unknown).
  std::function<std::size_t(UpstreamResource&)> misuses;
  /// Virtual address ranges reserved and not released (null: unknown).
  std::function<std::size_t(UpstreamResource&)> reserved_ranges;
  /// Run with expandable segments (AllocatorOptions::Expandable::kOn; skipped
  /// where the upstream has no virtual memory). Tests of the classic segment
  /// layout skip themselves in this mode.
  bool expandable = false;
  /// AllocatorOptions::chunk_pages for the expandable runs (0: the upstream's
  /// default, Note [Physical chunks]).
  std::uint32_t chunk_pages = 0;
};

/// gtest prints parameters of failing tests: the name, not the bytes.
inline void PrintTo(const ContractUpstream& c, std::ostream* os) { *os << c.name; }

inline std::string contract_case_name(const ::testing::TestParamInfo<ContractUpstream>& info) {
  return info.param.name;
}

// For tests of the classic segment layout (segment sizes, splitting rules).
#define GENESIS_SKIP_UNLESS_CLASSIC()                                                              \
  do {                                                                                             \
    if (GetParam().expandable)                                                                     \
      GTEST_SKIP() << "classic segment layout: covered by the classic instantiation of this upstream"; \
  } while (0)

class AllocatorContractTest : public ::testing::TestWithParam<ContractUpstream> {
 protected:
  void SetUp() override {
    if (GetParam().needs_cuda && cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (cuda::compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): allocator contract on " << GetParam().name << " skipped";
    }
    upstream_ = GetParam().make();
    ASSERT_NE(upstream_, nullptr);
    if (GetParam().expandable && !upstream_->supports_virtual_memory())
      GTEST_SKIP() << upstream_->name() << " has no virtual memory support: no expandable segments";
  }

  void TearDown() override {
    if (upstream_ == nullptr) return;
    // Every allocator of the test is gone by now: nothing may be left upstream.
    if (GetParam().in_use) {
      EXPECT_EQ(GetParam().in_use(*upstream_), 0u) << "upstream memory leaked";
    }
    if (GetParam().outstanding_events) {
      EXPECT_EQ(GetParam().outstanding_events(*upstream_), 0u) << "upstream events leaked";
    }
    if (GetParam().misuses) {
      EXPECT_EQ(GetParam().misuses(*upstream_), 0u) << "the allocator misused its upstream";
    }
    if (GetParam().reserved_ranges) {
      EXPECT_EQ(GetParam().reserved_ranges(*upstream_), 0u) << "address ranges leaked";
    }
  }

  // Classic segments, or expandable ones for the expandable instantiations.
  std::unique_ptr<CachingAllocator> make_allocator(AllocatorOptions options = {}) {
    options.expandable_segments =
        GetParam().expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
    if (GetParam().chunk_pages != 0) options.chunk_pages = GetParam().chunk_pages;
    return std::make_unique<CachingAllocator>(upstream_, options);
  }
  static AllocatorOptions no_thread_cache() {
    AllocatorOptions o;
    o.thread_cache = false;
    return o;
  }

  bool addressable() const { return static_cast<bool>(GetParam().fill); }

  std::shared_ptr<UpstreamResource> upstream_;
};

// allocate(0) is nullptr, deallocate(nullptr) a no-op; neither changes state.
TEST_P(AllocatorContractTest, ZeroBytesAndNullptr) {
  auto a = make_allocator();
  const MemoryStats before = a->stats();
  EXPECT_EQ(a->allocate(0), nullptr);
  EXPECT_EQ(a->allocate(0, 0), nullptr);
  EXPECT_EQ(a->allocate_block(0), nullptr);
  EXPECT_NO_THROW(a->deallocate(nullptr));
  EXPECT_NO_THROW(a->free_block(nullptr));
  EXPECT_FALSE(a->owns(nullptr));
  EXPECT_TRUE(StatsEqual(before, a->stats()));
  EXPECT_EQ(a->stats().num_allocs, 0);
  EXPECT_TRUE(a->snapshot().empty());
}

// Live allocations are 512-aligned, distinct and never overlap; their sizes
// are the request rounded to 512 (small pool exactly; large pool at most the
// unsplittable remainder of 1 MiB more).
TEST_P(AllocatorContractTest, AlignedDistinctNonOverlapping) {
  auto a = make_allocator();
  const std::vector<std::size_t> sizes = {1,       2,       511,         512,     513,         1000,
                                          4096,    4097,    65537,       1 * MiB - 1, 1 * MiB, 1 * MiB + 1,
                                          3 * MiB + 7, 700 * KiB, 12 * MiB, 5,       100,         2 * MiB};
  LiveRanges ranges;
  std::vector<void*> ptrs;
  for (std::size_t n : sizes) {
    void* p = a->allocate(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(addr_of(p) % 512, 0u) << n;
    EXPECT_TRUE(a->owns(p));
    const std::size_t sz = a->allocation_size(p);
    EXPECT_EQ(sz % 512, 0u) << n;
    EXPECT_GE(sz, round512(n)) << n;
    if (round512(n) <= 1 * MiB) {
      EXPECT_EQ(sz, round512(n)) << n;
    } else {
      EXPECT_LE(sz - round512(n), 1 * MiB) << n;
    }
    const std::string conflict = ranges.insert(addr_of(p), sz);
    EXPECT_TRUE(conflict.empty()) << "allocation of " << n << " bytes: " << conflict;
    ptrs.push_back(p);
  }
  EXPECT_TRUE(SnapshotConsistent(a->snapshot()));
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, static_cast<std::int64_t>(sizes.size()));
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(ranges.total_bytes()));
  if (addressable()) {
    // Every allocation writable over its whole size, and no write reaches
    // another allocation.
    for (std::size_t i = 0; i < ptrs.size(); ++i)
      GetParam().fill(ptrs[i], a->allocation_size(ptrs[i]), static_cast<unsigned char>(0x11 + i));
    for (std::size_t i = 0; i < ptrs.size(); ++i)
      EXPECT_TRUE(GetParam().check(ptrs[i], a->allocation_size(ptrs[i]), static_cast<unsigned char>(0x11 + i)))
          << "allocation " << i << " (" << sizes[i] << " bytes) was overwritten";
  }
  for (void* p : ptrs) a->deallocate(p);
  for (void* p : ptrs) EXPECT_FALSE(a->owns(p));
  EXPECT_EQ(a->stats().allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].current, 0);
}

// On an empty allocator a request of n bytes takes a segment of the documented
// size from the upstream, and hands out the documented block size.
TEST_P(AllocatorContractTest, SegmentAndBlockSizes) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  struct Case {
    std::size_t bytes;
    std::size_t segment;
    std::size_t block;
    const char* pool;
  };
  const std::vector<Case> cases = {
      {1, 2 * MiB, 512, "small"},
      {511, 2 * MiB, 512, "small"},
      {513, 2 * MiB, 1024, "small"},
      {1000, 2 * MiB, 1024, "small"},
      {1 * MiB - 1, 2 * MiB, 1 * MiB, "small"},
      {1 * MiB, 2 * MiB, 1 * MiB, "small"},                     // largest small request
      {1 * MiB + 1, 20 * MiB, 1 * MiB + 512, "large"},          // smallest large request
      {3 * MiB + 7, 20 * MiB, 3 * MiB + 512, "large"},
      {10 * MiB - 512, 20 * MiB, 10 * MiB - 512, "large"},      // last size sharing a 20 MiB segment
      {10 * MiB, 10 * MiB, 10 * MiB, "large"},                  // >= 10 MiB: rounded to 2 MiB
      {11 * MiB, 12 * MiB, 12 * MiB, "large"},                  // 1 MiB left: too small to split
      {13 * MiB + 1, 14 * MiB, 14 * MiB, "large"},
      {19 * MiB + 512, 20 * MiB, 20 * MiB, "large"},
      {33 * MiB + 1, 34 * MiB, 34 * MiB, "large"},
  };
  for (const AllocatorOptions& opts : {AllocatorOptions{}, no_thread_cache()}) {
    auto a = make_allocator(opts);
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << c.bytes << " bytes, thread_cache=" << opts.thread_cache.resolve(true));
      ASSERT_EQ(expected_segment_size(c.bytes), c.segment);  // the table agrees with the helper
      ASSERT_EQ(expected_fresh_block_size(c.bytes), c.block);
      const std::int64_t upstream_before = a->stats().num_upstream_allocs;
      void* p = a->allocate(c.bytes);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(a->allocation_size(p), c.block);
      const auto snap = a->snapshot();
      ASSERT_EQ(snap.size(), 1u);
      EXPECT_EQ(snap[0].size, c.segment);
      EXPECT_EQ(snap[0].pool, c.pool);
      EXPECT_EQ(snap[0].address, addr_of(p));
      EXPECT_EQ(snap[0].allocated_bytes, c.block);
      ASSERT_FALSE(snap[0].blocks.empty());
      EXPECT_EQ(snap[0].blocks[0].state, "allocated");
      EXPECT_EQ(snap[0].blocks[0].requested, c.bytes);
      EXPECT_EQ(snap[0].blocks.size(), c.block == c.segment ? 1u : 2u);
      EXPECT_TRUE(SnapshotConsistent(snap));
      const MemoryStats s = a->stats();
      EXPECT_EQ(s.num_upstream_allocs, upstream_before + 1);
      EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(c.segment));
      EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(c.block));
      EXPECT_EQ(s.requested_bytes[kStatAggregate].current, static_cast<std::int64_t>(c.bytes));
      const int pool = std::string(c.pool) == "small" ? kStatSmallPool : kStatLargePool;
      EXPECT_EQ(s.reserved_bytes[pool].current, static_cast<std::int64_t>(c.segment));
      EXPECT_EQ(s.segment_count[pool].current, 1);
      a->deallocate(p);
      a->empty_cache();
      EXPECT_TRUE(a->snapshot().empty());
      EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);
    }
  }
}

// Freeing and re-allocating the same size on the same stream returns the same
// pointer from the cache: a hit, no upstream call.
TEST_P(AllocatorContractTest, SameSizeReuseIsACacheHit) {
  for (const AllocatorOptions& opts : {AllocatorOptions{}, no_thread_cache()}) {
    auto a = make_allocator(opts);
    for (std::size_t n : {std::size_t{100}, 4 * KiB, 200 * KiB, 1 * MiB, 3 * MiB, 12 * MiB}) {
      SCOPED_TRACE(::testing::Message() << n << " bytes, thread_cache=" << opts.thread_cache.resolve(true));
      void* p = a->allocate(n);
      ASSERT_NE(p, nullptr);
      const MemoryStats s1 = a->stats();
      a->deallocate(p);
      void* q = a->allocate(n);
      EXPECT_EQ(q, p);
      const MemoryStats s2 = a->stats();
      EXPECT_EQ(s2.num_upstream_allocs, s1.num_upstream_allocs);
      EXPECT_EQ(s2.num_cache_hits, s1.num_cache_hits + 1);
      EXPECT_EQ(s2.num_cache_misses, s1.num_cache_misses);
      EXPECT_EQ(s2.num_allocs, s1.num_allocs + 1);
      EXPECT_EQ(s2.reserved_bytes[kStatAggregate].current, s1.reserved_bytes[kStatAggregate].current);
      a->deallocate(q);
      // Each size from an empty cache: a thread cache parks one large block
      // (Note [Parked large blocks]), and the next size's free would send
      // this one to the pool to merge with its own.
      a->empty_cache();
    }
  }
}

// Requests <= 1 MiB never share a segment with larger ones.
TEST_P(AllocatorContractTest, SmallAndLargePoolsAreSeparate) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  auto a = make_allocator();
  void* small = a->allocate(1 * MiB);
  void* large = a->allocate(1 * MiB + 1);
  const auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 2u);
  int small_segments = 0, large_segments = 0;
  for (const SegmentInfo& seg : snap) {
    if (seg.pool == "small") {
      ++small_segments;
      EXPECT_EQ(seg.address, addr_of(small));
      EXPECT_EQ(seg.size, 2 * MiB);
    } else {
      ++large_segments;
      EXPECT_EQ(seg.address, addr_of(large));
      EXPECT_EQ(seg.size, 20 * MiB);
    }
  }
  EXPECT_EQ(small_segments, 1);
  EXPECT_EQ(large_segments, 1);
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.allocated_bytes[kStatSmallPool].current, static_cast<std::int64_t>(1 * MiB));
  EXPECT_EQ(s.allocated_bytes[kStatLargePool].current, static_cast<std::int64_t>(1 * MiB + 512));
  EXPECT_EQ(s.reserved_bytes[kStatSmallPool].current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(s.reserved_bytes[kStatLargePool].current, static_cast<std::int64_t>(20 * MiB));
  a->deallocate(small);
  a->deallocate(large);
}

// A small segment is carved into consecutive blocks until it is full; only
// then does the allocator ask for another.
TEST_P(AllocatorContractTest, SmallSegmentIsFilledBeforeGrowing) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  auto a = make_allocator();
  std::vector<void*> ptrs;
  for (int i = 0; i < 32; ++i) ptrs.push_back(a->allocate(64 * KiB));
  for (int i = 1; i < 32; ++i) EXPECT_EQ(addr_of(ptrs[i]), addr_of(ptrs[i - 1]) + 64 * KiB) << i;
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].blocks.size(), 32u);
  EXPECT_EQ(count_blocks(snap, "allocated"), 32u);
  EXPECT_EQ(snap[0].allocated_bytes, 2 * MiB);
  EXPECT_EQ(a->stats().num_upstream_allocs, 1);
  ptrs.push_back(a->allocate(64 * KiB));  // the 33rd needs a new segment
  snap = a->snapshot();
  EXPECT_EQ(snap.size(), 2u);
  EXPECT_EQ(a->stats().num_upstream_allocs, 2);
  EXPECT_TRUE(SnapshotConsistent(snap));
  for (void* p : ptrs) a->deallocate(p);
}

// Blocks split off a free block, and free neighbours merge again, until the
// whole segment is one free block that empty_cache() returns upstream.
TEST_P(AllocatorContractTest, SplitAndCoalesce) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  auto a = make_allocator(no_thread_cache());  // thread caches hold blocks unmerged
  void* pa = a->allocate(4 * KiB);
  void* pb = a->allocate(8 * KiB);
  void* pc = a->allocate(16 * KiB);
  void* pd = a->allocate(1 * KiB);
  EXPECT_EQ(addr_of(pb), addr_of(pa) + 4 * KiB);
  EXPECT_EQ(addr_of(pc), addr_of(pb) + 8 * KiB);
  EXPECT_EQ(addr_of(pd), addr_of(pc) + 16 * KiB);
  auto states = [&] {
    std::vector<std::pair<std::string, std::size_t>> v;
    const auto snap = a->snapshot();
    EXPECT_TRUE(SnapshotConsistent(snap));
    EXPECT_EQ(snap.size(), 1u);
    if (snap.size() == 1)
      for (const BlockInfo& b : snap[0].blocks) v.emplace_back(b.state, b.size);
    return v;
  };
  using V = std::vector<std::pair<std::string, std::size_t>>;
  const std::size_t rest = 2 * MiB - 29 * KiB;
  EXPECT_EQ(states(), (V{{"allocated", 4 * KiB}, {"allocated", 8 * KiB}, {"allocated", 16 * KiB},
                         {"allocated", 1 * KiB}, {"free", rest}}));
  a->deallocate(pb);  // both neighbours allocated: stays on its own
  EXPECT_EQ(states(), (V{{"allocated", 4 * KiB}, {"free", 8 * KiB}, {"allocated", 16 * KiB}, {"allocated", 1 * KiB},
                         {"free", rest}}));
  a->deallocate(pc);  // merges with b
  EXPECT_EQ(states(), (V{{"allocated", 4 * KiB}, {"free", 24 * KiB}, {"allocated", 1 * KiB}, {"free", rest}}));
  a->deallocate(pa);  // merges with b+c
  EXPECT_EQ(states(), (V{{"free", 28 * KiB}, {"allocated", 1 * KiB}, {"free", rest}}));
  EXPECT_EQ(a->stats().inactive_split_bytes[kStatAggregate].current, static_cast<std::int64_t>(28 * KiB + rest));
  EXPECT_EQ(a->stats().inactive_split_count[kStatAggregate].current, 2);
  // Best fit: 20 KiB comes from the 28 KiB hole, not from the big remainder.
  void* pe = a->allocate(20 * KiB);
  EXPECT_EQ(pe, pa);
  EXPECT_EQ(states(), (V{{"allocated", 20 * KiB}, {"free", 8 * KiB}, {"allocated", 1 * KiB}, {"free", rest}}));
  a->deallocate(pe);
  a->deallocate(pd);  // merges with both sides: the segment is one free block
  EXPECT_EQ(states(), (V{{"free", 2 * MiB}}));
  MemoryStats s = a->stats();
  EXPECT_EQ(s.inactive_split_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.inactive_split_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.largest_free_block, 2 * MiB);
  a->empty_cache();
  EXPECT_TRUE(a->snapshot().empty());
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.segment_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.num_upstream_frees, 1);
}

// With thread caches on, freed blocks wait in the caller's cache
// ("thread_cached"); empty_cache() takes them back and releases everything.
TEST_P(AllocatorContractTest, EmptyCacheReleasesThreadCachedBlocks) {
  // On by name: its default is off over expandable segments whose pages are
  // costly to map (Note [Thread caches over costly mappings]).
  AllocatorOptions o;
  o.thread_cache = true;
  auto a = make_allocator(o);
  std::vector<void*> ptrs;
  for (std::size_t n : {512 * std::size_t{1}, 4 * KiB, 4 * KiB, 64 * KiB, 1 * MiB, 2 * MiB, 12 * MiB})
    ptrs.push_back(a->allocate(n));
  for (void* p : ptrs) a->deallocate(p);
  auto snap = a->snapshot();
  EXPECT_TRUE(SnapshotConsistent(snap));
  EXPECT_GE(count_blocks(snap, "thread_cached"), 3u);  // at least the small ones
  EXPECT_EQ(count_blocks(snap, "allocated"), 0u);
  MemoryStats s = a->stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.cached_bytes[kStatAggregate].current, s.reserved_bytes[kStatAggregate].current);
  EXPECT_GT(s.reserved_bytes[kStatAggregate].current, 0);
  a->empty_cache();
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.cached_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  if (!GetParam().expandable) {  // expandable segments keep their (unmapped) address range
    EXPECT_TRUE(a->snapshot().empty());
    EXPECT_EQ(s.segment_count[kStatAggregate].current, 0);
    EXPECT_EQ(s.num_upstream_frees, s.num_upstream_allocs);
  }
  if (GetParam().in_use) {
    EXPECT_EQ(GetParam().in_use(*upstream_), 0u);
  }
  // Still fully usable afterwards.
  void* p = a->allocate(4 * KiB);
  EXPECT_NE(p, nullptr);
  a->deallocate(p);
}

// empty_cache() releases only whole free segments: live allocations stay.
TEST_P(AllocatorContractTest, EmptyCacheKeepsLiveSegments) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  auto a = make_allocator();
  void* small = a->allocate(10 * KiB);
  void* large = a->allocate(4 * MiB);
  void* other = a->allocate(30 * KiB);
  a->deallocate(large);
  a->deallocate(other);
  a->empty_cache();
  const auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].pool, "small");
  EXPECT_EQ(snap[0].address, addr_of(small));
  // The freed neighbour was merged back into the free remainder.
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_EQ(snap[0].blocks[1].state, "free");
  EXPECT_EQ(snap[0].blocks[1].size, 2 * MiB - 10 * KiB);
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_TRUE(a->owns(small));
  if (addressable()) {
    GetParam().fill(small, 10 * KiB, 0x5a);
    EXPECT_TRUE(GetParam().check(small, 10 * KiB, 0x5a));
  }
  a->deallocate(small);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);
}

// Reserved bytes are exactly the segments, and the upstream agrees.
TEST_P(AllocatorContractTest, ReservedMatchesSegmentsAndUpstream) {
  GENESIS_SKIP_UNLESS_CLASSIC();
  auto a = make_allocator();
  std::vector<void*> ptrs;
  for (std::size_t n : {100 * KiB, 900 * KiB, 1 * MiB, 1 * MiB + 1, 9 * MiB, 16 * MiB}) ptrs.push_back(a->allocate(n));
  const auto snap = a->snapshot();
  std::size_t seg_bytes = 0;
  for (const SegmentInfo& seg : snap) seg_bytes += seg.size;
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(seg_bytes));
  EXPECT_EQ(s.segment_count[kStatAggregate].current, static_cast<std::int64_t>(snap.size()));
  EXPECT_EQ(s.reserved_bytes[kStatSmallPool].current + s.reserved_bytes[kStatLargePool].current,
            s.reserved_bytes[kStatAggregate].current);
  if (GetParam().in_use) {
    EXPECT_EQ(GetParam().in_use(*upstream_), seg_bytes);
  }
  for (void* p : ptrs) a->deallocate(p);
  a->empty_cache();
  if (GetParam().in_use) {
    EXPECT_EQ(GetParam().in_use(*upstream_), 0u);
  }
}

// owns() and allocation_size() know live allocation starts only.
TEST_P(AllocatorContractTest, OwnsAndAllocationSize) {
  auto a = make_allocator();
  void* p = a->allocate(3000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(a->owns(p));
  EXPECT_EQ(a->allocation_size(p), 3072u);
  auto* inside = static_cast<char*>(p) + 512;
  EXPECT_FALSE(a->owns(inside));
  EXPECT_THROW((void)a->allocation_size(inside), InvalidArgumentError);
  int local = 0;
  EXPECT_FALSE(a->owns(&local));
  a->deallocate(p);
  EXPECT_FALSE(a->owns(p));
  EXPECT_THROW((void)a->allocation_size(p), InvalidArgumentError);
}

// Oversized requests are argument errors on every upstream (never reach it).
TEST_P(AllocatorContractTest, OversizedRequestIsAnArgumentError) {
  auto a = make_allocator();
  const MemoryStats before = a->stats();
  EXPECT_THROW(a->allocate(SIZE_MAX), InvalidArgumentError);
  EXPECT_THROW(a->allocate((std::size_t{1} << 62) + 1), InvalidArgumentError);
  EXPECT_TRUE(StatsEqual(before, a->stats()));
  void* p = a->allocate(1);
  EXPECT_NE(p, nullptr);
  a->deallocate(p);
}

// Memory allocated on one thread may be freed on another.
TEST_P(AllocatorContractTest, CrossThreadFree) {
  auto a = make_allocator();
  std::vector<void*> ptrs(200);
  std::thread producer([&] {
    for (std::size_t i = 0; i < ptrs.size(); ++i) ptrs[i] = a->allocate(512 * (1 + i % 7));
  });
  producer.join();
  LiveRanges ranges;
  for (void* p : ptrs) {
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(ranges.insert(addr_of(p), a->allocation_size(p)).empty());
  }
  for (void* p : ptrs) a->deallocate(p);
  MemoryStats s = a->stats();
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.num_allocs, 200);
  EXPECT_EQ(s.num_frees, 200);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);
}

// The handle API: allocate_block()/free_block() hand out the same blocks as
// allocate()/deallocate(), and the two can be mixed.
TEST_P(AllocatorContractTest, BlockHandleApi) {
  auto a = make_allocator();
  CachingAllocator::Block* b = a->allocate_block(3000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(addr_of(b->ptr()) % 512, 0u);
  EXPECT_TRUE(a->owns(b->ptr()));
  EXPECT_EQ(a->allocation_size(b->ptr()), 3072u);
  EXPECT_EQ(b->size, 3072u);
  void* p = b->ptr();
  a->free_block(b);
  EXPECT_FALSE(a->owns(p));
  CachingAllocator::Block* again = a->allocate_block(3000);
  EXPECT_EQ(again->ptr(), p);  // cache hit
  a->deallocate(again->ptr());  // a handle's pointer may be freed by address
  void* q = a->allocate(3000);
  EXPECT_EQ(q, p);
  a->deallocate(q);
  CachingAllocator::Block* big = a->allocate_block(5 * MiB);
  EXPECT_EQ(big->size, 5 * MiB);
  a->free_block(big);
  const MemoryStats s = a->stats();
  EXPECT_EQ(s.num_allocs, 4);
  EXPECT_EQ(s.num_frees, 4);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
}

// The thread-cache limits of AllocatorOptions: blocks per size and bytes per
// thread; what does not fit goes back to the pool (and coalesces there).
TEST_P(AllocatorContractTest, ThreadCacheLimits) {
  AllocatorOptions o;
  o.thread_cache = true;  // by name: off by default over costly mappings
  o.thread_cache_small_count = 2;
  o.thread_cache_large_count = 1;
  o.thread_cache_bytes = 64 * MiB;  // the default (total / 32) is only 2 MiB on a small device
  o.thread_cache_large_park = 4;     // the count per size is the limit here
  auto a = make_allocator(o);
  // Everything allocated first: with expandable segments a new peak empties
  // the caches (Note [New peaks empty the thread caches]).
  std::vector<void*> small;
  for (int i = 0; i < 4; ++i) small.push_back(a->allocate(4 * KiB));
  std::vector<void*> large;
  for (int i = 0; i < 2; ++i) large.push_back(a->allocate(2 * MiB));
  for (void* p : small) a->deallocate(p);
  auto snap = a->snapshot();
  EXPECT_EQ(count_blocks(snap, "thread_cached"), 2u);
  EXPECT_TRUE(SnapshotConsistent(snap));
  for (void* p : large) a->deallocate(p);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 3u);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes[kStatAggregate].current, 0);

  AllocatorOptions bytes;
  bytes.thread_cache = true;
  bytes.thread_cache_bytes = 8 * KiB;
  auto b = make_allocator(bytes);
  std::vector<void*> ptrs;
  for (int i = 0; i < 3; ++i) ptrs.push_back(b->allocate(4 * KiB));
  for (void* p : ptrs) b->deallocate(p);
  EXPECT_EQ(count_blocks(b->snapshot(), "thread_cached"), 2u);
  const MemoryStats s = b->stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.cached_bytes[kStatAggregate].current, s.reserved_bytes[kStatAggregate].current);
  b->empty_cache();
  EXPECT_EQ(b->stats().reserved_bytes[kStatAggregate].current, 0);
}

// Destroying the allocator returns every segment, even with live blocks.
TEST_P(AllocatorContractTest, DestructorReturnsEverySegment) {
  {
    auto a = make_allocator();
    (void)a->allocate(5 * KiB);           // leaked on purpose
    (void)a->allocate(3 * MiB);           // leaked on purpose
    a->deallocate(a->allocate(700 * KiB));  // cached
    if (GetParam().in_use) {
      EXPECT_GT(GetParam().in_use(*upstream_), 0u);
    }
  }
  // TearDown checks that the upstream holds nothing any more.
}

}  // namespace genesis::memory::testing_support
