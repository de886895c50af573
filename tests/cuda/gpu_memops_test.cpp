// The CUDA memory wrappers (cuda/memops.h) on a GPU: copies each way, memset,
// stream queries, pointer attributes and raw allocations, checked byte for
// byte. Skips without a GPU.
#include "genesis/cuda/memops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/memory/device_allocators.h"

namespace genesis {
namespace {

class GpuMemopsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  }
};

TEST_F(GpuMemopsTest, RoundTripThroughDeviceMemory) {
  constexpr std::size_t n = 1 << 16;
  std::vector<std::uint8_t> in(n), out(n, 0);
  std::iota(in.begin(), in.end(), std::uint8_t{3});
  cuda::DeviceGuard guard(0);
  const cuda::Stream stream = cuda::Stream::create(0);
  void* a = cuda::malloc_device(n);
  void* b = cuda::malloc_device(n);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  cuda::memcpy_async(a, in.data(), n, cuda::CopyKind::kHostToDevice, stream.id());
  cuda::memcpy_async(b, a, n, cuda::CopyKind::kDeviceToDevice, stream.id());
  cuda::memset_async(a, 0, n, stream.id());
  cuda::memcpy_async(out.data(), b, n, cuda::CopyKind::kDeviceToHost, stream.id());
  cuda::synchronize_stream(stream.id());
  EXPECT_EQ(out, in);
  cuda::memcpy_async(out.data(), a, n, cuda::CopyKind::kDefault, stream.id());
  cuda::synchronize_stream(stream.id());
  EXPECT_EQ(out, std::vector<std::uint8_t>(n, 0));
  cuda::free_device(a);
  cuda::free_device(b);
}

TEST_F(GpuMemopsTest, PointerAttributesAndStreamDevice) {
  cuda::DeviceGuard guard(0);
  void* d = cuda::malloc_device(256);
  ASSERT_NE(d, nullptr);
  const cuda::PointerAttributes dev = cuda::pointer_attributes(d);
  EXPECT_EQ(dev.type, cuda::MemoryType::kDevice);
  EXPECT_EQ(dev.device, 0);
  cuda::free_device(d);
  void* pinned = memory::allocate_pinned(256);
  EXPECT_EQ(cuda::pointer_attributes(pinned).type, cuda::MemoryType::kHost);
  memory::free_pinned(pinned);
  std::vector<char> pageable(256);
  EXPECT_EQ(cuda::pointer_attributes(pageable.data()).type, cuda::MemoryType::kUnregistered);
  const cuda::Stream s = cuda::Stream::create(0);
  EXPECT_EQ(cuda::stream_device(s.id()), 0);
}

TEST_F(GpuMemopsTest, OutOfMemoryIsNullNotAnError) {
  cuda::DeviceGuard guard(0);
  const std::size_t too_much = cuda::mem_get_info(0).total_bytes * 4;
  EXPECT_EQ(cuda::malloc_device(too_much), nullptr);
  // The failure left nothing behind for the next call.
  void* p = cuda::malloc_device(256);
  EXPECT_NE(p, nullptr);
  cuda::free_device(p);
}

}  // namespace
}  // namespace genesis
