// Free blocks lent from one stream to another on the simulated device: before
// a pool grows (classic segments) or maps pages past its mark (expandable
// segments), a free block of another stream serves, and never before the work
// queued on that stream can no longer touch it.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

constexpr std::size_t kBig = 12 * MiB;  // a large-pool request with a segment of its own (classic)

std::string state_of(const CachingAllocator& a, void* p) {
  for (const SegmentInfo& seg : a.snapshot())
    for (const BlockInfo& b : seg.blocks)
      if (b.address == addr_of(p)) return b.state;
  return "(none)";
}

// Parameter: thread cache on / off.
class ClassicBorrowTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    sim_ = std::make_shared<SimulatedDevice>(1 * GiB);
    s1_ = sim_->create_stream();
    s2_ = sim_->create_stream();
    AllocatorOptions o = classic();
    o.thread_cache = GetParam();
    a_ = std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    a_.reset();
    EXPECT_EQ(sim_->outstanding_events(), 0u) << "events leaked";
    EXPECT_EQ(sim_->bytes_in_use(), 0u);
    EXPECT_EQ(sim_->num_misuses(), 0u);
  }
  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> a_;
  StreamId s1_ = 0, s2_ = 0;
};

TEST_P(ClassicBorrowTest, AnIdleStreamsFreeBlockServesInsteadOfANewSegment) {
  void* p = a_->allocate(kBig, s1_);
  a_->deallocate(p);
  const MemoryStats before = a_->stats();
  void* q = a_->allocate(kBig, s2_);
  EXPECT_EQ(q, p) << "s1 is idle: its free block serves s2";
  MemoryStats s = a_->stats();
  EXPECT_EQ(s.num_upstream_allocs, before.num_upstream_allocs) << "the pool grew";
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, before.reserved_bytes[kStatAggregate].current);
  EXPECT_EQ(s.num_stream_borrows, 1);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(kBig));

  // s2 uses the block, then frees it: it goes back to s1's free blocks only
  // once s2's work is done, as a block used on another stream does.
  sim_->submit_work(s2_);
  a_->deallocate(q);
  EXPECT_EQ(state_of(*a_, q), "pending");
  void* r = a_->allocate(kBig, s1_);
  EXPECT_NE(r, p) << "handed out on s1 while s2's work may still use it";
  sim_->complete_work(s2_);
  void* again = a_->allocate(kBig, s1_);
  EXPECT_EQ(again, p) << "back among s1's free blocks once s2's work completed";
  EXPECT_TRUE(SnapshotConsistent(a_->snapshot()));
  a_->deallocate(r);
  a_->deallocate(again);
}

TEST_P(ClassicBorrowTest, ABusyStreamsBlockIsNotLentAndNothingWaits) {
  void* p = a_->allocate(kBig, s1_);
  sim_->submit_work(s1_);  // a kernel on s1 still uses p
  a_->deallocate(p);
  const MemoryStats before = a_->stats();
  void* q = a_->allocate(kBig, s2_);
  EXPECT_NE(q, p);
  EXPECT_EQ(a_->stats().num_upstream_allocs, before.num_upstream_allocs + 1) << "classic segments grow instead";
  EXPECT_EQ(a_->stats().num_stream_borrows, 0);
  EXPECT_EQ(sim_->completed_work(s1_), 0u) << "s1's work was waited for";
  sim_->complete_work(s1_);
  a_->deallocate(q);
}

TEST_P(ClassicBorrowTest, TurnedOffEachStreamKeepsItsOwnSegments) {
  AllocatorOptions o = classic();
  o.thread_cache = GetParam();
  o.stream_borrow = false;
  a_ = std::make_unique<CachingAllocator>(sim_, o);
  void* p = a_->allocate(kBig, s1_);
  a_->deallocate(p);
  void* q = a_->allocate(kBig, s2_);
  EXPECT_NE(q, p);
  EXPECT_EQ(a_->stats().num_upstream_allocs, 2);
  EXPECT_EQ(a_->stats().num_stream_borrows, 0);
  a_->deallocate(q);
}

