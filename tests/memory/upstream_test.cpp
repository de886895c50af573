// CPU tests of the upstream resources: HostResource, SimulatedDevice, and the
// no-GPU behaviour of the CUDA ones. GPU behaviour is in gpu_upstream_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "genesis/memory/simulated_device.h"

namespace genesis::memory {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// --- HostResource ------------------------------------------------------------

TEST(HostResourceTest, Describes) {
  HostResource host;
  EXPECT_EQ(host.kind(), MemoryKind::kHost);
  EXPECT_EQ(host.device(), Device(DeviceType::kCPU));
  EXPECT_FALSE(host.is_cuda());
  EXPECT_EQ(host.name(), "host");
  EXPECT_EQ(host.alignment(), 512u);
  EXPECT_EQ(host.capacity_limit(), 0u);
}

TEST(HostResourceTest, AllocatesAlignedUsableMemory) {
  HostResource host;
  // Small sizes come from the heap, sizes >= 2 MiB from mmap: cover both,
  // and the boundary.
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{512}, std::size_t{4097}, 1 * MiB,
                            HostResource::kMmapThreshold - 1, HostResource::kMmapThreshold, 5 * MiB + 3}) {
    void* p = host.allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(addr(p) % 512, 0u) << bytes;
    std::memset(p, 0xab, bytes);  // the whole range is writable
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xab);
    EXPECT_EQ(host.bytes_in_use(), bytes);
    host.deallocate(p, bytes);
    EXPECT_EQ(host.bytes_in_use(), 0u);
  }
}

TEST(HostResourceTest, ZeroBytesIsAnError) {
  HostResource host;
  EXPECT_THROW(host.allocate(0), InvalidArgumentError);
}

TEST(HostResourceTest, CapacityLimitReturnsNullptr) {
  HostResource host(4 * KiB);
  void* a = host.allocate(3 * KiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(host.allocate(2 * KiB), nullptr);  // 5 KiB > 4 KiB
  void* b = host.allocate(1 * KiB);             // exactly at the limit
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(host.allocate(1), nullptr);
  EXPECT_EQ(host.bytes_in_use(), 4 * KiB);
  EXPECT_EQ(host.allocate(5 * KiB), nullptr);  // larger than the limit on its own
  host.deallocate(a, 3 * KiB);
  void* c = host.allocate(2 * KiB);  // room again after a free
  EXPECT_NE(c, nullptr);
  host.deallocate(b, 1 * KiB);
  host.deallocate(c, 2 * KiB);
  EXPECT_EQ(host.bytes_in_use(), 0u);
}

TEST(HostResourceTest, MemInfoIsSane) {
  HostResource host;
  MemInfo info = host.mem_info();
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);

  HostResource limited(1 * MiB);
  void* p = limited.allocate(256 * KiB);
  ASSERT_NE(p, nullptr);
  MemInfo li = limited.mem_info();
  EXPECT_EQ(li.total_bytes, 1 * MiB);
  EXPECT_EQ(li.free_bytes, 768 * KiB);
  limited.deallocate(p, 256 * KiB);
}

TEST(HostResourceTest, EventsAreCompleteAtOnce) {
  HostResource host;
  EventId e = host.record_event(0);
  EXPECT_TRUE(host.event_done(e));
  host.wait_event(e);
  host.release_event(e);
}

TEST(HostResourceTest, ConcurrentAllocationsNeverExceedTheLimit) {
  constexpr std::size_t kLimit = 64 * KiB;
  HostResource host(kLimit);
  std::atomic<std::size_t> max_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, std::size_t>> held;
      for (int i = 0; i < 2000; ++i) {
        if (held.empty() || rng() % 2 == 0) {
          std::size_t bytes = 1 + rng() % (8 * KiB);
          if (void* p = host.allocate(bytes)) held.emplace_back(p, bytes);
        } else {
          host.deallocate(held.back().first, held.back().second);
          held.pop_back();
        }
        std::size_t used = host.bytes_in_use();
        std::size_t prev = max_seen.load();
        while (used > prev && !max_seen.compare_exchange_weak(prev, used)) {
        }
      }
      for (auto& [p, bytes] : held) host.deallocate(p, bytes);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(max_seen.load(), kLimit);
  EXPECT_EQ(host.bytes_in_use(), 0u);
}

