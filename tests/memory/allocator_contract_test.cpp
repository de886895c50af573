// The caching allocator's contract (tests/support/allocator_contract.h) on the
// upstreams available without a GPU: HostResource and SimulatedDevice of
// several capacities. gpu_allocator_test.cpp runs the same bodies on
// CudaDeviceResource and PinnedHostResource.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_contract.h"

namespace genesis::memory::testing_support {
namespace {

void host_fill(void* p, std::size_t n, unsigned char pattern) { std::memset(p, pattern, n); }

bool host_check(const void* p, std::size_t n, unsigned char pattern) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (c[i] != pattern) return false;
  return true;
}

ContractUpstream host_case(const char* name, std::size_t limit) {
  ContractUpstream c;
  c.name = name;
  c.make = [limit] { return std::make_shared<HostResource>(limit); };
  c.fill = host_fill;
  c.check = host_check;
  c.in_use = [](UpstreamResource& u) { return dynamic_cast<HostResource&>(u).bytes_in_use(); };
  return c;
}

ContractUpstream sim_case(const char* name, std::size_t capacity, bool expandable = false,
                          std::uint32_t chunk_pages = 0) {
  ContractUpstream c;
  c.name = name;
  c.expandable = expandable;
  c.chunk_pages = chunk_pages;
  c.make = [capacity] { return std::make_shared<SimulatedDevice>(capacity); };
  // Simulated addresses must never be dereferenced: no fill/check.
  c.in_use = [](UpstreamResource& u) { return dynamic_cast<SimulatedDevice&>(u).bytes_in_use(); };
  c.outstanding_events = [](UpstreamResource& u) { return dynamic_cast<SimulatedDevice&>(u).outstanding_events(); };
  c.misuses = [](UpstreamResource& u) { return dynamic_cast<SimulatedDevice&>(u).num_misuses(); };
  c.reserved_ranges = [](UpstreamResource& u) { return dynamic_cast<SimulatedDevice&>(u).num_reserved_ranges(); };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Host, AllocatorContractTest,
                         ::testing::Values(host_case("Host", 0), host_case("HostLimited256MiB", 256 * MiB)),
                         contract_case_name);

INSTANTIATE_TEST_SUITE_P(Simulated, AllocatorContractTest,
                         ::testing::Values(sim_case("Sim64MiB", 64 * MiB), sim_case("Sim1GiB", 1 * GiB),
                                           sim_case("Sim80GiB", 80 * GiB),
                                           sim_case("Sim64MiBExpandable", 64 * MiB, true),
                                           sim_case("Sim1GiBExpandable", 1 * GiB, true),
                                           // Chunks of several pages, as on CUDA (Note [Physical chunks]).
                                           sim_case("Sim64MiBExpandableChunked", 64 * MiB, true, 4),
                                           sim_case("Sim1GiBExpandableChunked", 1 * GiB, true, 4)),
                         contract_case_name);


// --- Simulated device only: out of memory and the memory controls ----------

class SimulatedControlsTest : public ::testing::Test {
 protected:
  // Classic segments throughout: the expected sizes below follow the size rules
  // restated in tests/support/allocator_test_util.h.
  CachingAllocator& make(std::size_t capacity, AllocatorOptions o = {}) {
    o.expandable_segments = AllocatorOptions::Expandable::kOff;
    a_.reset();
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    a_ = std::make_unique<CachingAllocator>(sim_, o);
    return *a_;
  }
  static AllocatorOptions no_tc() {
    AllocatorOptions o;
    o.thread_cache = false;
    return o;
  }
  void TearDown() override {
    if (a_ == nullptr) return;
    a_->empty_cache();
    a_.reset();
    EXPECT_EQ(sim_->bytes_in_use(), 0u);
    EXPECT_EQ(sim_->num_live_allocations(), 0u);
    EXPECT_EQ(sim_->outstanding_events(), 0u);
    EXPECT_EQ(sim_->num_misuses(), 0u);
  }
  std::string oom_message(std::size_t bytes, StreamId stream = 0) {
    try {
      void* p = a_->allocate(bytes, stream);
      a_->deallocate(p);
      ADD_FAILURE() << "allocating " << bytes << " bytes did not throw";
    } catch (const OutOfMemoryError& e) {
      return e.what();
    }
    return {};
  }
  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> a_;
};

TEST_F(SimulatedControlsTest, OutOfMemoryMessageExplains) {
  auto& a = make(64 * MiB);
  void* p = a.allocate(1000);
  const MemoryStats before = a.stats();
  const std::string msg = oom_message(100 * MiB);
  for (const char* needle : {"Out of memory", "100.00 MiB", "104857600 bytes", "sim:0", "64.00 MiB total",
                             "62.00 MiB free", "1.00 KiB allocated", "2.00 MiB reserved",
                             "largest free cached block 2.00 MiB", "fragmentation", "Try"})
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in:\n" << msg;
  EXPECT_EQ(msg.find("CUDA OOM"), std::string::npos) << "a simulated device is not CUDA:\n" << msg;
  // 2047 KiB of 2 MiB cached: shown with one decimal.
  EXPECT_TRUE(std::regex_search(msg, std::regex("fragmentation 100\\.0%"))) << msg;
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);
  EXPECT_EQ(after.num_upstream_failures, before.num_upstream_failures + 2);  // first try and the retry
  EXPECT_EQ(after.allocated_bytes[kStatAggregate].current, before.allocated_bytes[kStatAggregate].current);
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  // On a stream the message names it.
  const StreamId s = sim_->create_stream();
  EXPECT_NE(oom_message(100 * MiB, s).find("stream 0x1"), std::string::npos);
  a.deallocate(p);
  // Half used by live blocks: 50.0%.
  void* half = a.allocate(1 * MiB);
  const std::string msg2 = oom_message(100 * MiB);
  EXPECT_NE(msg2.find("fragmentation 50.0%"), std::string::npos) << msg2;
  a.deallocate(half);
}

TEST_F(SimulatedControlsTest, CachedMemoryIsReleasedBeforeGivingUp) {
  auto& a = make(64 * MiB);
  std::vector<void*> small;
  for (int i = 0; i < 30; ++i) small.push_back(a.allocate(1 * MiB));  // 15 small segments
  void* big = a.allocate(4 * MiB);                                     // one 20 MiB segment
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(50 * MiB));
  for (void* p : small) a.deallocate(p);
  const MemoryStats before = a.stats();
  // 30 MiB fits only once the 30 MiB of cached small segments are returned.
  void* p = a.allocate(30 * MiB);
  ASSERT_NE(p, nullptr);
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.num_ooms, 0);
  EXPECT_EQ(after.num_upstream_failures, before.num_upstream_failures + 1);
  EXPECT_EQ(after.num_upstream_frees, before.num_upstream_frees + 15);
  EXPECT_EQ(after.num_cache_flushes, before.num_cache_flushes + 1);
  EXPECT_EQ(after.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(50 * MiB));
  EXPECT_EQ(after.reserved_bytes[kStatSmallPool].current, 0);
  EXPECT_EQ(sim_->bytes_in_use(), 50 * MiB);
  a.deallocate(p);
  a.deallocate(big);
}

TEST_F(SimulatedControlsTest, ManyOutOfMemoryErrorsLeaveEverythingUsable) {
  auto& a = make(64 * MiB);
  std::mt19937 rng(1234);
  std::vector<void*> live;
  LiveRanges ranges;
  int ooms = 0;
  const int rounds = 600;
  for (int i = 0; i < rounds; ++i) {
    const int op = static_cast<int>(rng() % 6);
    if (op == 0) {
      EXPECT_THROW(a.allocate(65 * MiB + rng() % MiB), OutOfMemoryError);
      ++ooms;
    } else if (op == 1) {
      sim_->fail_next_allocations(3);  // every try of the next growth fails
      try {
        void* p = a.allocate(1 + rng() % (16 * MiB));
        ASSERT_TRUE(ranges.insert(addr_of(p), a.allocation_size(p)).empty());
        live.push_back(p);  // served from the cache: no upstream call needed
      } catch (const OutOfMemoryError&) {
        ++ooms;
      }
      sim_->fail_next_allocations(0);
    } else if (op <= 3 || live.empty()) {
      try {
        void* p = a.allocate(1 + rng() % (rng() % 4 == 0 ? 24 * MiB : 256 * KiB));
        ASSERT_TRUE(ranges.insert(addr_of(p), a.allocation_size(p)).empty());
        live.push_back(p);
      } catch (const OutOfMemoryError&) {
        ++ooms;  // legitimately full
      }
    } else {
      const std::size_t k = rng() % live.size();
      ASSERT_TRUE(ranges.erase(addr_of(live[k])).empty());
      a.deallocate(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (i % 25 == 0) {
      ASSERT_TRUE(SnapshotConsistent(a.snapshot()));
      const MemoryStats s = a.stats();
      ASSERT_EQ(s.allocation_count[kStatAggregate].current, static_cast<std::int64_t>(live.size()));
      ASSERT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(ranges.total_bytes()));
      ASSERT_LE(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(64 * MiB));
      ASSERT_EQ(static_cast<std::size_t>(s.reserved_bytes[kStatAggregate].current), sim_->bytes_in_use());
    }
  }
  EXPECT_GE(ooms, rounds / 6);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.num_ooms, ooms);
  EXPECT_EQ(s.num_allocs - s.num_frees, static_cast<std::int64_t>(live.size()));
  EXPECT_EQ(s.num_cache_hits + s.num_cache_misses, s.num_allocs);
  for (void* p : live) a.deallocate(p);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.num_allocs, s.num_frees);
  EXPECT_EQ(sim_->bytes_in_use(), 0u);
  // The whole device is usable again, in one piece.
  void* whole = a.allocate(64 * MiB);
  EXPECT_EQ(addr_of(whole), sim_->base_address());
  a.deallocate(whole);
}

