// The process-wide allocators are found without a lock (Note [Lock-free
// lookup of process-wide objects] in core/once_slots.h): concurrent first use
// makes one allocator, and every thread gets that one. ctest runs each test in
// its own process, so there the host allocator's first use is the race below.
#include <gtest/gtest.h>

#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/storage.h"

namespace genesis {
namespace {

TEST(AllocatorLookupTest, ConcurrentFirstUseGivesEveryThreadTheSameHostAllocator) {
  constexpr int kThreads = 12;
  std::vector<memory::CachingAllocator*> seen(kThreads, nullptr);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      // Half the threads come through allocator_for, half straight in.
      memory::CachingAllocator& a = t % 2 == 0 ? memory::allocator_for(Device()) : memory::host_allocator();
      // Usable at once: allocate and free through it.
      void* p = a.allocate(256);
      EXPECT_NE(p, nullptr);
      a.deallocate(p);
      seen[static_cast<std::size_t>(t)] = &a;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(seen[static_cast<std::size_t>(t)], &memory::host_allocator()) << t;
  // One host allocator is listed, whatever the race.
  int hosts = 0;
  for (const auto& [name, a] : memory::existing_allocators()) hosts += name == "host" ? 1 : 0;
  EXPECT_EQ(hosts, 1);
}

TEST(AllocatorLookupTest, ConcurrentStorageCreationSharesOneAllocator) {
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < 200; ++i) {
        Storage s = Storage::empty({16}, DType::kFloat32, Device());
        ASSERT_TRUE(s.defined());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(&memory::allocator_for(Device()), &memory::host_allocator());
}

TEST(AllocatorLookupTest, MissingCudaDevicesAreRefusedFromEveryThread) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU; the refusal of a missing one is "
                                                "covered with an index beyond the count below";
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::vector<int> refused(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        (void)memory::allocator_for(Device(DeviceType::kCUDA, 0));
      } catch (const InvalidArgumentError& e) {
        refused[static_cast<std::size_t>(t)] = e.message().find("cuda:0") != std::string::npos ? 1 : 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(refused[static_cast<std::size_t>(t)], 1) << t;
  for (const auto& [name, a] : memory::existing_allocators()) EXPECT_NE(name, "0");
}

TEST(AllocatorLookupTest, IndicesBeyondTheDeviceCountAreRefused) {
  const int count = cuda::device_count();
  EXPECT_THROW((void)memory::cuda_allocator(count), InvalidArgumentError);
  EXPECT_THROW((void)memory::cuda_allocator(-1), InvalidArgumentError);
  EXPECT_THROW((void)memory::cuda_allocator(1000), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis
