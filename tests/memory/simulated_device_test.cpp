// CPU tests of SimulatedDevice's address space: alignment and rounding, best
// fit, coalescing, capacity and fragmentation, counters, misuse, failure
// injection, determinism and concurrent use. Its streams and events are in
// simulated_device_events_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using testing_support::addr_of;
using testing_support::KiB;
using testing_support::MiB;

// --- SimulatedDevice: address space ------------------------------------------

TEST(SimulatedDeviceTest, Describes) {
  SimulatedDevice sim(1 * MiB, 2);
  EXPECT_EQ(sim.kind(), MemoryKind::kDevice);
  EXPECT_EQ(sim.device(), Device(DeviceType::kCPU));
  EXPECT_FALSE(sim.is_cuda());  // exhaustion of a fake GPU is not a real CUDA OOM
  EXPECT_EQ(sim.name(), "sim:2");
  EXPECT_EQ(sim.index(), 2);
  EXPECT_EQ(sim.capacity(), 1 * MiB);
  EXPECT_EQ(sim.alignment(), 512u);
  EXPECT_EQ(sim.base_address(), SimulatedDevice::kBaseAddress + 2 * SimulatedDevice::kAddressSpan);
  MemInfo info = sim.mem_info();
  EXPECT_EQ(info.free_bytes, 1 * MiB);
  EXPECT_EQ(info.total_bytes, 1 * MiB);
}

TEST(SimulatedDeviceTest, RejectsBadConstruction) {
  EXPECT_THROW(SimulatedDevice(0), InvalidArgumentError);
  EXPECT_THROW(SimulatedDevice(SimulatedDevice::kAddressSpan + 1), InvalidArgumentError);
  EXPECT_THROW(SimulatedDevice(1 * MiB, -1), InvalidArgumentError);
  EXPECT_THROW(SimulatedDevice(1 * MiB, SimulatedDevice::kMaxIndex + 1), InvalidArgumentError);
  EXPECT_NO_THROW(SimulatedDevice(SimulatedDevice::kAddressSpan, SimulatedDevice::kMaxIndex));
}

TEST(SimulatedDeviceTest, ZeroBytesIsAnError) {
  SimulatedDevice sim(1 * MiB);
  EXPECT_THROW(sim.allocate(0), InvalidArgumentError);
}

TEST(SimulatedDeviceTest, AlignsTo512AndLargeTo2MiB) {
  SimulatedDevice sim(64 * MiB);
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{513}, 2 * MiB - 1, 2 * MiB, 3 * MiB + 7,
                            std::size_t{512}, 5 * MiB}) {
    void* p = sim.allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(sim.owns(p));
    EXPECT_EQ(addr_of(p) % 512, 0u) << bytes;
    if (bytes >= 2 * MiB) {
      EXPECT_EQ(addr_of(p) % (2 * MiB), 0u) << bytes;
    }
    blocks.emplace_back(p, bytes);
  }
  // No two blocks overlap (sizes rounded up to 512).
  auto sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    std::size_t prev_size = (sorted[i - 1].second + 511) / 512 * 512;
    EXPECT_LE(addr_of(sorted[i - 1].first) + prev_size, addr_of(sorted[i].first));
  }
  for (auto& [p, bytes] : blocks) sim.deallocate(p, bytes);
  EXPECT_EQ(sim.bytes_in_use(), 0u);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.num_misuses(), 0u);
}

TEST(SimulatedDeviceTest, FirstAllocationIsAtTheBase) {
  SimulatedDevice sim0(1 * MiB, 0);
  SimulatedDevice sim1(1 * MiB, 1);
  void* a = sim0.allocate(512);
  void* b = sim1.allocate(512);
  EXPECT_EQ(addr_of(a), SimulatedDevice::kBaseAddress);
  EXPECT_EQ(addr_of(b), SimulatedDevice::kBaseAddress + SimulatedDevice::kAddressSpan);
  EXPECT_FALSE(sim0.owns(b));
  EXPECT_FALSE(sim1.owns(a));
  sim0.deallocate(a, 512);
  sim1.deallocate(b, 512);
}

