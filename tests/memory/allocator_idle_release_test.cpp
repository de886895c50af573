// An allocator with idle_release gives its cached memory back once it has
// made no allocation for that long (Note [Releasing when idle] in
// idle_release.cpp), never while it is busy, never what is allocated, and
// allocators can come and go while the watcher runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"
#include "support/process_util.h"

namespace genesis::memory {
namespace {

using namespace std::chrono_literals;
using testing_support::GiB;
using testing_support::MiB;

std::int64_t idle_test_reserved(const CachingAllocator& a) { return a.stats().reserved_bytes[kStatAggregate].current; }
std::int64_t idle_test_allocated(const CachingAllocator& a) { return a.stats().allocated_bytes[kStatAggregate].current; }

std::unique_ptr<CachingAllocator> make_watched(std::uint32_t idle_ms, bool expandable) {
  AllocatorOptions o;
  o.idle_release_ms = idle_ms;
  o.expandable_segments = expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
  return std::make_unique<CachingAllocator>(std::make_shared<SimulatedDevice>(4 * GiB), o);
}

// Polls until reserved memory falls to `want` (true) or `limit` passes.
bool reserved_falls_to_within(const CachingAllocator& a, std::int64_t want, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (idle_test_reserved(a) <= want) return true;
    std::this_thread::sleep_for(2ms);
  }
  return idle_test_reserved(a) <= want;
}

// Polls until the allocator has released its cache since `flushes` was read.
bool released_since_within(const CachingAllocator& a, std::int64_t flushes, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (a.stats().num_cache_flushes == flushes && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(2ms);
  return a.stats().num_cache_flushes > flushes;
}

TEST(AllocatorIdleReleaseTest, AnIdleAllocatorGivesItsCacheBack) {
  for (const bool expandable : {false, true}) {
    auto a = make_watched(40, expandable);
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) blocks.push_back(a->allocate(8 * MiB + static_cast<std::size_t>(i) * 4096));
    void* kept = a->allocate(3 * MiB);
    for (void* p : blocks) a->deallocate(p);
    ASSERT_GT(idle_test_reserved(*a), idle_test_allocated(*a)) << "nothing cached to release";
    const std::int64_t before = idle_test_reserved(*a);
    const std::int64_t flushes = a->stats().num_cache_flushes;
    // Released within a generous bound (the watcher looks every 10 ms here),
    // as much as collect_garbage() can: asking again finds nothing more.
    EXPECT_TRUE(released_since_within(*a, flushes, 10s)) << "expandable " << expandable << ": never released";
    EXPECT_LT(idle_test_reserved(*a), before);
    EXPECT_EQ(a->collect_garbage(), 0u) << "expandable " << expandable;
    // What is allocated stays: the kept block is still the allocator's.
    EXPECT_TRUE(a->owns(kept));
    EXPECT_EQ(idle_test_allocated(*a), static_cast<std::int64_t>(a->allocation_size(kept)));
    a->deallocate(kept);
    a->check_invariants();
  }
}

TEST(AllocatorIdleReleaseTest, ABusyAllocatorKeepsItsCache) {
  // A period far longer than the gaps between allocations: the cache stays
  // while the loop runs, and goes once it stops.
  auto a = make_watched(1500, true);
  void* warm = a->allocate(64 * MiB);
  a->deallocate(warm);
  const std::int64_t flushes = a->stats().num_cache_flushes;
  const auto until = std::chrono::steady_clock::now() + 600ms;
  while (std::chrono::steady_clock::now() < until) {
    a->deallocate(a->allocate(64 * MiB));
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(a->stats().num_cache_flushes, flushes) << "released while allocating every millisecond";
  EXPECT_GE(idle_test_reserved(*a), static_cast<std::int64_t>(64 * MiB));
  EXPECT_TRUE(reserved_falls_to_within(*a, 0, 20s)) << "reserved " << idle_test_reserved(*a) << " after the loop stopped";
}

TEST(AllocatorIdleReleaseTest, WhatIsFreedAfterAQuietSpellIsReleasedToo) {
  // A program that holds its blocks through a quiet spell longer than the
  // period (a long computation) and only then frees them: the release the
  // spell brought found little to give, and the freed blocks must still go
  // one period after the frees, with no allocation to wake the watcher.
  for (const bool expandable : {false, true}) {
    auto a = make_watched(40, expandable);
    void* small = a->allocate(3 * MiB);  // classic: a segment with room to spare, so something is cached
    void* big = a->allocate(256 * MiB);
    void* other = a->allocate(40 * MiB);
    a->deallocate(other);                  // cached through the quiet spell
    const std::int64_t flushes = a->stats().num_cache_flushes;
    ASSERT_TRUE(released_since_within(*a, flushes, 10s)) << "expandable " << expandable;
    a->deallocate(big);
    EXPECT_TRUE(reserved_falls_to_within(*a, static_cast<std::int64_t>(128 * MiB), 10s))
        << "expandable " << expandable << ": reserved " << idle_test_reserved(*a) << " after the late free";
    EXPECT_TRUE(a->owns(small));
    a->deallocate(small);
    a->check_invariants();
  }
}

TEST(AllocatorIdleReleaseTest, OffByDefaultAndWhenAskedNotTo) {
  EXPECT_EQ(AllocatorOptions{}.idle_release_ms, 0u);
  auto a = make_watched(0, false);
  a->deallocate(a->allocate(16 * MiB));
  const std::int64_t held = idle_test_reserved(*a);
  ASSERT_GT(held, 0);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(idle_test_reserved(*a), held);
}

TEST(AllocatorIdleReleaseTest, AllocatorsComeAndGoWhileTheWatcherRuns) {
  // Destruction waits for a release in progress: no use after free (the
  // sanitizer builds check), whatever the timing.
  for (int round = 0; round < 40; ++round) {
    auto a = make_watched(1 + round % 4, round % 2 == 0);
    for (int i = 0; i < 4; ++i) a->deallocate(a->allocate(4 * MiB));
    std::this_thread::sleep_for(std::chrono::microseconds(500 * (round % 7)));
    a.reset();
  }
  auto survivor = make_watched(20, false);
  survivor->deallocate(survivor->allocate(4 * MiB));
  EXPECT_TRUE(reserved_falls_to_within(*survivor, 0, 10s));
}

TEST(AllocatorIdleReleaseTest, AForkedChildReleasesToo) {
  // The parent's watcher thread is not in the child (Note [Fork]); the
  // child's first watched allocator starts one of its own.
  auto parent = make_watched(20, false);
  parent->deallocate(parent->allocate(4 * MiB));
  const int rc = test::run_in_child([] {
    ::alarm(60);  // a hang fails the test instead of hanging it
    auto a = make_watched(20, false);
    a->deallocate(a->allocate(4 * MiB));
    return reserved_falls_to_within(*a, 0, 20s) ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(reserved_falls_to_within(*parent, 0, 10s));
}

TEST(AllocatorIdleReleaseTest, TheTextTakesDurations) {
  EXPECT_EQ(parse_alloc_conf("idle_release:30s").idle_release_ms, 30000u);
  EXPECT_EQ(parse_alloc_conf("idle_release:250ms").idle_release_ms, 250u);
  EXPECT_EQ(parse_alloc_conf("idle_release:5min").idle_release_ms, 300000u);
  EXPECT_EQ(parse_alloc_conf("idle_release:off").idle_release_ms, 0u);
  EXPECT_EQ(parse_alloc_conf("idle_release:0").idle_release_ms, 0u);
  for (const char* bad : {"idle_release:30", "idle_release:-1s", "idle_release:1.5s", "idle_release:s",
                          "idle_release:2h", "idle_release:0ms", "idle_release:1441min"})
    EXPECT_THROW((void)parse_alloc_conf(bad), InvalidArgumentError) << bad;
  for (const char* text : {"idle_release:30s", "idle_release:250ms", "idle_release:5min", "idle_release:1500ms"})
    EXPECT_EQ(format_alloc_conf(parse_alloc_conf(text)), text);
}

}  // namespace
}  // namespace genesis::memory
