// PointerMap (detail/pointer_map.h): erase shifts the probe cluster back
// instead of leaving tombstones (Note [Pointer map deletion]), so every live
// key must stay reachable from its home slot through any mix of inserts and
// erases, across the table's wrap-around and its growth.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "genesis/memory/detail/pointer_map.h"

namespace genesis::memory::detail {
namespace {

class PointerMapTest : public ::testing::Test {
 protected:
  // Block records for keys 512 * (1 .. kKeys): find() checks block->addr.
  // Random 512-aligned addresses: consecutive ones would spread perfectly
  // under Fibonacci hashing and never form a cluster.
  static constexpr std::size_t kKeys = 20000;
  void SetUp() override {
    blocks_ = std::make_unique<Block[]>(kKeys + 1);
    std::mt19937_64 rng(42);
    std::unordered_map<std::uintptr_t, bool> seen;
    addrs_.resize(kKeys + 1);
    for (std::size_t i = 0; i <= kKeys; ++i) {
      std::uintptr_t a;
      do a = (rng() & ((std::uintptr_t{1} << 38) - 1)) << 9; while (a == 0 || !seen.emplace(a, true).second);
      addrs_[i] = a;
      blocks_[i].addr = a;
    }
  }
  std::uintptr_t addr_of(std::size_t i) const { return addrs_[i]; }
  Block* block(std::size_t i) { return &blocks_[i]; }

  // Every key of `live` is found with its block; a sample of the others is not.
  void check(const PointerMap& map, const std::unordered_map<std::size_t, bool>& live) {
    std::size_t n = 0;
    for (std::size_t i = 1; i <= kKeys; ++i) {
      const bool is_live = live.count(i) != 0;
      Block* got = map.find(addr_of(i));
      if (is_live) {
        ASSERT_EQ(got, block(i)) << "live key " << i << " not found";
        ++n;
      } else {
        ASSERT_EQ(got, nullptr) << "erased key " << i << " still found";
      }
    }
    EXPECT_EQ(map.size(), n);
  }

  std::unique_ptr<Block[]> blocks_;
  std::vector<std::uintptr_t> addrs_;
};

TEST_F(PointerMapTest, RandomInsertEraseKeepsEveryLiveKeyReachable) {
  PointerMap map;
  std::unordered_map<std::size_t, bool> live;
  std::mt19937_64 rng(12345);
  // ~5,000 live keys in a 16K-slot table (load ~0.3): long clusters, and
  // clusters that wrap around the end of the table.
  std::uniform_int_distribution<std::size_t> pick(1, 10000);
  for (int op = 0; op < 200000; ++op) {
    const std::size_t i = pick(rng);
    if (live.count(i) != 0) {
      map.erase(addr_of(i));
      live.erase(i);
    } else {
      map.insert(addr_of(i), block(i));
      live.emplace(i, true);
    }
    if (op % 20000 == 19999) check(map, live);
  }
  check(map, live);
}

TEST_F(PointerMapTest, EraseOfMissingKeyChangesNothing) {
  PointerMap map;
  std::unordered_map<std::size_t, bool> live;
  for (std::size_t i = 1; i <= 3000; ++i) {
    map.insert(addr_of(i), block(i));
    live.emplace(i, true);
  }
  for (std::size_t i = 3001; i <= 6000; ++i) map.erase(addr_of(i));
  check(map, live);
}

TEST_F(PointerMapTest, GrowsAndKeepsKeysThroughChurn) {
  PointerMap map;
  std::unordered_map<std::size_t, bool> live;
  // More live keys than half the initial 16K slots: the table doubles.
  for (std::size_t i = 1; i <= kKeys; ++i) {
    map.insert(addr_of(i), block(i));
    live.emplace(i, true);
  }
  EXPECT_TRUE(map.has_retired());
  map.free_retired();  // no reader can be inside the old table in this test
  for (std::size_t i = 1; i <= kKeys; i += 2) {
    map.erase(addr_of(i));
    live.erase(i);
  }
  check(map, live);
  // Re-inserting a live key only updates its block.
  map.insert(addr_of(2), block(4));
  EXPECT_EQ(map.find(addr_of(2)), nullptr);  // block 4 describes another address
  map.insert(addr_of(2), block(2));
  check(map, live);
}

}  // namespace
}  // namespace genesis::memory::detail