TEST_F(SimulatedControlsTest, MemoryFractionCapsReserved) {
  auto& a = make(100 * MiB);
  EXPECT_EQ(a.memory_limit(), SIZE_MAX);
  a.set_memory_fraction(0.5);
  EXPECT_EQ(a.memory_limit(), 50 * MiB);
  EXPECT_EQ(a.stats().memory_limit, 50 * MiB);
  void* p = a.allocate(30 * MiB);
  const std::string msg = oom_message(30 * MiB);
  for (const char* needle : {"memory fraction", "memory_fraction 0.5 caps reserved at 50.00 MiB",
                             "raise set_memory_fraction()"})
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in:\n" << msg;
  // A small fraction keeps its digits, and the message names what did not
  // fit: the segment a small request needs, not the request.
  a.set_memory_fraction(0.0004);
  const std::string small = oom_message(1024);
  for (const char* needle : {"memory_fraction 0.0004", "tried to allocate 1.00 KiB", "a new segment of 2.00 MiB"})
    EXPECT_NE(small.find(needle), std::string::npos) << "'" << needle << "' not in:\n" << small;
  a.set_memory_fraction(0.5);
  EXPECT_LE(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(50 * MiB));
  void* q = a.allocate(16 * MiB);  // 46 MiB reserved: fits
  // 4 MiB would take a 20 MiB segment; under the cap the allocator takes
  // just the 4 MiB it needs.
  void* r = a.allocate(4 * MiB);
  EXPECT_EQ(a.allocation_size(r), 4 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(50 * MiB));
  EXPECT_THROW(a.allocate(512), OutOfMemoryError);  // a new 2 MiB segment would pass the cap
  a.set_memory_fraction(1.0);
  EXPECT_EQ(a.memory_limit(), SIZE_MAX);
  EXPECT_EQ(a.stats().memory_limit, 0u);
  void* s = a.allocate(512);
  a.deallocate(s);
  a.deallocate(p);
  a.deallocate(q);
  a.deallocate(r);
  // The same cap from the options.
  AllocatorOptions o;
  o.memory_fraction = 0.25;
  auto& b = make(100 * MiB, o);
  EXPECT_EQ(b.memory_limit(), 25 * MiB);
  EXPECT_THROW(b.allocate(26 * MiB), OutOfMemoryError);
  b.deallocate(b.allocate(24 * MiB));
}

