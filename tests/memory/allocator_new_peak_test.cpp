// Expandable segments at a new peak (Note [New peaks empty the thread
// caches] in src/memory/expandable_segments.cpp): before the pool maps pages
// past its high-water mark, every thread's cached blocks go back to the pool,
// so memory parked in a cache is released instead of adding to the peak.
// And when the address space runs short (several streams on a device whose
// size fills most of it), a stream's range is smaller, not missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

class NewPeakTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(std::size_t capacity = 1 * GiB) { return make(AllocatorOptions{}, capacity); }
  // Expandable segments, with `o`'s other options.
  std::unique_ptr<CachingAllocator> make(AllocatorOptions o, std::size_t capacity = 1 * GiB) {
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  std::int64_t reserved(const CachingAllocator& a) { return a.stats().reserved_bytes[kStatAggregate].current; }
  std::int64_t peak_reserved(const CachingAllocator& a) { return a.stats().reserved_bytes[kStatAggregate].peak; }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

// 32 small blocks fill four pages of the small pool and go into the thread
// cache. An 8 MiB request needs four new pages in the large pool: the cached
// blocks go back, merge, and their four pages are released, so reserved
// memory never exceeds what the program ever held at once.
TEST_F(NewPeakTest, CachedBlocksGoBackBeforeThePoolMapsPastItsPeak) {
  auto a = make();
  std::vector<void*> small;
  for (int i = 0; i < 32; ++i) small.push_back(a->allocate(256 * KiB));
  ASSERT_EQ(reserved(*a), static_cast<std::int64_t>(8 * MiB));
  for (void* p : small) a->deallocate(p);
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 32u);
  ASSERT_EQ(reserved(*a), static_cast<std::int64_t>(8 * MiB));

  void* big = a->allocate(8 * MiB);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(a->stats().allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(8 * MiB));
  a->check_invariants();
  a->deallocate(big);
}

// thread_cache_flush_at_peak:false keeps the caches: the same program
// reserves what they hold on top.
TEST_F(NewPeakTest, WithTheFlushOffTheCachesStayAndThePeakGrows) {
  AllocatorOptions o;
  o.thread_cache_flush_at_peak = false;
  auto a = make(o);
  std::vector<void*> small;
  for (int i = 0; i < 32; ++i) small.push_back(a->allocate(256 * KiB));
  for (void* p : small) a->deallocate(p);
  void* big = a->allocate(8 * MiB);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 32u);
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(16 * MiB));
  a->check_invariants();
  a->deallocate(big);
}

// The same when the blocks sit in another thread's cache: the thread that
// reaches the new peak empties every cache, not only its own.
TEST_F(NewPeakTest, AnotherThreadsCachedBlocksGoBackToo) {
  auto a = make();
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;
  std::thread holder([&] {
    std::vector<void*> small;
    for (int i = 0; i < 32; ++i) small.push_back(a->allocate(256 * KiB));
    for (void* p : small) a->deallocate(p);
    std::unique_lock<std::mutex> lock(m);
    phase = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return phase == 2; });  // keeps its cache until then
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return phase == 1; });
  }
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 32u);
  void* big = a->allocate(8 * MiB);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(8 * MiB));
  {
    std::lock_guard<std::mutex> lock(m);
    phase = 2;
  }
  cv.notify_all();
  holder.join();
  a->check_invariants();
  a->deallocate(big);
}

// Below the high-water mark nothing is flushed for the peak's sake: reusing
// mapped pages is not a new peak, and the cache keeps serving.
TEST_F(NewPeakTest, BelowThePeakTheCachesStay) {
  auto a = make();
  void* x = a->allocate(8 * MiB);
  void* y = a->allocate(8 * MiB);
  void* s = a->allocate(256 * KiB);
  ASSERT_EQ(peak_reserved(*a), static_cast<std::int64_t>(18 * MiB));
  a->deallocate(x);  // parked: the one large block a cache keeps
  a->deallocate(y);  // the second goes to the pool and takes x with it
  a->deallocate(s);
  ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 1u);
  // Best fit places 4 MiB in the mapped 16 MiB that x and y left: no page
  // is mapped, no cache is emptied.
  void* other = a->allocate(4 * MiB);
  EXPECT_EQ(addr_of(other), addr_of(x));
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 1u);
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(18 * MiB));
  EXPECT_EQ(a->allocate(256 * KiB), s);  // still a hit
  a->deallocate(s);
  a->deallocate(other);
}