INSTANTIATE_TEST_SUITE_P(ThreadCache, ClassicBorrowTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "On" : "Off"; });

AllocatorOptions expandable(bool borrow) {
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  o.thread_cache = false;
  o.stream_borrow = borrow;
  return o;
}

// At the mark, the pages another stream freed serve without unmapping and
// mapping them again; the borrowing stream waits for the owner's queued work
// (on the simulated device, waiting on an event completes it).
TEST(ExpandableBorrowTest, AtTheMarkAnotherStreamsMappedBlockServesAfterItsWork) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  const StreamId s1 = sim->create_stream(), s2 = sim->create_stream();
  {
    CachingAllocator a(sim, expandable(true));
    void* p = a.allocate(8 * MiB, s1);
    sim->submit_work(s1);  // a kernel on s1 uses p
    a.deallocate(p);
    EXPECT_EQ(sim->mapped_bytes(), 8 * MiB);
    void* q = a.allocate(8 * MiB, s2);
    EXPECT_EQ(q, p);
    EXPECT_EQ(sim->completed_work(s1), 1u) << "s2 did not wait for s1's work on the block";
    EXPECT_EQ(sim->num_stream_syncs(), 0u) << "waited on the host instead of on the stream";
    const MemoryStats s = a.stats();
    EXPECT_EQ(s.num_stream_borrows, 1);
    EXPECT_EQ(s.num_upstream_frees, 0) << "pages were unmapped";
    EXPECT_EQ(sim->mapped_bytes(), 8 * MiB);
    EXPECT_EQ(s.reserved_bytes[kStatAggregate].peak, static_cast<std::int64_t>(8 * MiB));
    a.deallocate(q);
    EXPECT_TRUE(SnapshotConsistent(a.snapshot()));
  }
  EXPECT_EQ(sim->outstanding_events(), 0u);
  EXPECT_EQ(sim->num_misuses(), 0u);
}

// Without lending, the same program unmaps s1's pages (synchronising s1 on
// the host) and maps s2's: the same peak, but driver calls and a host wait.
TEST(ExpandableBorrowTest, TurnedOffTheMarkUnmapsAndMapsInstead) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  const StreamId s1 = sim->create_stream(), s2 = sim->create_stream();
  {
    CachingAllocator a(sim, expandable(false));
    void* p = a.allocate(8 * MiB, s1);
    sim->submit_work(s1);
    a.deallocate(p);
    void* q = a.allocate(8 * MiB, s2);
    EXPECT_NE(q, p);
    const MemoryStats s = a.stats();
    EXPECT_EQ(s.num_stream_borrows, 0);
    EXPECT_GE(s.num_upstream_frees, 1);
    EXPECT_EQ(sim->num_stream_syncs(), 1u);
    EXPECT_EQ(s.reserved_bytes[kStatAggregate].peak, static_cast<std::int64_t>(8 * MiB));
    a.deallocate(q);
  }
  EXPECT_EQ(sim->num_misuses(), 0u);
}

// Below the mark nothing is lent: a stream maps its own pages, as a
// single-stream program would, and no stream waits for another.
TEST(ExpandableBorrowTest, BelowTheMarkStreamsMapTheirOwnPages) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  const StreamId s1 = sim->create_stream(), s2 = sim->create_stream();
  CachingAllocator a(sim, expandable(true));
  void* big = a.allocate(16 * MiB, s1);
  a.deallocate(big);
  a.empty_cache();  // the mark stays at 16 MiB
  void* p = a.allocate(4 * MiB, s1);
  sim->submit_work(s1);
  a.deallocate(p);  // s1: 4 MiB free and mapped, its work still queued
  void* q = a.allocate(4 * MiB, s2);  // 4 + 4 MiB stays under the mark
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().num_stream_borrows, 0);
  EXPECT_EQ(sim->mapped_bytes(), 8 * MiB);
  EXPECT_EQ(sim->completed_work(s1), 0u);
  a.deallocate(q);
  sim->complete_work(s1);
}