TEST_F(SimulatedControlsTest, CacheSizeCapsCachedBytes) {
  auto& a = make(1 * GiB);
  a.set_cache_size(20 * MiB);
  EXPECT_EQ(a.stats().cache_limit, 20 * MiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(a.allocate(12 * MiB));  // 12 MiB segments, no split
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(48 * MiB));
  for (void* p : blocks) {
    // Segment ages come from a coarse clock: keep the frees apart so that
    // "least recently used" is well defined.
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    a.deallocate(p);
    EXPECT_LE(a.stats().cached_bytes[kStatAggregate].current, static_cast<std::int64_t>(20 * MiB));
  }
  MemoryStats s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(12 * MiB));
  EXPECT_EQ(s.num_upstream_frees, 3);
  // The segment kept is the one used last.
  const auto snap = a.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].address, addr_of(blocks.back()));
  // Lowering the cap releases at once; small blocks bypass the thread cache.
  a.set_cache_size(0);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  void* keep = a.allocate(64 * KiB);
  a.deallocate(a.allocate(100 * KiB));
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));  // keep's segment
  a.deallocate(keep);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  a.set_cache_size(SIZE_MAX);
  EXPECT_EQ(a.stats().cache_limit, 0u);
  a.deallocate(a.allocate(64 * KiB));
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));
}

TEST_F(SimulatedControlsTest, WarmupReservesThenHits) {
  for (const AllocatorOptions& o : {AllocatorOptions{}, no_tc()}) {
    SCOPED_TRACE(o.thread_cache.resolve(true) ? "thread cache" : "no thread cache");
    auto& a = make(1 * GiB, o);
    a.warmup({{1 * MiB, 4}, {8 * MiB, 2}});
    MemoryStats s = a.stats();
    EXPECT_EQ(s.num_upstream_allocs, 3);  // two small segments, one large
    EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(24 * MiB));
    EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
    EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
    a.reset_memory_stats();
    std::vector<void*> ptrs;
    for (int i = 0; i < 4; ++i) ptrs.push_back(a.allocate(1 * MiB));
    for (int i = 0; i < 2; ++i) ptrs.push_back(a.allocate(8 * MiB));
    s = a.stats();
    EXPECT_EQ(s.num_upstream_allocs, 0);
    EXPECT_EQ(s.num_cache_hits, 6);
    EXPECT_EQ(s.num_cache_misses, 0);
    EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(24 * MiB));
    for (void* p : ptrs) a.deallocate(p);
    // More than the device holds in all: refused before allocating anything.
    std::int64_t allocs_before = a.stats().num_allocs;
    EXPECT_THROW(a.warmup({{1 * MiB, 2}, {2 * GiB, 1}}), InvalidArgumentError);
    EXPECT_EQ(a.stats().num_allocs, allocs_before);
    // A warm-up that fits the device but not what is left of it gives back
    // what it took.
    void* live = a.allocate(600 * MiB);
    allocs_before = a.stats().num_allocs;
    EXPECT_THROW(a.warmup({{1 * MiB, 2}, {512 * MiB, 1}}), OutOfMemoryError);
    s = a.stats();
    EXPECT_EQ(s.allocation_count[kStatAggregate].current, 1);
    EXPECT_EQ(s.num_allocs - s.num_frees, 1);
    EXPECT_EQ(s.num_allocs, allocs_before + 2);
    a.deallocate(live);
  }
}

TEST_F(SimulatedControlsTest, CollectGarbageReleasesIdleSegmentsOnly) {
  auto& a = make(1 * GiB, no_tc());
  void* old_block = a.allocate(12 * MiB);
  void* new_block = a.allocate(14 * MiB);
  void* live = a.allocate(16 * MiB);
  a.deallocate(old_block);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  a.deallocate(new_block);
  // Idle for >= 200 ms: only the first segment.
  EXPECT_EQ(a.collect_garbage(std::chrono::milliseconds(200)), 12 * MiB);
  auto snap = a.snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(30 * MiB));
  EXPECT_EQ(a.stats().num_upstream_frees, 1);
  // Everything idle: the other free segment; never the live one.
  EXPECT_EQ(a.collect_garbage(), 14 * MiB);
  snap = a.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].address, addr_of(live));
  EXPECT_EQ(a.collect_garbage(), 0u);
  EXPECT_TRUE(a.owns(live));
  a.deallocate(live);
  EXPECT_EQ(a.collect_garbage(), 16 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
}

