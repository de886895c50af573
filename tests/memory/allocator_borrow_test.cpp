// Free blocks lent from one stream to another on the simulated device, with
// expandable segments (classic segments: allocator_streams_test.cpp): before
// a pool maps pages past its mark, a free block of another stream serves,
// and never before the work queued on that stream can no longer touch it.
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

// A stream the device does not know borrows nothing: a lent block records
// an event on its user's stream when freed, which on an unknown stream
// fails every time, and the block would stay allocated for good.
TEST(ClassicBorrowTest, AStreamTheDeviceDoesNotKnowBorrowsNothing) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOff;
  o.thread_cache = false;
  CachingAllocator a(sim, o);
  void* w = a.allocate(1000, 0);
  a.deallocate(w);  // an idle block of stream 0
  void* u = a.allocate(1000, 99);
  EXPECT_EQ(a.stats().num_stream_borrows, 0);
  a.deallocate(u);
  EXPECT_EQ(a.stats().allocated_bytes[kStatAggregate].current, 0);
  EXPECT_TRUE(SnapshotConsistent(a.snapshot()));
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