// Each index of the simulated device has 4 TiB of address space. On a
// 768 GiB device five device-sized ranges fit; the next ones halve until
// they fit (down to 1/64 of the device), so four streams (a small and a large
// pool each: eight ranges) all get expandable memory. When not even 1/64
// fits, a stream's pool falls back to classic segments.
TEST_F(NewPeakTest, ShortAddressSpaceGivesSmallerRangesNotClassicSegments) {
  const std::size_t device = 768 * GiB;
  auto a = make(device);
  std::vector<StreamId> streams{0};
  for (int i = 0; i < 3; ++i) streams.push_back(sim_->create_stream());
  std::vector<void*> live;
  for (StreamId s : streams) {
    live.push_back(a->allocate(64 * MiB, s));
    live.push_back(a->allocate(64 * KiB, s));
  }
  auto snap = a->snapshot();
  ASSERT_EQ(snap.size(), 8u);
  std::vector<std::size_t> sizes;
  for (const SegmentInfo& seg : snap) {
    EXPECT_TRUE(seg.expandable) << "stream " << seg.stream << " pool " << seg.pool;
    sizes.push_back(seg.size);
  }
  std::sort(sizes.begin(), sizes.end());
  const std::vector<std::size_t> expected{device / 64, device / 16, device / 4, device,
                                          device,      device,      device,     device};
  EXPECT_EQ(sizes, expected);
  // Each stream's 64 KiB would map a page past the mark: the first stream's
  // page, mostly free, is lent instead (Note [Borrowing across streams]).
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(4 * 64 * MiB + 2 * MiB));
  EXPECT_EQ(a->stats().num_stream_borrows, 3);

  // 4 GiB of address space is left, less than 1/64 of the device: a fifth
  // stream's large pool uses a classic segment.
  const StreamId fifth = sim_->create_stream();
  live.push_back(a->allocate(64 * MiB, fifth));
  snap = a->snapshot();
  bool classic_found = false;
  for (const SegmentInfo& seg : snap)
    if (seg.stream == fifth && seg.pool == "large") classic_found = !seg.expandable;
  EXPECT_TRUE(classic_found);
  for (void* p : live) a->deallocate(p);
  a->check_invariants();
}

// Twenty steps that peak with a block placed past the hole the step's first
// block left (8 MiB the step touches but does not hold at its peak); returns
// the chunks mapped after the first five.
std::int64_t cycling_loop(CachingAllocator& a) {
  std::int64_t maps_late = 0;
  for (int step = 0; step < 20; ++step) {
    const std::int64_t before = a.stats().num_upstream_allocs;
    void* x = a.allocate(8 * MiB);
    void* y = a.allocate(8 * MiB);
    a.deallocate(x);
    void* z = a.allocate(12 * MiB);  // does not fit x's hole: the step's peak
    a.deallocate(y);
    a.deallocate(z);
    if (step >= 5) maps_late += a.stats().num_upstream_allocs - before;
    a.check_invariants();
  }
  return maps_late;
}

// A step that peaks with a block placed past the hole its first block left:
// held over the whole step, the pages it touches are 8 MiB more than those it
// holds at its peak. With no room the peak unmaps them every step and the
// next step maps them again; release_slack lets the releases earn room for
// them, after which the loop maps nothing, and reserved memory stays within
// the room above the allocated peak.
TEST_F(NewPeakTest, ALoopThatCyclesAtTheMarkStopsMappingWithinItsRoom) {
  for (const double slack : {0.0, 0.02}) {
    SCOPED_TRACE(slack);
    sim_ = std::make_shared<SimulatedDevice>(4 * GiB);
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    o.thread_cache = false;  // every block goes straight back to the pool
    o.release_slack = slack;
    CachingAllocator a(sim_, o);
    void* weights = a.allocate(1 * GiB);
    const std::int64_t maps_late = cycling_loop(a);
    const MemoryStats s = a.stats();
    const std::int64_t peak_allocated = s.allocated_bytes[kStatAggregate].peak;
    EXPECT_EQ(peak_allocated, static_cast<std::int64_t>(1 * GiB + 20 * MiB));
    if (slack == 0.0) {
      EXPECT_GE(maps_late, 15);  // about one mapping a step, never settling
      EXPECT_EQ(s.reserved_bytes[kStatAggregate].peak, peak_allocated);  // as tight as can be
    } else {
      EXPECT_EQ(maps_late, 0);
      EXPECT_LE(s.reserved_bytes[kStatAggregate].peak,
                peak_allocated + static_cast<std::int64_t>(slack * static_cast<double>(peak_allocated)));
    }
    a.deallocate(weights);
  }
}

// Auto: room only where mapping is expensive (the simulated device with
// CUDA-like costs resolves like CUDA); where pages map cheaply the loop's
// cycling costs little and the replays stay as tight as they can be.
TEST_F(NewPeakTest, RoomIsKeptByDefaultOnlyWhereMappingIsExpensive) {
  for (const bool costly : {false, true}) {
    SCOPED_TRACE(costly ? "costly mapping" : "cheap mapping");
    sim_ = costly ? std::make_shared<SimulatedDevice>(4 * GiB, 0, SimulatedDevice::VmmCost::parse("0.001,0.001,0.001"))
                  : std::make_shared<SimulatedDevice>(4 * GiB);
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    o.thread_cache = false;
    CachingAllocator a(sim_, o);
    void* weights = a.allocate(1 * GiB);
    const std::int64_t maps_late = cycling_loop(a);
    if (costly) {
      EXPECT_EQ(maps_late, 0);
      EXPECT_LE(a.stats().reserved_bytes[kStatAggregate].peak,
                static_cast<std::int64_t>(1.01 * static_cast<double>(1 * GiB + 20 * MiB)));
    } else {
      EXPECT_GT(maps_late, 0);
    }
    a.check_invariants();
    a.deallocate(weights);
  }
}

// A small program whose blocks come from two pools in turn (a 64 MiB block,
// then a 1 MiB one): at 1.5% of 65 MiB the room would be less than the page
// the small pool needs, and every turn unmapped the large block's chunk to
// map that page and mapped the chunk again for the next large block. The
// room may reach a page per segment, so the loop settles after its first
// turn, a page above its allocated peak.
TEST_F(NewPeakTest, TwoPoolsTakingTurnsSettleWithinAPageOfRoom) {
  sim_ = std::make_shared<SimulatedDevice>(4 * GiB, 0, SimulatedDevice::VmmCost::parse("0.001,0.001,0.001"));
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  CachingAllocator a(sim_, o);
  for (int i = 0; i < 4; ++i) {
    a.deallocate(a.allocate(64 * MiB));
    a.deallocate(a.allocate(1 * MiB));
  }
  const std::size_t maps = sim_->num_chunks_mapped();
  for (int i = 0; i < 50; ++i) {
    a.deallocate(a.allocate(64 * MiB));
    a.deallocate(a.allocate(1 * MiB));
    a.deallocate(a.allocate(100 * 1024));
  }
  EXPECT_EQ(sim_->num_chunks_mapped(), maps) << "the turns still map pages";
  EXPECT_LE(peak_reserved(a), static_cast<std::int64_t>(64 * MiB + 2 * sim_->page_size()));
  // Where the user asked for no room at all, none is kept.
  o.release_slack = 0;
  auto sim0 = std::make_shared<SimulatedDevice>(4 * GiB, 0, SimulatedDevice::VmmCost::parse("0.001,0.001,0.001"));
  CachingAllocator b(sim0, o);
  for (int i = 0; i < 10; ++i) {
    b.deallocate(b.allocate(64 * MiB));
    b.deallocate(b.allocate(1 * MiB));
  }
  EXPECT_EQ(b.stats().reserved_bytes[kStatAggregate].peak, static_cast<std::int64_t>(64 * MiB));
  EXPECT_GE(sim0->num_chunks_mapped(), 10u);
  EXPECT_EQ(sim0->num_misuses(), 0u);
  a.check_invariants();
  b.check_invariants();
}