TEST_F(SimulatedControlsTest, CollectGarbageTakesBackThreadCachedBlocks) {
  auto& a = make(1 * GiB);
  void* live = a.allocate(1000);
  void* p = a.allocate(12 * MiB);
  void* q = a.allocate(2000);
  a.deallocate(p);
  a.deallocate(q);
  EXPECT_GE(count_blocks(a.snapshot(), "thread_cached"), 1u);
  EXPECT_EQ(a.collect_garbage(), 12 * MiB);  // the small segment still holds `live`
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 0u);
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(2 * MiB));
  a.deallocate(live);
}

// Blocks cached by another (idle) thread are taken back when the pool needs
// them: before growing, and on out of memory.
TEST_F(SimulatedControlsTest, OtherThreadsCachesAreReclaimed) {
  AllocatorOptions o;
  o.thread_cache_bytes = 64 * MiB;
  o.arenas = 1;  // both threads in one pool (ArenasTest covers threads in different arenas)
  auto& a = make(64 * MiB, o);
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;
  std::thread holder([&] {
    std::vector<void*> ptrs;
    for (int i = 0; i < 30; ++i) ptrs.push_back(a.allocate(1 * MiB));  // 15 small segments
    for (void* p : ptrs) a.deallocate(p);                               // all into this thread's cache
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 1;
    }
    cv.notify_all();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 2; });
    // Its cache was emptied behind its back: it still works.
    a.deallocate(a.allocate(1 * MiB));
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 1; });
  }
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 30u);
  MemoryStats before = a.stats();
  // 1. A small request that only the other thread's cache can serve without
  //    growing: no new segment.
  void* p = a.allocate(1 * MiB);
  MemoryStats after = a.stats();
  EXPECT_EQ(after.num_upstream_allocs, before.num_upstream_allocs);
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 0u);
  a.deallocate(p);
  // 2. The reclaimed blocks now sit in the pool (and p in this thread's
  //    cache): a request larger than what the device has left succeeds once
  //    those free segments are released.
  before = a.stats();
  void* big = a.allocate(40 * MiB);  // 64 - 30 MiB reserved: fits only after releasing
  after = a.stats();
  EXPECT_EQ(after.num_ooms, 0);
  EXPECT_GE(after.num_upstream_frees, before.num_upstream_frees + 5);
  a.deallocate(big);
  {
    std::lock_guard<std::mutex> lock(mu);
    phase = 2;
  }
  cv.notify_all();
  holder.join();
}

TEST_F(SimulatedControlsTest, OutOfMemoryReclaimsAnIdleThreadsCache) {
  AllocatorOptions o;
  o.thread_cache_bytes = 64 * MiB;
  o.thread_cache_large_park = 4;  // all four stay parked until the reclaim
  auto& a = make(64 * MiB, o);
  std::mutex mu;
  std::condition_variable cv;
  int phase = 0;
  std::thread holder([&] {
    std::vector<void*> ptrs;
    for (int i = 0; i < 4; ++i) ptrs.push_back(a.allocate(12 * MiB));  // 48 MiB in 12 MiB segments
    for (void* p : ptrs) a.deallocate(p);
    {
      std::lock_guard<std::mutex> lock(mu);
      phase = 1;
    }
    cv.notify_all();
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 2; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return phase == 1; });
  }
  // The holder's cache keeps at most thread_cache_large_count (4) blocks of
  // one large size: all four are cached.
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 4u);
  const MemoryStats before = a.stats();
  void* p = a.allocate(40 * MiB);  // needs the holder's 48 MiB back
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.num_ooms, 0);
  EXPECT_EQ(after.num_upstream_frees, before.num_upstream_frees + 4);
  EXPECT_EQ(after.reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(40 * MiB));
  a.deallocate(p);
  {
    std::lock_guard<std::mutex> lock(mu);
    phase = 2;
  }
  cv.notify_all();
  holder.join();
}

