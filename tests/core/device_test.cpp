#include "genesis/core/device.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <unordered_set>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis {
namespace {

TEST(DeviceTest, DefaultIsCpu) {
  Device d;
  EXPECT_TRUE(d.is_cpu());
  EXPECT_FALSE(d.is_cuda());
  EXPECT_EQ(d.index(), 0);
  EXPECT_EQ(d.str(), "cpu");
}

TEST(DeviceTest, ConstructionFromPartsDoesNotCheckTheGpu) {
  // Naming a device that may not exist is allowed; only parse/validate check.
  Device d(DeviceType::kCUDA, 3);
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index(), 3);
  EXPECT_EQ(d.str(), "cuda:3");
  // A CPU device has no index.
  EXPECT_EQ(Device(DeviceType::kCPU, 5).index(), 0);
  EXPECT_EQ(Device(DeviceType::kCPU, 5), Device(DeviceType::kCPU));
}

TEST(DeviceTest, EqualityAndHash) {
  EXPECT_EQ(Device(DeviceType::kCUDA, 1), Device(DeviceType::kCUDA, 1));
  EXPECT_NE(Device(DeviceType::kCUDA, 1), Device(DeviceType::kCUDA, 2));
  EXPECT_NE(Device(DeviceType::kCUDA, 0), Device(DeviceType::kCPU));
  std::unordered_set<Device> set{Device(DeviceType::kCPU), Device(DeviceType::kCUDA, 0),
                                 Device(DeviceType::kCUDA, 1), Device(DeviceType::kCUDA, 0)};
  EXPECT_EQ(set.size(), 3u);
}

TEST(DeviceTest, StreamsItsName) {
  std::ostringstream os;
  os << Device(DeviceType::kCUDA, 2) << " " << Device();
  EXPECT_EQ(os.str(), "cuda:2 cpu");
}

TEST(DeviceTest, ParsesCpu) {
  Device d = Device::parse("cpu");
  EXPECT_TRUE(d.is_cpu());
  EXPECT_NO_THROW(d.validate());
}

TEST(DeviceTest, RejectsMalformedStrings) {
  for (const char* text : {"gpu", "CUDA:0", "Cpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "cuda: 1",
                           " cpu", "cpu ", "cuda:0:0", "", "cuda0", "cuda:1234567"}) {
    EXPECT_THROW(Device::parse(text), InvalidArgumentError) << "'" << text << "'";
  }
}

TEST(DeviceTest, MalformedStringMessageNamesTheInput) {
  try {
    Device::parse("gpu");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("'gpu'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("cuda:N"), std::string::npos) << e.message();
  }
}

TEST(DeviceTest, RejectsIndexThatDoesNotExist) {
  EXPECT_THROW(Device::parse("cuda:99999"), InvalidArgumentError);
  EXPECT_THROW(Device(DeviceType::kCUDA, 99999).validate(), InvalidArgumentError);
  EXPECT_THROW(Device(DeviceType::kCUDA, -1).validate(), InvalidArgumentError);
}

TEST(DeviceTest, CudaWithoutGpuSaysSo) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU; the no-GPU message cannot be checked";
  for (const char* text : {"cuda", "cuda:0"}) {
    try {
      Device::parse(text);
      FAIL() << "expected InvalidArgumentError for '" << text << "'";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find("no CUDA GPU"), std::string::npos) << e.message();
    }
  }
  EXPECT_THROW(Device(DeviceType::kCUDA, 0).validate(), InvalidArgumentError);
}

TEST(DeviceTest, CudaWithGpuParses) {
  const int count = cuda::device_count();
  if (count == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  Device d = Device::parse("cuda");
  EXPECT_TRUE(d.is_cuda());
  EXPECT_EQ(d.index(), cuda::current_device_or_zero());
  EXPECT_EQ(Device::parse("cuda:0"), Device(DeviceType::kCUDA, 0));
  EXPECT_EQ(Device::parse("cuda:" + std::to_string(count - 1)), Device(DeviceType::kCUDA, count - 1));
  EXPECT_THROW(Device::parse("cuda:" + std::to_string(count)), InvalidArgumentError);
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

}  // namespace
}  // namespace genesis