TEST(SimulatedDeviceTest, CountsRoundedBytes) {
  SimulatedDevice sim(1 * MiB);
  void* p = sim.allocate(1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(sim.bytes_in_use(), 512u);
  EXPECT_EQ(sim.mem_info().free_bytes, 1 * MiB - 512);
  sim.deallocate(p, 1);
  EXPECT_EQ(sim.bytes_in_use(), 0u);
}

TEST(SimulatedDeviceTest, CapacityExhaustionReturnsNullptr) {
  SimulatedDevice sim(4 * KiB);
  EXPECT_EQ(sim.allocate(4 * KiB + 1), nullptr);
  EXPECT_EQ(sim.allocate(std::size_t{1} << 62), nullptr);  // far beyond: no overflow
  void* all = sim.allocate(4 * KiB);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(sim.allocate(1), nullptr);
  EXPECT_EQ(sim.mem_info().free_bytes, 0u);
  EXPECT_EQ(sim.num_failed_allocs(), 3u);
  sim.deallocate(all, 4 * KiB);
  void* again = sim.allocate(1);
  EXPECT_NE(again, nullptr);
  sim.deallocate(again, 1);
}

TEST(SimulatedDeviceTest, FragmentationCanRefuseWhenFreeBytesSuffice) {
  SimulatedDevice sim(8 * 512);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) {
    blocks.push_back(sim.allocate(512));
    ASSERT_NE(blocks.back(), nullptr);
  }
  // Free every other block: 2 KiB free in four separate 512-byte holes.
  for (int i = 0; i < 8; i += 2) sim.deallocate(blocks[i], 512);
  EXPECT_EQ(sim.mem_info().free_bytes, 2 * KiB);
  EXPECT_EQ(sim.num_free_ranges(), 4u);
  EXPECT_EQ(sim.largest_free_range(), 512u);
  EXPECT_EQ(sim.allocate(1 * KiB), nullptr);
  EXPECT_EQ(sim.num_failed_allocs(), 1u);
  // Freeing a neighbour merges three holes into one 1.5 KiB range.
  sim.deallocate(blocks[1], 512);
  EXPECT_EQ(sim.num_free_ranges(), 3u);
  EXPECT_EQ(sim.largest_free_range(), 1536u);
  void* p = sim.allocate(1 * KiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, blocks[0]);
  sim.deallocate(p, 1 * KiB);
  for (int i = 3; i < 8; i += 2) sim.deallocate(blocks[i], 512);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.largest_free_range(), 4 * KiB);
}

TEST(SimulatedDeviceTest, CoalescesInAnyFreeOrder) {
  SimulatedDevice sim(1 * MiB);
  void* a = sim.allocate(512);
  void* b = sim.allocate(1024);
  void* c = sim.allocate(2048);
  void* d = sim.allocate(512);
  sim.deallocate(a, 512);
  sim.deallocate(c, 2048);
  EXPECT_EQ(sim.num_free_ranges(), 3u);  // a, c, and the tail after d
  sim.deallocate(b, 1024);                // joins a and c
  EXPECT_EQ(sim.num_free_ranges(), 2u);
  EXPECT_EQ(sim.largest_free_range(), 1 * MiB - 4096);
  sim.deallocate(d, 512);  // joins everything
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.largest_free_range(), 1 * MiB);
}

TEST(SimulatedDeviceTest, BestFitPicksTheSmallestRangeThatFits) {
  SimulatedDevice sim(1 * MiB);
  void* a = sim.allocate(1536);  // hole of 1.5 KiB once freed
  void* sep1 = sim.allocate(512);
  void* b = sim.allocate(1024);  // hole of exactly 1 KiB once freed
  void* sep2 = sim.allocate(512);
  sim.deallocate(a, 1536);
  sim.deallocate(b, 1024);
  void* p = sim.allocate(1000);
  EXPECT_EQ(p, b);
  void* q = sim.allocate(1024);
  EXPECT_EQ(q, a);  // next smallest
  for (auto [ptr, n] : {std::pair{p, std::size_t{1000}}, std::pair{q, std::size_t{1024}},
                        std::pair{sep1, std::size_t{512}}, std::pair{sep2, std::size_t{512}}})
    sim.deallocate(ptr, n);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.num_misuses(), 0u);
}

