// Classic segments at the mark (Note [Classic segments at the mark] in
// src/memory/arena.cpp): with classic_release_at_mark, wholly free segments
// go back to the upstream before the pool grows past its high-water mark,
// so a program whose sizes keep growing reserves what it holds, not what it
// ever held in each size; without it, every segment stays cached.
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

class ClassicMarkTest : public ::testing::Test {
 protected:
  std::unique_ptr<CachingAllocator> make(bool release, std::size_t capacity = 4 * GiB) {
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOff;
    o.classic_release_at_mark = release;
    return std::make_unique<CachingAllocator>(sim_, o);
  }
  static std::int64_t reserved(const CachingAllocator& a) { return a.stats().reserved_bytes[kStatAggregate].current; }
  static std::int64_t peak_reserved(const CachingAllocator& a) {
    return a.stats().reserved_bytes[kStatAggregate].peak;
  }
  void TearDown() override {
    if (sim_ != nullptr) {
      EXPECT_EQ(sim_->num_misuses(), 0u);
    }
  }
  std::shared_ptr<SimulatedDevice> sim_;
};

// A buffer that grows by a third each step (a KV cache, a batch that gets
// longer): each new size fits none of the freed ones. Kept, they add up to
// several times the live bytes; given back at the mark, reserved memory stays
// at the live peak (the old buffer lives while the new one is made, as in a
// copy into the larger one; sizes are whole 2 MiB, so no rounding shows).
TEST_F(ClassicMarkTest, AGrowingBufferReservesWhatItHoldsNotWhatItHeld) {
  for (const bool release : {false, true}) {
    SCOPED_TRACE(release ? "classic_release_at_mark" : "default");
    auto a = make(release);
    std::size_t size = 16 * MiB;
    void* cur = a->allocate(size);
    std::int64_t live_peak = static_cast<std::int64_t>(size);
    for (int step = 0; step < 8; ++step) {
      const std::size_t next = (size + size / 3 + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);  // whole segments
      void* grown = a->allocate(next);
      live_peak = std::max<std::int64_t>(live_peak, static_cast<std::int64_t>(size + next));
      a->deallocate(cur);
      cur = grown;
      size = next;
      a->check_invariants();
    }
    const double ratio = static_cast<double>(peak_reserved(*a)) / static_cast<double>(live_peak);
    if (release) {
      EXPECT_EQ(ratio, 1.0) << peak_reserved(*a) << " reserved at the peak for " << live_peak << " live";
      EXPECT_GT(a->stats().num_upstream_frees, 0);
    } else {
      EXPECT_GT(ratio, 1.5) << "every old buffer stays cached without the option";
      EXPECT_EQ(a->stats().num_upstream_frees, 0);
    }
    a->deallocate(cur);
  }
}

// Under the mark nothing is given back: after a peak of 384 MiB and an
// empty cache, a free 100 MiB segment stays cached while the pool grows by
// 200 MiB (300 MiB in all), and a loop of the same size reuses it. Only the
// growth that would pass the mark (400 MiB live) gives it back.
TEST_F(ClassicMarkTest, OnlyGrowthPastTheMarkGivesSegmentsBack) {
  auto a = make(true);
  void* x = a->allocate(256 * MiB);
  void* y = a->allocate(128 * MiB);
  a->deallocate(x);
  a->deallocate(y);
  a->empty_cache();
  ASSERT_EQ(reserved(*a), 0);
  const std::int64_t frees = a->stats().num_upstream_frees;
  void* p = a->allocate(100 * MiB);
  a->deallocate(p);
  void* q = a->allocate(200 * MiB);  // fits no free segment; 300 MiB is under the 384 MiB mark
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(300 * MiB));
  for (int i = 0; i < 16; ++i) {
    p = a->allocate(100 * MiB);
    a->deallocate(p);
  }
  EXPECT_EQ(a->stats().num_upstream_frees, frees);
  void* r = a->allocate(200 * MiB);  // 400 MiB live: past the mark, so the free 100 MiB goes first
  EXPECT_EQ(a->stats().num_upstream_frees, frees + 1);
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(400 * MiB));
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(400 * MiB));
  a->deallocate(q);
  a->deallocate(r);
  a->check_invariants();
}