// Random traffic on four streams with work queued and completed at random:
// whenever bytes last freed on one stream are handed out on another, the
// work queued on the first stream by that free has completed (the sim
// completes it when a stream waits on its event).
void random_traffic(const AllocatorOptions& o, std::uint32_t seed) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  std::vector<StreamId> streams{0};
  for (int i = 0; i < 3; ++i) streams.push_back(sim->create_stream());
  struct Freed {
    std::uintptr_t end;
    StreamId stream;
    std::uint64_t ticket;
  };
  std::map<std::uintptr_t, Freed> freed;  // disjoint ranges, by start: who last freed them
  auto forget = [&](std::uintptr_t lo, std::uintptr_t hi) {
    auto it = freed.lower_bound(lo);
    if (it != freed.begin() && std::prev(it)->second.end > lo) --it;
    while (it != freed.end() && it->first < hi) {
      const std::uintptr_t start = it->first;
      const Freed f = it->second;
      it = freed.erase(it);
      if (start < lo) freed.emplace(start, Freed{lo, f.stream, f.ticket});
      if (f.end > hi) freed.emplace(hi, Freed{f.end, f.stream, f.ticket});
    }
  };
  std::mt19937 rng(seed);
  struct Live {
    void* p;
    StreamId s;
    std::size_t size;
  };
  std::vector<Live> live;
  const std::size_t sizes[] = {512, 4096, 70000, 1 * MiB, 3 * MiB, 12 * MiB, 40 * MiB};
  std::int64_t borrows = 0;
  {
    CachingAllocator a(sim, o);
    for (int it = 0; it < 3000; ++it) {
      const int op = static_cast<int>(rng() % 10);
      if (op == 0) {
        sim->submit_work(streams[rng() % streams.size()]);
      } else if (op == 1) {
        sim->complete_work(streams[rng() % streams.size()]);
      } else if (live.size() < 30 && (live.empty() || op < 6)) {
        const StreamId s = streams[rng() % streams.size()];
        void* p = a.allocate(sizes[rng() % std::size(sizes)], s);
        const std::uintptr_t lo = addr_of(p), hi = lo + a.allocation_size(p);
        auto f = freed.lower_bound(lo);
        if (f != freed.begin() && std::prev(f)->second.end > lo) --f;
        for (; f != freed.end() && f->first < hi; ++f) {
          if (f->second.stream == s) continue;
          ASSERT_GE(sim->completed_work(f->second.stream), f->second.ticket)
              << "bytes freed on stream " << f->second.stream << " handed out on stream " << s
              << " before the work queued there had completed (iteration " << it << ")";
        }
        live.push_back({p, s, hi - lo});
      } else if (!live.empty()) {
        const std::size_t k = rng() % live.size();
        const Live l = live[k];
        const std::uintptr_t lo = addr_of(l.p);
        forget(lo, lo + l.size);
        freed.emplace(lo, Freed{lo + l.size, l.s, sim->submitted_work(l.s)});
        a.deallocate(l.p);
        live[k] = live.back();
        live.pop_back();
      }
    }
    borrows = a.stats().num_stream_borrows;
    EXPECT_TRUE(SnapshotConsistent(a.snapshot()));
    for (const Live& l : live) a.deallocate(l.p);
    a.check_invariants();
    for (StreamId s : streams) sim->complete_work(s);
    a.empty_cache();
    EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  }
  EXPECT_GT(borrows, 0) << "the traffic never exercised lending";
  EXPECT_EQ(sim->outstanding_events(), 0u);
  EXPECT_EQ(sim->bytes_in_use(), 0u);
  EXPECT_EQ(sim->num_misuses(), 0u);
}

TEST(BorrowPropertyTest, NoBytesChangeStreamsBeforeTheirWorkCompleted) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    AllocatorOptions c = classic();
    c.thread_cache = seed % 2 == 0;
    random_traffic(c, seed);
    random_traffic(expandable(true), seed);
  }
}

}  // namespace
}  // namespace genesis::memory
