// GPU tests of the CUDA upstream resources and the runtime layer under them.
// Every test skips with a message when the machine has no usable GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using testing_support::KiB;
using testing_support::MiB;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (cuda::compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): GPU upstream tests skipped";
    }
  }
};

#if GENESIS_WITH_CUDA

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// A stream held busy by a host callback until open() is called: lets a test
// keep work "in flight" deterministically, without a kernel. The destructor
// opens the gate and drains the stream, so a failing test cannot leave the
// callback spinning on a dead object.
class GatedStream {
 public:
  GatedStream() {
    GENESIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    GENESIS_CUDA_CHECK(cudaLaunchHostFunc(stream_, &GatedStream::wait, this));
  }
  ~GatedStream() {
    open();
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  void open() { open_.store(true); }
  StreamId id() const { return reinterpret_cast<StreamId>(stream_); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* gate = static_cast<GatedStream*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> open_{false};
};

struct StreamHolder {
  cudaStream_t stream = nullptr;
  StreamHolder() { GENESIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~StreamHolder() { (void)cudaStreamDestroy(stream); }
  StreamId id() const { return reinterpret_cast<StreamId>(stream); }
};

// --- runtime layer -------------------------------------------------------------

using CudaRuntimeGpuTest = GpuTest;

TEST_F(CudaRuntimeGpuTest, DeviceQueries) {
  EXPECT_TRUE(cuda::compiled_with_cuda());
  EXPECT_TRUE(cuda::is_available());
  const int d = cuda::current_device();
  EXPECT_GE(d, 0);
  EXPECT_LT(d, cuda::device_count());
  EXPECT_EQ(cuda::current_device_or_zero(), d);
  cuda::DeviceMemInfo info = cuda::mem_get_info(0);
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);
  EXPECT_NO_THROW(cuda::synchronize_device(0));
  EXPECT_EQ(cuda::current_device(), d);  // restored by the helpers' guards
}

TEST_F(CudaRuntimeGpuTest, InvalidDeviceThrowsCudaErrorAndLeavesNoError) {
  try {
    cuda::set_device(cuda::device_count() + 7);
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidDevice));
    EXPECT_NE(e.message().find("cudaErrorInvalidDevice"), std::string::npos) << e.message();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_THROW(cuda::DeviceGuard guard(-1), CudaError);
}

TEST_F(CudaRuntimeGpuTest, CheckMacroNamesErrorAndExpression) {
  try {
    GENESIS_CUDA_CHECK(cudaSetDevice(9999));
    FAIL() << "expected CudaError";
  } catch (const CudaError& e) {
    EXPECT_NE(e.message().find("cudaSetDevice(9999)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("cudaErrorInvalidDevice"), std::string::npos) << e.message();
    EXPECT_NE(std::string(e.what()).find("gpu_upstream_test.cpp"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_NO_THROW(GENESIS_CUDA_CHECK(cudaDeviceSynchronize()));
}

TEST_F(CudaRuntimeGpuTest, DeviceGuardRestores) {
  const int before = cuda::current_device();
  {
    cuda::DeviceGuard same(before);
    EXPECT_FALSE(same.switched());
    EXPECT_EQ(same.previous_device(), before);
  }
  EXPECT_EQ(cuda::current_device(), before);
  if (cuda::device_count() < 2) GTEST_SKIP() << "switching needs two GPUs";
  const int other = before == 0 ? 1 : 0;
  {
    cuda::DeviceGuard guard(other);
    EXPECT_TRUE(guard.switched());
    EXPECT_EQ(cuda::current_device(), other);
    {
      cuda::DeviceGuard nested(before, std::nothrow);
      EXPECT_EQ(cuda::current_device(), before);
    }
    EXPECT_EQ(cuda::current_device(), other);
  }
  EXPECT_EQ(cuda::current_device(), before);
}

// --- CudaDeviceResource ----------------------------------------------------------

using CudaDeviceResourceTest = GpuTest;

TEST_F(CudaDeviceResourceTest, Describes) {
  CudaDeviceResource res(0);
  EXPECT_EQ(res.kind(), MemoryKind::kDevice);
  EXPECT_EQ(res.device(), Device(DeviceType::kCUDA, 0));
  EXPECT_TRUE(res.is_cuda());
  EXPECT_EQ(res.name(), "cuda:0");
  EXPECT_EQ(res.device_index(), 0);
  EXPECT_GE(res.alignment(), 512u);
  EXPECT_THROW(CudaDeviceResource(cuda::device_count()), InvalidArgumentError);
  EXPECT_THROW(res.allocate(0), InvalidArgumentError);
}

TEST_F(CudaDeviceResourceTest, AllocWriteReadFree) {
  CudaDeviceResource res(0);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, std::size_t{512}, std::size_t{4097}, 1 * MiB + 3,
                            2 * MiB, 20 * MiB + 1}) {
    void* d = res.allocate(bytes);
    ASSERT_NE(d, nullptr) << bytes;
    EXPECT_EQ(addr(d) % res.alignment(), 0u) << bytes;
    std::vector<unsigned char> in(bytes), out(bytes, 0);
    for (std::size_t i = 0; i < bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
    GENESIS_CUDA_CHECK(cudaMemcpy(d, in.data(), bytes, cudaMemcpyHostToDevice));
    GENESIS_CUDA_CHECK(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(in, out) << bytes;
    cudaPointerAttributes attr{};
    GENESIS_CUDA_CHECK(cudaPointerGetAttributes(&attr, d));
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attr.device, 0);
    EXPECT_FALSE(PinnedHostResource::is_pinned(d));
    res.deallocate(d, bytes);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaDeviceResourceTest, ManySmallAllocationsStayAligned) {
  // cudaMalloc only documents 256-byte alignment; Genesis promises 512.
  CudaDeviceResource res(0);
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int i = 0; i < 200; ++i) {
    std::size_t bytes = 1 + static_cast<std::size_t>(i) * 37;
    void* p = res.allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(addr(p) % 512, 0u) << bytes;
    blocks.emplace_back(p, bytes);
  }
  for (auto& [p, bytes] : blocks) res.deallocate(p, bytes);
}

TEST_F(CudaDeviceResourceTest, MemInfoIsSane) {
  CudaDeviceResource res(0);
  MemInfo before = res.mem_info();
  EXPECT_GT(before.total_bytes, 0u);
  EXPECT_LE(before.free_bytes, before.total_bytes);
  void* p = res.allocate(256 * MiB);
  ASSERT_NE(p, nullptr);
  MemInfo during = res.mem_info();
  EXPECT_EQ(during.total_bytes, before.total_bytes);
  EXPECT_LE(during.free_bytes + 200 * MiB, before.free_bytes);  // other processes may use some too
  res.deallocate(p, 256 * MiB);
}

TEST_F(CudaDeviceResourceTest, TooLargeReturnsNullptrAndRecovers) {
  CudaDeviceResource res(0);
  const std::size_t total = res.mem_info().total_bytes;
  EXPECT_EQ(res.allocate(total + 1024 * MiB), nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the OOM must not linger as the last error";
  void* p = res.allocate(1 * MiB);
  ASSERT_NE(p, nullptr);
  GENESIS_CUDA_CHECK(cudaMemset(p, 0, 1 * MiB));
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  res.deallocate(p, 1 * MiB);
}

TEST_F(CudaDeviceResourceTest, KeepsTheCallersCurrentDevice) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  cuda::DeviceGuard on1(1);
  CudaDeviceResource res(0);
  void* p = res.allocate(4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cuda::current_device(), 1);
  cudaPointerAttributes attr{};
  GENESIS_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  EXPECT_EQ(attr.device, 0);
  EventId e = res.record_event(0);  // device 0's default stream, though 1 is current
  res.wait_event(e);
  res.release_event(e);
  res.deallocate(p, 4096);
  EXPECT_EQ(cuda::current_device(), 1);
}

TEST_F(CudaDeviceResourceTest, EventsFollowStreamWork) {
  CudaDeviceResource res(0);
  GatedStream s;
  EventId e = res.record_event(s.id());
  EXPECT_NE(e, 0u);
  EXPECT_EQ(res.outstanding_events(), 1u);
  EXPECT_FALSE(res.event_done(e));  // the gate holds the stream
  EventId idle = res.record_event(0);
  res.wait_event(idle);
  EXPECT_TRUE(res.event_done(idle));
  s.open();
  res.wait_event(e);
  EXPECT_TRUE(res.event_done(e));
  res.release_event(e);
  res.release_event(idle);
  res.release_event(idle);  // a second release is ignored
  EXPECT_EQ(res.outstanding_events(), 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaDeviceResourceTest, EventsArePooled) {
  cuda::EventPool pool;
  std::uintptr_t a = pool.record(0, 0);
  std::uintptr_t b = pool.record(0, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.outstanding(), 2u);
  EXPECT_EQ(pool.pooled(), 0u);
  pool.synchronize(a);
  EXPECT_TRUE(pool.query(a));
  pool.synchronize(b);
  EXPECT_TRUE(pool.query(b));
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(pool.pooled(), 2u);
  std::uintptr_t c = pool.record(0, 0);  // reuses a pooled event
  EXPECT_TRUE(c == a || c == b);
  EXPECT_EQ(pool.pooled(), 1u);
  EXPECT_THROW(pool.query(a == c ? b : a), InvalidArgumentError);  // released handle
  pool.release(c);
  EXPECT_EQ(cuda::EventPool::stream_device(0), cuda::current_device());
}

TEST_F(CudaDeviceResourceTest, ConcurrentEventsAndAllocations) {
  CudaDeviceResource res(0);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        for (int i = 0; i < 100; ++i) {
          void* p = res.allocate(64 * KiB);
          if (p == nullptr) {
            ++failures;
            continue;
          }
          EventId e = res.record_event(0);
          res.wait_event(e);
          if (!res.event_done(e)) ++failures;
          res.release_event(e);
          res.deallocate(p, 64 * KiB);
        }
      } catch (const std::exception&) {
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(res.outstanding_events(), 0u);
}

// --- PinnedHostResource ------------------------------------------------------------

using PinnedHostResourceTest = GpuTest;

TEST_F(PinnedHostResourceTest, Describes) {
  PinnedHostResource res;
  EXPECT_EQ(res.kind(), MemoryKind::kPinnedHost);
  EXPECT_EQ(res.device(), Device(DeviceType::kCPU));
  EXPECT_FALSE(res.is_cuda());
  EXPECT_EQ(res.name(), "pinned");
  MemInfo info = res.mem_info();
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);
  EXPECT_THROW(res.allocate(0), InvalidArgumentError);
}

TEST_F(PinnedHostResourceTest, AllocIsPinnedAndCopies) {
  PinnedHostResource res;
  CudaDeviceResource dev(0);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4096}, 3 * MiB + 5}) {
    auto* h = static_cast<unsigned char*>(res.allocate(bytes));
    ASSERT_NE(h, nullptr) << bytes;
    EXPECT_EQ(addr(h) % res.alignment(), 0u);
    EXPECT_TRUE(PinnedHostResource::is_pinned(h));
    EXPECT_TRUE(PinnedHostResource::is_pinned(h + bytes - 1));  // interior pointers too
    for (std::size_t i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>(i * 13 + 5);
    void* d = dev.allocate(bytes);
    ASSERT_NE(d, nullptr);
    StreamHolder s;
    GENESIS_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s.stream));
    EventId e = res.record_event(s.id());
    res.wait_event(e);
    EXPECT_TRUE(res.event_done(e));
    res.release_event(e);
    std::vector<unsigned char> back(bytes);
    GENESIS_CUDA_CHECK(cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(back.data(), h, bytes), 0);
    dev.deallocate(d, bytes);
    res.deallocate(h, bytes);
  }
  EXPECT_EQ(res.outstanding_events(), 0u);
}

TEST_F(PinnedHostResourceTest, IsPinnedIsFalseForOtherMemory) {
  int on_stack = 0;
  void* heap = std::malloc(4096);
  EXPECT_FALSE(PinnedHostResource::is_pinned(&on_stack));
  EXPECT_FALSE(PinnedHostResource::is_pinned(heap));
  EXPECT_FALSE(PinnedHostResource::is_pinned(nullptr));
  std::free(heap);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(PinnedHostResourceTest, EventsFollowStreamWork) {
  PinnedHostResource res;
  GatedStream s;
  EventId e = res.record_event(s.id());
  EXPECT_FALSE(res.event_done(e));
  s.open();
  res.wait_event(e);
  EXPECT_TRUE(res.event_done(e));
  res.release_event(e);
  EventId d = res.record_event(0);  // default stream of the current device
  res.wait_event(d);
  res.release_event(d);
  EXPECT_EQ(res.outstanding_events(), 0u);
}

TEST_F(PinnedHostResourceTest, ImpossibleSizeReturnsNullptrAndRecovers) {
  PinnedHostResource res;
  EXPECT_EQ(res.allocate(std::size_t{1} << 52), nullptr);  // 4 PiB
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* p = res.allocate(4096);
  EXPECT_NE(p, nullptr);
  res.deallocate(p, 4096);
}

#else  // !GENESIS_WITH_CUDA

TEST_F(GpuTest, NeedsCuda) { FAIL() << "unreachable: SetUp skips without CUDA"; }

#endif

}  // namespace
}  // namespace genesis::memory
