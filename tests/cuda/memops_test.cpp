// The CUDA memory wrappers (cuda/memops.h) without a GPU: every operation
// refuses with a CudaError that names it and says why, and freeing is a no-op.
#include "genesis/cuda/memops.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis {
namespace {

TEST(CudaMemopsTest, EveryOperationRefusesClearlyWithoutCuda) {
  if (cuda::compiled_with_cuda()) GTEST_SKIP() << "built with CUDA: the refusals are those of a build without it";
  char a[8] = {};
  char b[8] = {};
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"cuda::memcpy_async()", [&] { cuda::memcpy_async(a, b, 8, cuda::CopyKind::kHostToDevice, 0); }},
      {"cuda::memcpy_peer_async()", [&] { cuda::memcpy_peer_async(a, 0, b, 1, 8, 0); }},
      {"cuda::memset_async()", [&] { cuda::memset_async(a, 0, 8, 0); }},
      {"cuda::synchronize_stream()", [] { cuda::synchronize_stream(0); }},
      {"cuda::stream_device()", [] { (void)cuda::stream_device(0); }},
      {"cuda::pointer_attributes()", [&] { (void)cuda::pointer_attributes(a); }},
      {"cuda::malloc_device()", [] { (void)cuda::malloc_device(64); }},
      {"cuda::malloc_pinned_host()", [] { (void)cuda::malloc_pinned_host(64); }},
  };
  for (const auto& [name, call] : calls) {
    try {
      call();
      ADD_FAILURE() << name << " did not throw";
    } catch (const CudaError& e) {
      EXPECT_NE(e.message().find(name), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("built without CUDA"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(a[0], 0);  // nothing was written
  cuda::free_device(nullptr);  // never throws
  cuda::free_device(a);        // nothing to free without CUDA: a no-op, not a crash
  cuda::free_pinned_host(nullptr);
  EXPECT_FALSE(cuda::is_pinned_host(a));
  EXPECT_FALSE(cuda::is_pinned_host(nullptr));
}

TEST(CudaMemopsTest, SpecialStreamsAreTheThreeCudaHandles) {
  EXPECT_TRUE(cuda::is_special_stream(0));
  EXPECT_TRUE(cuda::is_special_stream(1));
  EXPECT_TRUE(cuda::is_special_stream(2));
  EXPECT_FALSE(cuda::is_special_stream(3));
  EXPECT_FALSE(cuda::is_special_stream(0x7f0000001000u));
}

}  // namespace
}  // namespace genesis
