// GPU tests of the storage layer: copies between host (pinned and pageable)
// and device, on one device and between devices, queued copies keeping their
// storages alive, BatchStorage, inspect_storage and StorageTracker on CUDA.
// Every test skips with a message when the machine has no usable GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/batch_storage.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/inspect.h"
#include "genesis/storage/storage.h"
#include "genesis/storage/storage_view.h"

#if GENESIS_WITH_CUDA
#include "genesis/cuda/check.h"
#endif

namespace genesis {
namespace {

const Device kCpu(DeviceType::kCPU);
const Device kGpu(DeviceType::kCUDA, 0);

class GpuStorage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (cuda::compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): GPU storage tests skipped";
    }
  }
};

#if GENESIS_WITH_CUDA

std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<unsigned char>(rng());
  return v;
}

// Restores the staging options a test changed.
struct StagingScope {
  StagingOptions saved = staging_options();
  explicit StagingScope(const StagingOptions& o) { set_staging_options(o); }
  ~StagingScope() { set_staging_options(saved); }
};

constexpr std::size_t kSizes[] = {1, 511, 4097, (std::size_t{8} << 20) + 3, (std::size_t{40} << 20) + 5};

TEST_F(GpuStorage, PageableRoundTripEverySize) {
  for (std::size_t n : kSizes) {
    const auto data = random_bytes(n, static_cast<unsigned>(n));
    Storage host = create_storage(data, kCpu);
    Storage dev = host.to(kGpu);
    EXPECT_EQ(dev.device(), kGpu);
    EXPECT_TRUE(dev.is_pooled());
    Storage back = dev.to(kCpu);
    ASSERT_EQ(std::memcmp(back.data_ptr(), data.data(), n), 0) << n << " bytes";
  }
}

TEST_F(GpuStorage, StagedCopiesWithSmallChunksAndOneBuffer) {
  // Many chunks through few buffers: exercises buffer reuse behind events.
  for (int buffers : {1, 2, 3}) {
    StagingScope scope({64 << 10, buffers, 2});
    const std::size_t n = (std::size_t{3} << 20) + 123;
    const auto data = random_bytes(n, 11u + static_cast<unsigned>(buffers));
    std::vector<unsigned char> out(n, 0);
    Storage dev = Storage::empty({static_cast<std::int64_t>(n)}, DType::kUInt8, kGpu);
    copy_bytes(dev.data_ptr(), kGpu, data.data(), kCpu, n);
    copy_bytes(out.data(), kCpu, dev.data_ptr(), kGpu, n);
    ASSERT_EQ(out, data) << buffers << " buffers";
  }
}

TEST_F(GpuStorage, PinnedRoundTripAndNonBlocking) {
  const std::size_t n = (std::size_t{16} << 20) + 77;
  const auto data = random_bytes(n, 5);
  Storage pinned = Storage::empty({static_cast<std::int64_t>(n)}, DType::kUInt8, kCpu, kCurrentStream, true);
  EXPECT_TRUE(pinned.is_pinned());
  std::memcpy(pinned.data_ptr(), data.data(), n);
  Storage dev = Storage::empty({static_cast<std::int64_t>(n)}, DType::kUInt8, kGpu);
  dev.copy_(pinned, /*non_blocking=*/true);
  Storage pinned_out = Storage::empty({static_cast<std::int64_t>(n)}, DType::kUInt8, kCpu, kCurrentStream, true);
  pinned_out.copy_(dev, /*non_blocking=*/true);
  dev.synchronize();
  ASSERT_EQ(std::memcmp(pinned_out.data_ptr(), data.data(), n), 0);
}

TEST_F(GpuStorage, DeviceToDeviceCloneZerosAndAligned) {
  const auto data = random_bytes(1 << 20, 9);
  Storage a = create_storage(data, kGpu);
  Storage b = a.clone();
  EXPECT_NE(a.data_ptr(), b.data_ptr());
  Storage z = Storage::zeros({1000}, DType::kFloat32, kGpu);
  b.copy_(a);
  EXPECT_EQ(std::memcmp(b.to(kCpu).data_ptr(), data.data(), data.size()), 0);
  Storage zh = z.to(kCpu);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(zh.data<float>()[i], 0.0f);
  for (std::size_t al : {256u, 4096u, 1u << 16}) {
    Storage s = aligned_storage({100}, DType::kFloat64, kGpu, al);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data_ptr()) % al, 0u);
    s.copy_(create_storage(std::vector<double>(100, 2.5), kCpu));
    EXPECT_EQ(s.to(kCpu).data<double>()[99], 2.5);
  }
}

TEST_F(GpuStorage, CrossDeviceCopyConvertsAtTheSource) {
  Storage h = create_storage(std::vector<float>{1.0f, 0.5f, -3.0f, 70000.0f}, kCpu);
  Storage d = Storage::empty({4}, DType::kFloat16, kGpu);
  d.copy_(h);
  Storage back = Storage::empty({4}, DType::kFloat32, kCpu);
  back.copy_(d);
  EXPECT_EQ(back.data<float>()[0], 1.0f);
  EXPECT_EQ(back.data<float>()[1], 0.5f);
  EXPECT_EQ(back.data<float>()[2], -3.0f);
  EXPECT_TRUE(std::isinf(back.data<float>()[3]));
}

// A host function that holds the stream until the test opens the gate, so
// that "the copy has not run yet" is a certainty, not a race.
struct Gate {
  std::atomic<bool> open{false};
  static void CUDART_CB wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    while (!g->open.load(std::memory_order_acquire)) std::this_thread::yield();
  }
};