// Thread caches are the default except over expandable segments whose
// pages are costly to map, where a block one thread holds shifts where the
// others' requests land (Note [Thread caches over costly mappings]); an
// explicit switch wins either way.
TEST_F(NewPeakTest, ThreadCachesAreOffByDefaultOnlyOverCostlyMappings) {
  using Expandable = AllocatorOptions::Expandable;
  struct Case {
    bool costly;
    Expandable expandable;
    AutoSwitch thread_cache;
    bool cached;
  };
  const Case cases[] = {
      {false, Expandable::kOn, AutoSwitch::automatic(), true},   // the simulated device's default
      {false, Expandable::kOff, AutoSwitch::automatic(), true},
      {true, Expandable::kOff, AutoSwitch::automatic(), true},   // CUDA's default: classic segments
      {true, Expandable::kOn, AutoSwitch::automatic(), false},   // CUDA with expandable segments
      {true, Expandable::kOn, AutoSwitch(true), true},
      {false, Expandable::kOn, AutoSwitch(false), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << (c.costly ? "costly" : "cheap") << " mapping, expandable "
                                      << static_cast<int>(c.expandable) << ", thread_cache "
                                      << static_cast<int>(c.thread_cache.state));
    sim_ = c.costly ? std::make_shared<SimulatedDevice>(4 * GiB, 0, SimulatedDevice::VmmCost::parse("0.001,0.001,0.001"))
                    : std::make_shared<SimulatedDevice>(4 * GiB);
    AllocatorOptions o;
    o.expandable_segments = c.expandable;
    o.thread_cache = c.thread_cache;
    CachingAllocator a(sim_, o);
    for (int i = 0; i < 100; ++i) a.deallocate(a.allocate(4 * KiB));
    if (c.cached) {
      EXPECT_GE(a.stats().num_thread_cache_hits, 90);
    } else {
      EXPECT_EQ(a.stats().num_thread_cache_hits, 0);
    }
    a.check_invariants();
  }
}

// A release at the mark takes the highest mapped pages of a free block, as
// many as needed, skipping pages an earlier release already unmapped. A
// free 64 MiB block lies below a live one; each new page of the small pool
// takes one of its pages, so reserved memory never passes the 128 MiB the
// program held at first. (The pages were once counted as a span down from
// the block's top: the second release covered only the hole the first had
// left, unmapped nothing, and the peak grew by a page per small page.)
TEST_F(NewPeakTest, RepeatedReleasesSkipTheHolesEarlierOnesLeft) {
  AllocatorOptions o;
  o.thread_cache = false;
  auto a = make(o);
  void* low = a->allocate(64 * MiB);
  void* high = a->allocate(64 * MiB);
  ASSERT_EQ(reserved(*a), static_cast<std::int64_t>(128 * MiB));
  a->deallocate(low);  // 64 MiB free and mapped, under a live block
  std::vector<void*> small;
  for (int i = 0; i < 16; ++i) {  // four pages of the small pool, one at a time
    small.push_back(a->allocate(512 * KiB));
    EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(128 * MiB)) << "after small block " << i;
  }
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(128 * MiB));
  a->check_invariants();
  for (void* p : small) a->deallocate(p);
  a->deallocate(high);
}