// Blocks parked in a thread cache are all that keeps a segment in use: they
// go back first, so the segment can be given back instead of growing.
TEST_F(ClassicMarkTest, ParkedBlocksDoNotKeepASegmentFromGoingBack) {
  auto a = make(true);
  std::vector<void*> small;
  for (int i = 0; i < 8; ++i) small.push_back(a->allocate(200 * KiB));
  void* big = a->allocate(64 * MiB);
  for (void* p : small) a->deallocate(p);
  a->deallocate(big);
  ASSERT_EQ(reserved(*a), static_cast<std::int64_t>(66 * MiB));
  // Fits no free segment. Both go back (the small one only once its parked
  // blocks have left the cache), so the pool holds just the new block;
  // with the small blocks still parked it would hold 132 MiB.
  void* bigger = a->allocate(130 * MiB);
  EXPECT_EQ(peak_reserved(*a), static_cast<std::int64_t>(130 * MiB));
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 0u);
  a->deallocate(bigger);
  a->check_invariants();
}

// Another thread's parked block, merged back with its free neighbour, fits
// the request: the pool takes it, neither giving the segment back nor
// growing.
TEST_F(ClassicMarkTest, ABlockThatFitsOnceTheCachesAreBackIsTakenInstead) {
  auto a = make(true);
  void* whole = a->allocate(120 * MiB);
  a->deallocate(whole);
  void* mine = a->allocate(60 * MiB);
  std::promise<void> parked, done;
  std::thread other([&] {
    void* theirs = a->allocate(60 * MiB);  // the other half of the 120 MiB segment
    a->deallocate(theirs);                 // parked in this thread's cache
    parked.set_value();
    done.get_future().wait();  // the cache lives as long as the thread
  });
  parked.get_future().wait();
  a->deallocate(mine);
  EXPECT_EQ(count_blocks(a->snapshot(), "thread_cached"), 2u);  // each half in its thread's cache
  const std::int64_t allocs = a->stats().num_upstream_allocs;
  void* big = a->allocate(100 * MiB);  // 160 MiB out counting the parked block: past the mark
  EXPECT_EQ(a->stats().num_upstream_allocs, allocs);
  EXPECT_EQ(a->stats().num_upstream_frees, 0);
  EXPECT_EQ(reserved(*a), static_cast<std::int64_t>(120 * MiB));
  a->deallocate(big);
  done.set_value();
  other.join();
  a->check_invariants();
}

// Random sizes, random lifetimes: the invariants hold at every step, reserved
// memory never exceeds the upstream's own count, and with the option the
// peak stays below what the same sequence reserves without it.
TEST_F(ClassicMarkTest, RandomTracesKeepTheInvariantsAndReserveLess) {
  std::int64_t peaks[2] = {0, 0};
  for (const bool release : {false, true}) {
    auto a = make(release, 16 * GiB);
    std::mt19937_64 rng(7);
    std::vector<std::pair<void*, std::size_t>> live;
    for (int i = 0; i < 3000; ++i) {
      if (!live.empty() && (live.size() > 40 || rng() % 2 == 0)) {
        const std::size_t k = rng() % live.size();
        a->deallocate(live[k].first);
        live[k] = live.back();
        live.pop_back();
      } else {
        const std::size_t size = (rng() % 4 == 0) ? 1 + rng() % (512 * KiB) : 1 * MiB + rng() % (96 * MiB);
        live.emplace_back(a->allocate(size), size);
      }
      if (i % 250 == 0) a->check_invariants();
      ASSERT_EQ(static_cast<std::size_t>(reserved(*a)), sim_->bytes_in_use());
    }
    for (auto& [p, n] : live) a->deallocate(p);
    a->check_invariants();
    peaks[release ? 1 : 0] = peak_reserved(*a);
  }
  EXPECT_LT(peaks[1], peaks[0]);
}

// The option reaches the allocator from the configuration text, and is
// listed with the others.
TEST_F(ClassicMarkTest, TheOptionComesFromTheConfigurationText) {
  const AllocatorOptions o = parse_alloc_conf("classic_release_at_mark:True", AllocatorOptions{}, "test");
  EXPECT_TRUE(o.classic_release_at_mark);
  EXPECT_FALSE(AllocatorOptions{}.classic_release_at_mark);
  EXPECT_THROW(parse_alloc_conf("classic_release_at_mark:maybe", AllocatorOptions{}, "test"), std::exception);
  EXPECT_EQ(format_alloc_conf(o), "classic_release_at_mark:True");
  bool listed = false;
  for (const AllocConfKey& k : alloc_conf_keys()) listed |= std::string(k.name) == "classic_release_at_mark";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace genesis::memory