// A free block that fits must be found before the allocator gives up, even
// when many smaller free blocks of the same size class come first (the free
// index examines only a few blocks per class; with room to grow it may take a
// new segment instead, which is an accepted approximation of best fit, but
// on a full device that would be a spurious out-of-memory error).
TEST_F(SimulatedControlsTest, FreeBlockThatFitsIsFoundBehindSmallerOnes) {
  // Five small segments, exactly: the whole device.
  auto& a = make(10 * MiB, no_tc());
  // Segment 1: F (263 KiB), six 256 KiB blocks, a 249 KiB filler.
  // Segments 2-5: eight 256 KiB blocks each. No free byte anywhere.
  void* fit = a.allocate(263 * KiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(a.allocate(256 * KiB));
  void* filler = a.allocate(249 * KiB);
  for (int i = 0; i < 32; ++i) blocks.push_back(a.allocate(256 * KiB));
  ASSERT_EQ(a.snapshot().size(), 5u);
  ASSERT_EQ(count_blocks(a.snapshot(), "free"), 0u);
  // Free F first (it ends up last in its size class's list), then every
  // other 256 KiB block: 19 isolated holes of 256 KiB, all in F's size
  // class and all too small for 262 KiB.
  a.deallocate(fit);
  std::vector<void*> kept;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const bool seg1 = i < 6;
    if ((seg1 && i % 2 == 1) || (!seg1 && (i - 6) % 2 == 0)) a.deallocate(blocks[i]);
    else kept.push_back(blocks[i]);
  }
  ASSERT_EQ(count_blocks(a.snapshot(), "free"), 20u);
  const std::int64_t upstream_before = a.stats().num_upstream_allocs;
  void* p = nullptr;
  EXPECT_NO_THROW(p = a.allocate(262 * KiB));
  EXPECT_EQ(p, fit) << "the only free block that fits was not used";
  EXPECT_EQ(a.stats().num_upstream_allocs, upstream_before);
  EXPECT_EQ(a.stats().num_ooms, 0);
  if (p != nullptr) a.deallocate(p);
  a.deallocate(filler);
  for (void* q : kept) a.deallocate(q);
}

TEST_F(SimulatedControlsTest, InjectedUpstreamFailures) {
  auto& a = make(256 * MiB);
  // One failure: the retry after releasing the (empty) cache succeeds.
  sim_->fail_next_allocations(1);
  void* p = a.allocate(1000);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.num_upstream_failures, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_cache_flushes, 1);
  a.deallocate(p);
  a.empty_cache();
  // Two failures: a small request has no other option.
  sim_->fail_next_allocations(2);
  EXPECT_THROW(a.allocate(1000), OutOfMemoryError);
  s = a.stats();
  EXPECT_EQ(s.num_upstream_failures, 3);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  a.deallocate(a.allocate(1000));  // works again
  a.empty_cache();
  // Two failures: a large request falls back to a segment of its own size.
  sim_->fail_next_allocations(2);
  void* q = a.allocate(4 * MiB);
  auto snap = a.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].size, 4 * MiB);
  EXPECT_EQ(a.allocation_size(q), 4 * MiB);
  a.deallocate(q);
  a.empty_cache();
  // Three failures: out of options.
  sim_->fail_next_allocations(3);
  EXPECT_THROW(a.allocate(4 * MiB), OutOfMemoryError);
  // >= 10 MiB is already rounded to 2 MiB: no smaller fallback.
  sim_->fail_next_allocations(2);
  EXPECT_THROW(a.allocate(12 * MiB), OutOfMemoryError);
  s = a.stats();
  EXPECT_EQ(s.num_ooms, 3);
  EXPECT_EQ(s.num_upstream_failures, 10);
  EXPECT_EQ(sim_->num_failed_allocs(), 10u);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  a.deallocate(a.allocate(12 * MiB));
}

}  // namespace
}  // namespace genesis::memory::testing_support