// The promise behind the mark, on random traces: reserved memory passes its
// old peak only when no free page could have been given back instead. So
// whenever an allocation raises the peak, what is reserved beyond the
// allocated bytes can only be pages that free blocks share with live ones:
// at most two per free block (its first and last page). Sizes of both pools
// (512 bytes to 48 MiB), live sets that grow and shrink in waves so that
// peaks come again and again over free memory full of holes, with and
// without the thread cache.
TEST_F(NewPeakTest, APeakGrowsOnlyWhenNoFreePageCouldBeGivenBack) {
  for (const bool thread_cache : {false, true}) {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      AllocatorOptions o;
      o.thread_cache = thread_cache;
      auto a = make(o, 16 * GiB);
      const std::int64_t page = static_cast<std::int64_t>(sim_->page_size());
      std::mt19937_64 rng(seed);
      auto log_uniform = [&](double lo, double hi) {
        return static_cast<std::size_t>(std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)));
      };
      std::vector<void*> live;
      int checked = 0;
      for (int op = 0; op < 3000; ++op) {
        // The target number of live blocks rises and falls in waves of 600 operations.
        const int wave = op % 600;
        const std::size_t target = static_cast<std::size_t>(20 + (wave < 300 ? wave : 600 - wave) / 4);
        const bool alloc = live.empty() || (live.size() < target ? rng() % 4 != 0 : rng() % 4 == 0);
        if (!alloc) {
          const std::size_t i = rng() % live.size();
          a->deallocate(live[i]);
          live[i] = live.back();
          live.pop_back();
          continue;
        }
        const std::size_t size = rng() % 5 < 2 ? log_uniform(512, 1 << 20) : log_uniform(1 << 20, 48 << 20);
        const std::int64_t peak_before = peak_reserved(*a);
        live.push_back(a->allocate(size));
        const MemoryStats st = a->stats();
        const std::int64_t now = st.reserved_bytes[kStatAggregate].current;
        if (now <= peak_before) continue;
        std::int64_t free_blocks = 0;
        for (const SegmentInfo& seg : a->snapshot())
          for (const BlockInfo& b : seg.blocks)
            if (seg.expandable && (b.state == "free" || b.state == "thread_cached")) ++free_blocks;
        const std::int64_t beyond = now - st.allocated_bytes[kStatAggregate].current;
        ASSERT_LE(beyond, 2 * page * free_blocks)
            << "seed " << seed << ", thread cache " << thread_cache << ", operation " << op << ": the peak rose to "
            << now << " with " << beyond << " bytes reserved beyond the allocated ones and " << free_blocks
            << " free blocks";
        ++checked;
      }
      EXPECT_GT(checked, 20) << "the trace should reach new peaks often";
      a->check_invariants();
      for (void* p : live) a->deallocate(p);
    }
  }
}

// Below the mark too, a request that cached blocks would serve does not map
// new pages (Note [No new pages while caches hold blocks]): the 256 KiB
// blocks cached from the one small page go back, merge, and the 512 KiB
// request lands on that page instead of mapping the next one.
TEST_F(NewPeakTest, CachedBlocksGoBackBeforeThePoolMapsNewPagesBelowItsPeak) {
  for (const bool reversed : {false, true}) {
    auto a = make();
    void* big = a->allocate(8 * MiB);
    a->deallocate(big);
    a->empty_cache();  // the mark stays at 8 MiB; nothing is mapped
    ASSERT_EQ(reserved(*a), 0);
    std::vector<void*> small;
    for (int i = 0; i < 8; ++i) small.push_back(a->allocate(256 * KiB));
    ASSERT_EQ(reserved(*a), static_cast<std::int64_t>(2 * MiB));
    // Either order of frees leaves the whole page cached.
    if (reversed) std::reverse(small.begin(), small.end());
    for (void* p : small) a->deallocate(p);
    ASSERT_EQ(count_blocks(a->snapshot(), "thread_cached"), 8u);

    void* p = a->allocate(512 * KiB);
    EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(2 * MiB));
    EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
    const std::uintptr_t page0 = std::min(addr_of(small.front()), addr_of(small.back()));
    EXPECT_GE(addr_of(p), page0);
    EXPECT_LT(addr_of(p), page0 + 2 * MiB);
    a->check_invariants();
    a->deallocate(p);
  }
}

// With the cache off the program above maps one page; with the cache on it
// must not map more than that (the cache never makes the pool map pages).
TEST_F(NewPeakTest, RandomSmallSizesReserveNoMoreWithTheCacheThanWithout) {
  auto run = [&](bool cache) {
    AllocatorOptions o;
    o.thread_cache = cache;
    auto a = make(o, 4 * GiB);
    std::mt19937_64 rng(7);
    std::vector<void*> live;
    for (int i = 0; i < 20000; ++i) {
      if (!live.empty() && rng() % 100 < 49) {
        const std::size_t k = rng() % live.size();
        a->deallocate(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else {
        live.push_back(a->allocate(1 + rng() % MiB));
      }
    }
    const double ratio = static_cast<double>(peak_reserved(*a)) /
                         static_cast<double>(a->stats().requested_bytes[kStatAggregate].peak);
    a->check_invariants();
    for (void* p : live) a->deallocate(p);
    return ratio;
  };
  const double without = run(false), with = run(true);
  EXPECT_LT(with, without * 1.03) << "with the cache " << with << ", without " << without;
}

}  // namespace
}  // namespace genesis::memory