TEST(SimulatedDeviceTest, LargeAlignmentLeavesAUsableGap) {
  SimulatedDevice sim(8 * MiB);
  void* small = sim.allocate(512);
  void* large = sim.allocate(2 * MiB);
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(addr_of(large), sim.base_address() + 2 * MiB);
  EXPECT_EQ(sim.num_free_ranges(), 2u);  // the gap below `large` and the tail
  void* mid = sim.allocate(1 * MiB);     // best fit: the gap, not the tail
  ASSERT_NE(mid, nullptr);
  EXPECT_LT(addr_of(mid), addr_of(large));
  sim.deallocate(small, 512);
  sim.deallocate(large, 2 * MiB);
  sim.deallocate(mid, 1 * MiB);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
}

TEST(SimulatedDeviceTest, LargeRequestNeedsAnAlignedRange) {
  // Fill a 4 MiB device with 64 KiB blocks, then free blocks 1..33: one
  // contiguous free range [64 KiB, 2112 KiB) of 2112 KiB. A 2 MiB request
  // must start on a 2 MiB boundary, and [2048 KiB, 4096 KiB) is mostly in
  // use, so it fails although the range is big enough unaligned.
  SimulatedDevice sim(4 * MiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(sim.allocate(64 * KiB));
    ASSERT_EQ(addr_of(blocks.back()), sim.base_address() + static_cast<std::uintptr_t>(i) * 64 * KiB);
  }
  for (int i = 1; i <= 33; ++i) sim.deallocate(blocks[i], 64 * KiB);
  EXPECT_EQ(sim.largest_free_range(), 33 * 64 * KiB);
  EXPECT_EQ(sim.allocate(2 * MiB), nullptr);
  void* unaligned = sim.allocate(2 * MiB - 512);  // below 2 MiB: 512-aligned is enough
  ASSERT_NE(unaligned, nullptr);
  EXPECT_EQ(addr_of(unaligned), sim.base_address() + 64 * KiB);
  sim.deallocate(unaligned, 2 * MiB - 512);
  sim.deallocate(blocks[0], 64 * KiB);
  for (int i = 34; i < 64; ++i) sim.deallocate(blocks[i], 64 * KiB);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  void* big = sim.allocate(2 * MiB);
  EXPECT_EQ(addr_of(big), sim.base_address());
  sim.deallocate(big, 2 * MiB);
}

TEST(SimulatedDeviceTest, CountersAndPeak) {
  SimulatedDevice sim(1 * MiB);
  void* a = sim.allocate(1024);
  void* b = sim.allocate(2048);
  EXPECT_EQ(sim.num_allocs(), 2u);
  EXPECT_EQ(sim.num_live_allocations(), 2u);
  EXPECT_EQ(sim.peak_bytes_in_use(), 3072u);
  sim.deallocate(b, 2048);
  EXPECT_EQ(sim.num_frees(), 1u);
  EXPECT_EQ(sim.bytes_in_use(), 1024u);
  EXPECT_EQ(sim.peak_bytes_in_use(), 3072u);
  sim.reset_peak();
  EXPECT_EQ(sim.peak_bytes_in_use(), 1024u);
  sim.deallocate(a, 1024);
  EXPECT_EQ(sim.num_frees(), 2u);
  EXPECT_EQ(sim.num_live_allocations(), 0u);
  EXPECT_EQ(sim.num_failed_allocs(), 0u);
}

TEST(SimulatedDeviceTest, MisusesAreCountedNotFatal) {
  SimulatedDevice sim(1 * MiB);
  void* a = sim.allocate(1000);
  sim.deallocate(a, 999);  // wrong size: freed anyway, counted
  EXPECT_EQ(sim.num_misuses(), 1u);
  EXPECT_EQ(sim.bytes_in_use(), 0u);
  sim.deallocate(a, 1000);  // double free
  EXPECT_EQ(sim.num_misuses(), 2u);
  int x = 0;
  sim.deallocate(&x, sizeof x);  // foreign pointer
  EXPECT_EQ(sim.num_misuses(), 3u);
  EXPECT_EQ(sim.num_frees(), 1u);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
}

TEST(SimulatedDeviceTest, FailureInjection) {
  SimulatedDevice sim(1 * MiB);
  sim.fail_next_allocations(2);
  EXPECT_EQ(sim.allocate(512), nullptr);
  EXPECT_EQ(sim.allocate(512), nullptr);
  void* p = sim.allocate(512);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(sim.num_failed_allocs(), 2u);
  EXPECT_EQ(sim.num_allocs(), 1u);
  sim.fail_next_allocations(5);
  sim.fail_next_allocations(0);  // replaces, does not add
  void* q = sim.allocate(512);
  EXPECT_NE(q, nullptr);
  sim.deallocate(p, 512);
  sim.deallocate(q, 512);
}

