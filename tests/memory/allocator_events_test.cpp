// The event history of the caching allocator: alloc, free and segment
// events with their fields, recording switched on and off, from several
// threads, out-of-memory events, and the ring keeping the newest events.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/events.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

constexpr std::int64_t kM = 1024 * 1024;

// --- event history ---------------------------------------------------------

std::vector<MemoryEvent> of_action(const std::vector<MemoryEvent>& ev, EventAction a) {
  std::vector<MemoryEvent> out;
  for (const MemoryEvent& e : ev)
    if (e.action == a) out.push_back(e);
  return out;
}

TEST(AllocatorEventsTest, ActionNames) {
  EXPECT_EQ(event_action_name(EventAction::kAlloc), "alloc");
  EXPECT_EQ(event_action_name(EventAction::kFree), "free_requested");
  EXPECT_EQ(event_action_name(EventAction::kSegmentAlloc), "segment_alloc");
  EXPECT_EQ(event_action_name(EventAction::kSegmentFree), "segment_free");
  EXPECT_EQ(event_action_name(EventAction::kOOM), "oom");
}

TEST(AllocatorEventsTest, RecordsAllocFreeAndSegments) {
  for (bool tc : {true, false}) {
    SCOPED_TRACE(tc ? "thread cache" : "no thread cache");
    auto sim = std::make_shared<SimulatedDevice>(64 * kM);
    AllocatorOptions o = classic();
    o.record_events = true;
    o.thread_cache = tc;
    CachingAllocator a(sim, o);
    EXPECT_TRUE(a.event_recording());
    const std::uint32_t me = detail::this_thread_number();
    void* p = a.allocate(1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    a.deallocate(p);
    void* q = a.allocate(1000);
    EXPECT_EQ(q, p);
    a.deallocate(q);
    a.empty_cache();
    const auto ev = a.events();
    ASSERT_EQ(ev.size(), 6u);
    for (std::size_t i = 1; i < ev.size(); ++i) EXPECT_LE(ev[i - 1].time_ns, ev[i].time_ns);
    const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(p);
    EXPECT_EQ(ev[0].action, EventAction::kSegmentAlloc);
    EXPECT_EQ(ev[0].address, addr);
    EXPECT_EQ(ev[0].size, 2 * static_cast<std::uint64_t>(kM));
    EXPECT_EQ(ev[1].action, EventAction::kAlloc);
    EXPECT_EQ(ev[1].address, addr);
    EXPECT_EQ(ev[1].size, 1000u);
    EXPECT_EQ(ev[1].block_size, 1024u);
    EXPECT_FALSE(ev[1].cache_hit);
    EXPECT_EQ(ev[2].action, EventAction::kFree);
    EXPECT_EQ(ev[2].address, addr);
    EXPECT_EQ(ev[2].size, 1000u);
    EXPECT_EQ(ev[2].block_size, 1024u);
    EXPECT_GE(ev[2].duration_ns, 10'000'000u) << "lifetime of the first block (slept 20 ms)";
    EXPECT_LT(ev[2].duration_ns, 20'000'000'000u);
    EXPECT_EQ(ev[3].action, EventAction::kAlloc);
    EXPECT_TRUE(ev[3].cache_hit);
    EXPECT_EQ(ev[4].action, EventAction::kFree);
    EXPECT_LT(ev[4].duration_ns, ev[2].duration_ns);
    EXPECT_EQ(ev[5].action, EventAction::kSegmentFree);
    EXPECT_EQ(ev[5].address, addr);
    EXPECT_EQ(ev[5].size, 2 * static_cast<std::uint64_t>(kM));
    for (const MemoryEvent& e : ev) {
      EXPECT_EQ(e.thread, me);
      EXPECT_EQ(e.stream, 0u);
    }
  }
}

TEST(AllocatorEventsTest, OnOffClearAndThreads) {
  auto sim = std::make_shared<SimulatedDevice>(64 * kM);
  CachingAllocator a(sim, classic());
  EXPECT_FALSE(a.event_recording());
  a.deallocate(a.allocate(100));
  EXPECT_TRUE(a.events().empty());
  a.set_event_recording(true);
  EXPECT_TRUE(a.event_recording());
  void* p = a.allocate(100);  // hot path (thread-cache hit) while recording
  std::uint32_t other = 0;
  std::thread t([&] {
    other = detail::this_thread_number();
    a.deallocate(a.allocate(200));
  });
  t.join();
  a.deallocate(p);
  auto ev = a.events();
  EXPECT_EQ(of_action(ev, EventAction::kAlloc).size(), 2u);
  EXPECT_EQ(of_action(ev, EventAction::kFree).size(), 2u);
  std::size_t from_other = 0;
  for (const MemoryEvent& e : ev) {
    // With arenas (Note [Arenas]) the other thread allocates from an arena of
    // its own, whose first segment is an event of that thread too.
    if (e.thread == other) from_other += e.action == EventAction::kAlloc || e.action == EventAction::kFree;
    else EXPECT_EQ(e.thread, detail::this_thread_number());
  }
  EXPECT_EQ(from_other, 2u);  // the exited thread's events are kept
  EXPECT_NE(other, detail::this_thread_number());

  a.set_event_recording(false);
  a.deallocate(a.allocate(300));
  a.deallocate(a.allocate(5 * kM));
  EXPECT_EQ(a.events().size(), ev.size()) << "recorded while recording was off";

  a.clear_events();
  EXPECT_TRUE(a.events().empty());
  a.set_event_recording(true);
  a.deallocate(a.allocate(100));
  EXPECT_EQ(a.events().size(), 2u);
}

TEST(AllocatorEventsTest, RecordsOutOfMemory) {
  auto sim = std::make_shared<SimulatedDevice>(16 * kM);
  AllocatorOptions o = classic();
  o.record_events = true;
  CachingAllocator a(sim, o);
  EXPECT_THROW(a.allocate(32 * kM), OutOfMemoryError);
  const auto ooms = of_action(a.events(), EventAction::kOOM);
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].size, 32 * static_cast<std::uint64_t>(kM));
  EXPECT_EQ(a.stats().num_ooms, 1);
}

TEST(AllocatorEventsTest, RingKeepsNewestEvents) {
  auto sim = std::make_shared<SimulatedDevice>(64 * kM);
  AllocatorOptions o = classic();
  o.record_events = true;
  o.event_capacity_per_thread = 4;
  CachingAllocator a(sim, o);
  void* first = a.allocate(512);
  a.deallocate(first);
  for (int i = 0; i < 10; ++i) a.deallocate(a.allocate(512));
  const auto ev = a.events();
  // This thread's ring holds its 4 newest alloc/free events; the shared ring
  // holds the one segment event.
  EXPECT_EQ(of_action(ev, EventAction::kSegmentAlloc).size(), 1u);
  EXPECT_EQ(of_action(ev, EventAction::kAlloc).size() + of_action(ev, EventAction::kFree).size(), 4u);
  for (const MemoryEvent& e : ev) EXPECT_TRUE(e.action != EventAction::kAlloc || e.cache_hit);
}

}  // namespace
}  // namespace genesis::memory
