// The allocator's internal invariant check (Note [Allocator invariants] in
// src/memory/allocator_invariants.cpp): random traces over every kind of
// segment and cache, checked after each phase, and damage it must notice.
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

::testing::AssertionResult InvariantsHold(const CachingAllocator& a, bool include_thread_caches = true) {
  try {
    a.check_invariants(include_thread_caches);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << e.message();
  }
  return ::testing::AssertionSuccess();
}

struct TraceCase {
  const char* name;
  bool simulated;  // else host memory
  AllocatorOptions options;
};

AllocatorOptions expandable(std::uint32_t chunk_pages) {
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  o.chunk_pages = chunk_pages;
  return o;
}

class InvariantTraceTest : public ::testing::TestWithParam<TraceCase> {};

// A seeded random trace in phases: allocations and frees of both APIs over
// several streams (record_stream with work left pending), then the controls
// (empty_cache, compact, collect_garbage, a cache cap); the invariants are
// checked every few operations and after each phase.
TEST_P(InvariantTraceTest, RandomTraceKeepsEveryInvariant) {
  const TraceCase& c = GetParam();
  std::shared_ptr<SimulatedDevice> sim;
  std::shared_ptr<UpstreamResource> up;
  if (c.simulated) {
    sim = std::make_shared<SimulatedDevice>(2 * GiB);
    up = sim;
  } else {
    up = std::make_shared<HostResource>(2 * GiB);
  }
  CachingAllocator a(up, c.options);
  std::vector<StreamId> streams{0};
  if (sim != nullptr)
    for (int i = 0; i < 2; ++i) streams.push_back(sim->create_stream());
  std::mt19937_64 rng(20261127);
  struct Live {
    void* ptr;
    CachingAllocator::Block* block;
  };
  std::vector<Live> live;
  auto release = [&](std::size_t k) {
    if (live[k].block != nullptr) a.free_block(live[k].block);
    else a.deallocate(live[k].ptr);
    live[k] = live.back();
    live.pop_back();
  };
  const int phases = 6, ops = scaled(400);
  for (int phase = 0; phase < phases; ++phase) {
    for (int op = 0; op < ops; ++op) {
      if (live.size() < 48 && rng() % 100 < 55) {
        const unsigned r = static_cast<unsigned>(rng() % 100);
        const std::size_t n = r < 70 ? 1 + rng() % (64 * KiB) : r < 97 ? 1 + rng() % (6 * MiB) : 12 * MiB + rng() % (8 * MiB);
        const StreamId s = streams[rng() % streams.size()];
        Live l{nullptr, nullptr};
        if (rng() % 2 == 0) {
          l.block = a.allocate_block(n, s);
          l.ptr = l.block->ptr();
        } else {
          l.ptr = a.allocate(n, s);
        }
        if (sim != nullptr && rng() % 16 == 0) {
          const StreamId other = streams[rng() % streams.size()];
          a.record_stream(l.ptr, other);
          sim->submit_work(other);
        }
        live.push_back(l);
      } else if (!live.empty()) {
        release(rng() % live.size());
      }
      if (op % 50 == 49) {
        ASSERT_TRUE(InvariantsHold(a)) << c.name << ", phase " << phase << ", op " << op;
      }
    }
    ASSERT_TRUE(InvariantsHold(a)) << c.name << ", end of phase " << phase;
    switch (phase) {
      case 1: a.empty_cache(); break;
      case 2: (void)a.compact(); break;
      case 3: (void)a.collect_garbage(); break;
      case 4: a.set_cache_size(8 * MiB); break;
      default: break;
    }
    if (sim != nullptr && phase % 2 == 1) sim->complete_all();
    ASSERT_TRUE(InvariantsHold(a)) << c.name << ", after the control of phase " << phase;
  }
  while (!live.empty()) release(live.size() - 1);
  if (sim != nullptr) sim->complete_all();
  EXPECT_TRUE(InvariantsHold(a));
  a.empty_cache();
  EXPECT_TRUE(InvariantsHold(a));
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
}