// --- CUDA resources without a GPU ----------------------------------------------

TEST(CudaResourcesWithoutGpuTest, RefuseClearly) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU (see gpu_upstream_test)";
  EXPECT_THROW(CudaDeviceResource(0), InvalidArgumentError);
  try {
    PinnedHostResource pinned;
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("pinned memory needs CUDA"), std::string::npos) << e.message();
  }
  int x = 0;
  EXPECT_FALSE(PinnedHostResource::is_pinned(&x));
  EXPECT_FALSE(PinnedHostResource::is_pinned(nullptr));
  cuda::EventPool pool;
  EXPECT_THROW(pool.record(0, 0), CudaError);
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST(CudaResourcesTest, NonexistentDeviceIsInvalidArgument) {
  EXPECT_THROW(CudaDeviceResource(-1), InvalidArgumentError);
  EXPECT_THROW(CudaDeviceResource(cuda::device_count()), InvalidArgumentError);
}

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
    EXPECT_EQ(addr(p) % 512, 0u) << bytes;
    if (bytes >= 2 * MiB) {
      EXPECT_EQ(addr(p) % (2 * MiB), 0u) << bytes;
    }
    blocks.emplace_back(p, bytes);
  }
  // No two blocks overlap (sizes rounded up to 512).
  auto sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    std::size_t prev_size = (sorted[i - 1].second + 511) / 512 * 512;
    EXPECT_LE(addr(sorted[i - 1].first) + prev_size, addr(sorted[i].first));
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
  EXPECT_EQ(addr(a), SimulatedDevice::kBaseAddress);
  EXPECT_EQ(addr(b), SimulatedDevice::kBaseAddress + SimulatedDevice::kAddressSpan);
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
  EXPECT_EQ(addr(large), sim.base_address() + 2 * MiB);
  EXPECT_EQ(sim.num_free_ranges(), 2u);  // the gap below `large` and the tail
  void* mid = sim.allocate(1 * MiB);     // best fit: the gap, not the tail
  ASSERT_NE(mid, nullptr);
  EXPECT_LT(addr(mid), addr(large));
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
    ASSERT_EQ(addr(blocks.back()), sim.base_address() + static_cast<std::uintptr_t>(i) * 64 * KiB);
  }
  for (int i = 1; i <= 33; ++i) sim.deallocate(blocks[i], 64 * KiB);
  EXPECT_EQ(sim.largest_free_range(), 33 * 64 * KiB);
  EXPECT_EQ(sim.allocate(2 * MiB), nullptr);
  void* unaligned = sim.allocate(2 * MiB - 512);  // below 2 MiB: 512-aligned is enough
  ASSERT_NE(unaligned, nullptr);
  EXPECT_EQ(addr(unaligned), sim.base_address() + 64 * KiB);
  sim.deallocate(unaligned, 2 * MiB - 512);
  sim.deallocate(blocks[0], 64 * KiB);
  for (int i = 34; i < 64; ++i) sim.deallocate(blocks[i], 64 * KiB);
  EXPECT_EQ(sim.num_free_ranges(), 1u);
  void* big = sim.allocate(2 * MiB);
  EXPECT_EQ(addr(big), sim.base_address());
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
        offsets.push_back(p ? addr(p) - sim.base_address() : ~std::uintptr_t{0});
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
      std::uintptr_t a = addr(p);
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

// --- SimulatedDevice: streams and events --------------------------------------

