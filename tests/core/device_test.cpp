#include "genesis/core/device.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <unordered_set>

#include "genesis/core/error.h"

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
  // Naming a device that may not exist is allowed; only the CUDA layer checks.
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

TEST(DeviceTest, FromStringReadsEveryForm) {
  EXPECT_EQ(Device::from_string("cpu"), Device(DeviceType::kCPU));
  EXPECT_EQ(Device::from_string("cuda:0"), Device(DeviceType::kCUDA, 0));
  EXPECT_EQ(Device::from_string("cuda:17"), Device(DeviceType::kCUDA, 17));
  EXPECT_EQ(Device::from_string("cuda:999999"), Device(DeviceType::kCUDA, 999999));
  // Plain "cuda" takes the index the caller names for it.
  EXPECT_EQ(Device::from_string("cuda"), Device(DeviceType::kCUDA, 0));
  EXPECT_EQ(Device::from_string("cuda", 5), Device(DeviceType::kCUDA, 5));
  // ... and only plain "cuda" does.
  EXPECT_EQ(Device::from_string("cuda:2", 5), Device(DeviceType::kCUDA, 2));
}

TEST(DeviceTest, FromStringNeverAsksForTheGpu) {
  // A plain value: naming a GPU this machine lacks is not an error here.
  EXPECT_NO_THROW(Device::from_string("cuda:4242"));
}

TEST(DeviceTest, FromStringRoundTripsStr) {
  for (const Device d : {Device(), Device(DeviceType::kCUDA, 0), Device(DeviceType::kCUDA, 31)}) {
    EXPECT_EQ(Device::from_string(d.str()), d) << d;
  }
}

TEST(DeviceTest, RejectsMalformedStrings) {
  for (const char* text : {"gpu", "CUDA:0", "Cpu", "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "cuda: 1",
                           " cpu", "cpu ", "cuda:0:0", "", "cuda0", "cuda:1234567"}) {
    EXPECT_THROW(Device::from_string(text), InvalidArgumentError) << "'" << text << "'";
  }
}

TEST(DeviceTest, MalformedStringMessageNamesTheInput) {
  try {
    Device::from_string("gpu");
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("'gpu'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("cuda:N"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace genesis