AllocatorOptions no_thread_cache(AllocatorOptions o) {
  o.thread_cache = false;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, InvariantTraceTest,
    ::testing::Values(TraceCase{"host classic", false, classic()},
                      TraceCase{"simulated classic", true, classic()},
                      TraceCase{"simulated classic without thread caches", true, classic_no_thread_cache()},
                      TraceCase{"simulated expandable", true, expandable(1)},
                      TraceCase{"simulated expandable, chunks of 4 pages", true, expandable(4)},
                      TraceCase{"simulated expandable without thread caches", true, no_thread_cache(expandable(1))}),
    [](const ::testing::TestParamInfo<TraceCase>& info) {
      std::string n;
      for (const char* p = info.param.name; *p != '\0'; ++p)
        if (std::isalnum(static_cast<unsigned char>(*p))) n += *p;
      return n;
    });

// Threads of several arenas allocate and free each other's blocks; the
// pools' part of the check runs alongside them, the whole check after.
TEST(AllocatorInvariants, ArenasAndCrossThreadFrees) {
  auto sim = std::make_shared<SimulatedDevice>(2 * GiB);
  AllocatorOptions o = classic();
  o.arenas = 3;
  CachingAllocator a(sim, o);
  a.deallocate(a.allocate(512));  // this thread: arena 0
  std::vector<std::vector<void*>> left(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) + 1);
      std::vector<void*> mine;
      for (int i = 0; i < scaled(1500); ++i) {
        if (mine.size() < 24 && rng() % 3 != 0) mine.push_back(a.allocate(1 + rng() % (3 * MiB)));
        else if (!mine.empty()) {
          a.deallocate(mine.back());
          mine.pop_back();
        }
      }
      left[static_cast<std::size_t>(t)] = std::move(mine);
    });
  }
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(InvariantsHold(a, /*include_thread_caches=*/false));
  for (auto& t : ts) t.join();
  EXPECT_TRUE(InvariantsHold(a));
  for (auto& v : left)
    for (void* p : v) a.deallocate(p);  // from arena 0, into the arenas that made them
  EXPECT_TRUE(InvariantsHold(a));
  a.empty_cache();
  EXPECT_TRUE(InvariantsHold(a));
}

// Damage the check must notice (and then repaired, so the allocator can be
// torn down): a block record whose size no longer tiles its segment, and an
// allocated block marked as cached that no thread cache holds.
TEST(AllocatorInvariants, NoticesABlockThatNoLongerTilesItsSegment) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  CachingAllocator::Block* b = a.allocate_block(4096);
  ASSERT_TRUE(InvariantsHold(a));
  b->size += 512;
  const ::testing::AssertionResult r = InvariantsHold(a, /*include_thread_caches=*/false);
  b->size -= 512;
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("tile"), std::string::npos) << r.message();
  EXPECT_TRUE(InvariantsHold(a));
  a.free_block(b);
}

TEST(AllocatorInvariants, NoticesACachedBlockNoCacheHolds) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  CachingAllocator::Block* b = a.allocate_block(4096);
  b->set_state(detail::BlockState::kThreadCached);
  // Allocated and thread-cached bytes are out of the pool alike: only the
  // walk of the thread caches can tell.
  const ::testing::AssertionResult pools = InvariantsHold(a, /*include_thread_caches=*/false);
  const ::testing::AssertionResult all = InvariantsHold(a);
  b->set_state(detail::BlockState::kAllocated);
  EXPECT_TRUE(pools);
  ASSERT_FALSE(all);
  EXPECT_NE(std::string(all.message()).find("thread caches hold 0 bytes"), std::string::npos) << all.message();
  EXPECT_TRUE(InvariantsHold(a));
  a.free_block(b);
}

TEST(AllocatorInvariants, NoticesAFreeBlockMissingFromTheIndex) {
  auto sim = std::make_shared<SimulatedDevice>(1 * GiB);
  CachingAllocator a(sim, classic());
  void* keep = a.allocate(4096);
  CachingAllocator::Block* b = a.allocate_block(4096);
  // Allocated, but claimed free: the index does not hold it.
  b->set_state(detail::BlockState::kFree);
  const ::testing::AssertionResult r = InvariantsHold(a, /*include_thread_caches=*/false);
  b->set_state(detail::BlockState::kAllocated);
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("free index"), std::string::npos) << r.message();
  a.free_block(b);
  a.deallocate(keep);
  EXPECT_TRUE(InvariantsHold(a));
}

}  // namespace
}  // namespace genesis::memory