TEST(SimulatedDeviceEventsTest, StreamsAreNumbered) {
  SimulatedDevice sim(1 * MiB);
  EXPECT_EQ(sim.create_stream(), 1u);
  EXPECT_EQ(sim.create_stream(), 2u);
  EXPECT_EQ(sim.submitted_work(0), 0u);
  EXPECT_THROW(sim.submit_work(3), InvalidArgumentError);
  EXPECT_THROW(sim.record_event(3), InvalidArgumentError);
  EXPECT_THROW(sim.complete_work(99), InvalidArgumentError);
}

TEST(SimulatedDeviceEventsTest, EventOnIdleStreamIsDone) {
  SimulatedDevice sim(1 * MiB);
  EventId e = sim.record_event(0);
  EXPECT_NE(e, 0u);
  EXPECT_TRUE(sim.event_done(e));
  sim.release_event(e);
  EXPECT_EQ(sim.outstanding_events(), 0u);
}

TEST(SimulatedDeviceEventsTest, EventWaitsForSubmittedWork) {
  SimulatedDevice sim(1 * MiB);
  StreamId s = sim.create_stream();
  EXPECT_EQ(sim.submit_work(s), 1u);
  EventId e = sim.record_event(s);
  EXPECT_FALSE(sim.event_done(e));
  // Work submitted after the record does not delay the event...
  sim.submit_work(s);
  // ... and work on another stream does not complete it.
  sim.complete_work(0);
  EXPECT_FALSE(sim.event_done(e));
  sim.complete_work(s);
  EXPECT_TRUE(sim.event_done(e));
  EXPECT_EQ(sim.completed_work(s), 2u);
  sim.release_event(e);
}

TEST(SimulatedDeviceEventsTest, WaitCompletesOnlyUpToTheTicket) {
  SimulatedDevice sim(1 * MiB);
  StreamId s = sim.create_stream();
  sim.submit_work(s);
  EventId first = sim.record_event(s);
  sim.submit_work(s);
  EventId second = sim.record_event(s);
  EXPECT_EQ(sim.outstanding_events(), 2u);
  sim.wait_event(first);
  EXPECT_TRUE(sim.event_done(first));
  EXPECT_FALSE(sim.event_done(second));
  EXPECT_EQ(sim.completed_work(s), 1u);
  EXPECT_EQ(sim.submitted_work(s), 2u);
  sim.wait_event(first);  // waiting again changes nothing
  EXPECT_EQ(sim.completed_work(s), 1u);
  sim.complete_all();
  EXPECT_TRUE(sim.event_done(second));
  sim.release_event(first);
  sim.release_event(second);
  EXPECT_EQ(sim.outstanding_events(), 0u);
}

TEST(SimulatedDeviceEventsTest, ReleasedEventsAreForgotten) {
  SimulatedDevice sim(1 * MiB);
  EventId e = sim.record_event(0);
  sim.release_event(e);
  EXPECT_THROW(sim.event_done(e), InvalidArgumentError);
  EXPECT_THROW(sim.wait_event(e), InvalidArgumentError);
  EXPECT_EQ(sim.num_misuses(), 0u);
  sim.release_event(e);  // double release: counted, not thrown
  EXPECT_EQ(sim.num_misuses(), 1u);
  EXPECT_NE(sim.record_event(0), e);  // ids are not reused
}

TEST(SimulatedDeviceEventsTest, CompleteAllCoversEveryStream) {
  SimulatedDevice sim(1 * MiB);
  StreamId s1 = sim.create_stream();
  StreamId s2 = sim.create_stream();
  sim.submit_work(0);
  sim.submit_work(s1);
  sim.submit_work(s2);
  sim.submit_work(s2);
  std::vector<EventId> events{sim.record_event(0), sim.record_event(s1), sim.record_event(s2)};
  for (EventId e : events) EXPECT_FALSE(sim.event_done(e));
  sim.complete_all();
  for (EventId e : events) {
    EXPECT_TRUE(sim.event_done(e));
    sim.release_event(e);
  }
  EXPECT_EQ(sim.completed_work(s2), 2u);
}

}  // namespace
}  // namespace genesis::memory
