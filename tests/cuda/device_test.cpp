// Devices checked against the machine (cuda::parse_device, validate_device).
// Runs everywhere: without a GPU every CUDA device must be refused clearly.
#include "genesis/cuda/device.h"

#include <gtest/gtest.h>

#include <string>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis {
namespace {

TEST(CudaDeviceTest, ParsesCpu) {
  Device d = cuda::parse_device("cpu");
  EXPECT_TRUE(d.is_cpu());
  EXPECT_NO_THROW(cuda::validate_device(d));
}

TEST(CudaDeviceTest, RejectsMalformedStrings) {
  for (const char* text : {"gpu", "CUDA:0", "Cpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "cuda: 1",
                           " cpu", "cpu ", "cuda:0:0", "", "cuda0", "cuda:1234567"}) {
    EXPECT_THROW(cuda::parse_device(text), InvalidArgumentError) << "'" << text << "'";
  }
}

TEST(CudaDeviceTest, MalformedStringMessageNamesTheInput) {
  try {
    cuda::parse_device("gpu");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("'gpu'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("cuda:N"), std::string::npos) << e.message();
  }
}

TEST(CudaDeviceTest, RejectsIndexThatDoesNotExist) {
  EXPECT_THROW(cuda::parse_device("cuda:99999"), InvalidArgumentError);
  EXPECT_THROW(cuda::validate_device(Device(DeviceType::kCUDA, 99999)), InvalidArgumentError);
  EXPECT_THROW(cuda::validate_device(Device(DeviceType::kCUDA, -1)), InvalidArgumentError);
}

TEST(CudaDeviceTest, CudaWithoutGpuSaysSo) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU; the no-GPU message cannot be checked";
  for (const char* text : {"cuda", "cuda:0"}) {
    try {
      cuda::parse_device(text);
      FAIL() << "expected InvalidArgumentError for '" << text << "'";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find("no CUDA GPU"), std::string::npos) << e.message();
    }
  }
  EXPECT_THROW(cuda::validate_device(Device(DeviceType::kCUDA, 0)), InvalidArgumentError);
}

TEST(CudaDeviceTest, CudaWithGpuParses) {
  const int count = cuda::device_count();
  if (count == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  Device d = cuda::parse_device("cuda");
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index(), cuda::current_device_or_zero());
  EXPECT_EQ(cuda::parse_device("cuda:0"), Device(DeviceType::kCUDA, 0));
  EXPECT_EQ(cuda::parse_device("cuda:" + std::to_string(count - 1)), Device(DeviceType::kCUDA, count - 1));
  EXPECT_THROW(cuda::parse_device("cuda:" + std::to_string(count)), InvalidArgumentError);
}

TEST(CudaRuntimeTest, QueriesNeverThrow) {
  EXPECT_GE(cuda::device_count(), 0);
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
  EXPECT_GE(cuda::current_device_or_zero(), 0);
  if (!cuda::compiled_with_cuda()) {
    EXPECT_EQ(cuda::device_count(), 0);
  }
}

TEST(CudaRuntimeTest, DeviceCallsThrowCudaErrorWithoutGpu) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU";
  EXPECT_THROW(cuda::current_device(), CudaError);
  EXPECT_THROW(cuda::set_device(0), CudaError);
  EXPECT_THROW(cuda::synchronize_device(0), CudaError);
  EXPECT_THROW(cuda::mem_get_info(0), CudaError);
  EXPECT_THROW(cuda::DeviceGuard guard(0), CudaError);
  // The nothrow form degrades to doing nothing.
  cuda::DeviceGuard guard(0, std::nothrow);
  EXPECT_FALSE(guard.switched());
}

TEST(CudaDeviceTest, MalformedStringsAreRefusedBeforeAnyGpuQuestion) {
  // The syntax error wins over "no GPU": the message names the string.
  try {
    cuda::parse_device("cuda:x");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("'cuda:x'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("expected"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace genesis