TEST(SimulatedDeviceTest, IsDeterministic) {
  auto run = [](SimulatedDevice& sim) {
    std::mt19937 rng(42);
    std::vector<std::pair<void*, std::size_t>> held;
    std::vector<std::uintptr_t> offsets;
    for (int i = 0; i < 500; ++i) {
      if (held.empty() || rng() % 3 != 0) {
        std::size_t bytes = 1 + rng() % (3 * MiB);
        void* p = sim.allocate(bytes);
        offsets.push_back(p ? addr_of(p) - sim.base_address() : ~std::uintptr_t{0});
        if (p) held.emplace_back(p, bytes);
      } else {
        std::size_t k = rng() % held.size();
        sim.deallocate(held[k].first, held[k].second);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      }
    }
    for (auto& [p, bytes] : held) sim.deallocate(p, bytes);
    return offsets;
  };
  SimulatedDevice a(64 * MiB, 0);
  SimulatedDevice b(64 * MiB, 3);
  EXPECT_EQ(run(a), run(b));
}

// A random workload checked against a model: blocks never overlap, stay
// aligned and inside the device, accounting matches, and everything
// coalesces back into one range at the end.
TEST(SimulatedDeviceTest, RandomWorkloadKeepsInvariants) {
  constexpr std::size_t kCapacity = 32 * MiB;
  SimulatedDevice sim(kCapacity);
  std::mt19937 rng(7);
  std::map<std::uintptr_t, std::size_t> live;  // address -> rounded size
  std::size_t in_use = 0;
  for (int i = 0; i < 20000; ++i) {
    if (live.empty() || rng() % 2 == 0) {
      std::size_t bytes = rng() % 4 == 0 ? 1 + rng() % (4 * MiB) : 1 + rng() % (64 * KiB);
      void* p = sim.allocate(bytes);
      if (p == nullptr) continue;
      std::uintptr_t a = addr_of(p);
      std::size_t size = (bytes + 511) / 512 * 512;
      ASSERT_EQ(a % (bytes >= 2 * MiB ? 2 * MiB : 512), 0u);
      ASSERT_GE(a, sim.base_address());
      ASSERT_LE(a + size, sim.base_address() + kCapacity);
      auto next = live.lower_bound(a);
      if (next != live.end()) {
        ASSERT_LE(a + size, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + (prev->second + 511) / 512 * 512, a);
      }
      live.emplace(a, bytes);
      in_use += size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % live.size()));
      sim.deallocate(reinterpret_cast<void*>(it->first), it->second);
      in_use -= (it->second + 511) / 512 * 512;
      live.erase(it);
    }
    ASSERT_EQ(sim.bytes_in_use(), in_use);
  }
  for (auto& [a, bytes] : live) sim.deallocate(reinterpret_cast<void*>(a), bytes);
  EXPECT_EQ(sim.bytes_in_use(), 0u);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.largest_free_range(), kCapacity);
  EXPECT_EQ(sim.num_misuses(), 0u);
  EXPECT_EQ(sim.num_allocs(), sim.num_frees());
}

TEST(SimulatedDeviceTest, ConcurrentUse) {
  SimulatedDevice sim(256 * MiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&sim, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, std::size_t>> held;
      StreamId s = sim.create_stream();
      for (int i = 0; i < 3000; ++i) {
        if (held.empty() || rng() % 2 == 0) {
          std::size_t bytes = 1 + rng() % (256 * KiB);
          if (void* p = sim.allocate(bytes)) held.emplace_back(p, bytes);
        } else {
          sim.deallocate(held.back().first, held.back().second);
          held.pop_back();
        }
        sim.submit_work(s);
        EventId e = sim.record_event(s);
        if (i % 3 == 0) sim.complete_work(s);
        (void)sim.event_done(e);
        sim.release_event(e);
      }
      for (auto& [p, bytes] : held) sim.deallocate(p, bytes);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(sim.bytes_in_use(), 0u);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  EXPECT_EQ(sim.num_misuses(), 0u);
  EXPECT_EQ(sim.outstanding_events(), 0u);
}

}  // namespace
}  // namespace genesis::memory
