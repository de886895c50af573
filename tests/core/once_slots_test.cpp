// OnceSlots (core/once_slots.h): one object per slot however many threads
// race to create it, and lock-free reads that see it fully built. Run under
// TSan (scripts/test.sh) these races are checked for data races too.
#include "genesis/core/once_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "genesis/core/error.h"

namespace genesis {
namespace {

std::atomic<int> g_alive{0};

// An object whose fields are written by its constructor: a reader that got
// the pointer without the constructor's writes being visible would see 0s.
struct Widget {
  explicit Widget(int v) : value(v), check(v * 7 + 1) { g_alive.fetch_add(1); }
  ~Widget() { g_alive.fetch_sub(1); }
  int value;
  int check;
};

TEST(OnceSlotsTest, EmptyUntilCreatedThenStable) {
  OnceSlots<Widget, 4> slots;
  std::mutex mutex;
  EXPECT_EQ(slots.get(0), nullptr);
  EXPECT_EQ(slots.get(3), nullptr);
  const auto [w, created] = slots.get_or_create(2, mutex, [] { return std::make_unique<Widget>(5); });
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(created);
  EXPECT_EQ(w->value, 5);
  EXPECT_EQ(slots.get(2), w);
  // A second creation keeps the first object and does not call the factory.
  bool called = false;
  const auto [again, created_again] = slots.get_or_create(2, mutex, [&] {
    called = true;
    return std::make_unique<Widget>(9);
  });
  EXPECT_EQ(again, w);
  EXPECT_FALSE(created_again);
  EXPECT_FALSE(called);
  EXPECT_EQ(slots.get(1), nullptr);
}

TEST(OnceSlotsTest, OutOfRangeReadsAreEmptyAndCreationIsRefused) {
  OnceSlots<Widget, 2> slots;
  std::mutex mutex;
  EXPECT_EQ(slots.get(2), nullptr);
  EXPECT_EQ(slots.get(1000000), nullptr);
  bool called = false;
  EXPECT_THROW(slots.get_or_create(2, mutex,
                                   [&] {
                                     called = true;
                                     return std::make_unique<Widget>(1);
                                   }),
               InvalidArgumentError);
  EXPECT_FALSE(called);
}

TEST(OnceSlotsTest, ConcurrentFirstUseCreatesExactlyOneObjectPerSlot) {
  constexpr int kThreads = 16;
  constexpr std::size_t kSlots = 4;
  for (int round = 0; round < 20; ++round) {
    OnceSlots<Widget, kSlots> slots;
    std::mutex mutex;
    std::atomic<int> made[kSlots] = {};
    std::vector<Widget*> seen(kThreads * kSlots, nullptr);
    std::vector<int> created(kThreads * kSlots, 0);
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();  // all threads reach the empty slots together
        for (std::size_t k = 0; k < kSlots; ++k) {
          const std::size_t i = (k + static_cast<std::size_t>(t)) % kSlots;  // different orders
          // The lock-free read first, as the allocator lookup does.
          Widget* w = slots.get(i);
          if (w == nullptr) {
            const auto [p, c] = slots.get_or_create(i, mutex, [&] {
              made[i].fetch_add(1);
              return std::make_unique<Widget>(static_cast<int>(i) + 1);
            });
            w = p;
            created[static_cast<std::size_t>(t) * kSlots + i] = c ? 1 : 0;
          }
          // Fully built whichever thread made it.
          EXPECT_EQ(w->value, static_cast<int>(i) + 1);
          EXPECT_EQ(w->check, w->value * 7 + 1);
          seen[static_cast<std::size_t>(t) * kSlots + i] = w;
        }
      });
    }
    for (auto& th : threads) th.join();
    for (std::size_t i = 0; i < kSlots; ++i) {
      EXPECT_EQ(made[i].load(), 1) << "slot " << i;
      int creators = 0;
      for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(seen[static_cast<std::size_t>(t) * kSlots + i], slots.get(i)) << "slot " << i << " thread " << t;
        creators += created[static_cast<std::size_t>(t) * kSlots + i];
      }
      EXPECT_EQ(creators, 1) << "exactly one caller is told it created slot " << i;
    }
  }
}

TEST(OnceSlotsTest, AFailedCreationStoresNothingAndCanBeRetried) {
  OnceSlots<Widget, 2> slots;
  std::mutex mutex;
  EXPECT_THROW(slots.get_or_create(0, mutex, []() -> std::unique_ptr<Widget> { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(slots.get(0), nullptr);
  // The mutex was released by the failure.
  const auto [w, created] = slots.get_or_create(0, mutex, [] { return std::make_unique<Widget>(3); });
  EXPECT_TRUE(created);
  EXPECT_EQ(w->value, 3);
}

TEST(OnceSlotsTest, ForEachVisitsCreatedSlotsInOrder) {
  OnceSlots<Widget, 5> slots;
  std::mutex mutex;
  for (std::size_t i : {3u, 1u}) {
    slots.get_or_create(i, mutex, [i] { return std::make_unique<Widget>(static_cast<int>(i) * 10); });
  }
  std::vector<std::pair<std::size_t, int>> visited;
  slots.for_each([&](std::size_t i, Widget& w) { visited.emplace_back(i, w.value); });
  ASSERT_EQ(visited.size(), 2u);
  EXPECT_EQ(visited[0], std::make_pair(std::size_t{1}, 10));
  EXPECT_EQ(visited[1], std::make_pair(std::size_t{3}, 30));
}

TEST(OnceSlotsTest, OwnsItsObjects) {
  const int before = g_alive.load();
  {
    OnceSlots<Widget, 3> slots;
    std::mutex mutex;
    slots.get_or_create(0, mutex, [] { return std::make_unique<Widget>(1); });
    std::lock_guard<std::mutex> lock(mutex);
    slots.get_or_create_locked(2, [] { return std::make_unique<Widget>(2); });
    EXPECT_EQ(g_alive.load(), before + 2);
  }
  EXPECT_EQ(g_alive.load(), before);
}

}  // namespace
}  // namespace genesis
