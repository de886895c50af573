// CPU tests of the upstream resources: HostResource and the no-GPU behaviour
// of the CUDA ones. GPU behaviour is in gpu_upstream_test.cpp, the simulated
// device in simulated_device_test.cpp and simulated_device_events_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using testing_support::addr_of;
using testing_support::KiB;
using testing_support::MiB;

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
    EXPECT_EQ(addr_of(p) % 512, 0u) << bytes;
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

}  // namespace
}  // namespace genesis::memory