TEST_F(GpuStorage, QueuedCopyKeepsExternalMemoryAlive) {
  const std::size_t n = 1 << 20;
  void* raw = memory::allocate_pinned(n);
  std::memset(raw, 0x5A, n);
  std::atomic<int> freed{0};
  Storage host = Storage::from_blob(raw, {static_cast<std::int64_t>(n)}, DType::kUInt8, kCpu, [&](void* p) {
    memory::free_pinned(p);
    freed.fetch_add(1);
  });
  Storage dev = Storage::empty({static_cast<std::int64_t>(n)}, DType::kUInt8, kGpu);
  Gate gate;
  GENESIS_CUDA_CHECK(cudaLaunchHostFunc(nullptr, &Gate::wait, &gate));  // legacy stream = the current stream
  dev.copy_(host, /*non_blocking=*/true);
  host = Storage();  // our last handle: the queued copy still needs the memory
  EXPECT_EQ(freed.load(), 0);
  EXPECT_GE(collect_completed_copies(), 1u);
  EXPECT_EQ(freed.load(), 0);
  gate.open.store(true, std::memory_order_release);
  dev.synchronize();
  collect_completed_copies();
  EXPECT_EQ(freed.load(), 1);
  Storage back = dev.to(kCpu);
  for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(back.data<unsigned char>()[i], 0x5A);
}

TEST_F(GpuStorage, BatchCopyMixedDirections) {
  std::vector<Storage> src;
  std::vector<Storage> dst;
  std::vector<std::vector<unsigned char>> expect;
  for (int i = 0; i < 8; ++i) {
    const std::size_t n = (std::size_t{1} << 20) * static_cast<std::size_t>(i + 1) + static_cast<std::size_t>(i);
    expect.push_back(random_bytes(n, 100u + static_cast<unsigned>(i)));
    const auto len = static_cast<std::int64_t>(n);
    switch (i % 4) {
      case 0:  // pageable -> gpu
        src.push_back(create_storage(expect.back(), kCpu));
        dst.push_back(Storage::empty({len}, DType::kUInt8, kGpu));
        break;
      case 1: {  // pinned -> gpu
        Storage p = Storage::empty({len}, DType::kUInt8, kCpu, kCurrentStream, true);
        std::memcpy(p.data_ptr(), expect.back().data(), n);
        src.push_back(p);
        dst.push_back(Storage::empty({len}, DType::kUInt8, kGpu));
        break;
      }
      case 2:  // gpu -> pageable
        src.push_back(create_storage(expect.back(), kGpu));
        dst.push_back(Storage::empty({len}, DType::kUInt8, kCpu));
        break;
      default:  // gpu -> gpu
        src.push_back(create_storage(expect.back(), kGpu));
        dst.push_back(Storage::empty({len}, DType::kUInt8, kGpu));
        break;
    }
  }
  BatchStorage batch(src, 3);
  batch.batch_copy(dst);
  for (int i = 0; i < 8; ++i) {
    Storage h = dst[static_cast<std::size_t>(i)].to(kCpu);
    ASSERT_EQ(std::memcmp(h.data_ptr(), expect[static_cast<std::size_t>(i)].data(), h.nbytes()), 0) << "pair " << i;
  }
  std::vector<Storage> on_gpu = batch.to(kGpu);
  ASSERT_EQ(on_gpu.size(), 8u);
  EXPECT_EQ(std::memcmp(on_gpu[3].to(kCpu).data_ptr(), expect[3].data(), expect[3].size()), 0);
}

TEST_F(GpuStorage, InspectAndTrackCudaStorages) {
  StorageTracker tracker;
  Storage s;
  {
    memory::ScopedAllocationContext where("train.py:42");
    s = Storage::empty({1 << 20}, DType::kFloat32, kGpu);
  }
  const StorageInfo info = inspect_storage(s);
  EXPECT_EQ(info.device, kGpu);
  EXPECT_TRUE(info.pooled);
  EXPECT_EQ(info.pool, memory::cuda_allocator(0).upstream().name());
  EXPECT_EQ(info.block_size, memory::cuda_allocator(0).allocation_size(s.data_ptr()));
  EXPECT_EQ(info.location, "train.py:42");
  EXPECT_GE(info.pool_reserved, info.pool_allocated);
  tracker.register_storage(s, "activations");
  EXPECT_EQ(tracker.total_allocated(), info.block_size);
  auto leaks = tracker.check_leaks();
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].location, "train.py:42");
  EXPECT_EQ(leaks[0].device, kGpu);
  s = Storage();
  EXPECT_TRUE(tracker.check_leaks().empty());
}

TEST_F(GpuStorage, PeerCopyBetweenTwoGpus) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs (found " << cuda::device_count() << ")";
  const Device g1(DeviceType::kCUDA, 1);
  const auto data = random_bytes((std::size_t{24} << 20) + 9, 77);
  Storage a = create_storage(data, kGpu);
  Storage b = a.to(g1);
  EXPECT_EQ(b.device(), g1);
  Storage c = b.to(kGpu);
  EXPECT_EQ(std::memcmp(c.to(kCpu).data_ptr(), data.data(), data.size()), 0);
}

TEST_F(GpuStorage, ViewsOfCudaStorage) {
  Storage base = create_storage(std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}, kGpu);
  StorageView v(base, 2, {2, 2}, {2, 1});
  EXPECT_EQ(v.data_ptr(), static_cast<char*>(base.data_ptr()) + 8);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_FALSE(inspect_storage(StorageView(base, 0, {3}, {2})).contiguous);
}

#endif  // GENESIS_WITH_CUDA

TEST_F(GpuStorage, CudaStorageExistsOnlyWithAGpu) {
  // Reached only with a GPU (SetUp skips otherwise): a device index past the
  // last GPU is a clear error, not a crash.
  const Device missing(DeviceType::kCUDA, cuda::device_count());
  EXPECT_THROW(Storage::empty({4}, DType::kFloat32, missing), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis
