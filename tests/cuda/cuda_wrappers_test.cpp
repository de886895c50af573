// CPU tests of the CUDA wrappers (streams, events, device properties, peer
// access, IPC, convert_dtype_cuda) on a machine without a usable GPU: every
// call that needs the device throws CudaError saying why, and nothing that
// needs no device touches CUDA. On a GPU machine the "no GPU" tests skip; the
// GPU behaviour is covered by tests/cuda/gpu_*_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "genesis/core/error.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/ipc.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/convert_cuda.h"

namespace genesis::cuda {
namespace {

class NoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() > 0) GTEST_SKIP() << "a GPU is present: the no-GPU behaviour cannot be observed here";
  }
};

// Runs fn, expects CudaError whose message names the call and says why.
void expect_unavailable(const std::function<void()>& fn, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << what << ": no exception";
  } catch (const CudaError& e) {
    const std::string msg = e.message();
    EXPECT_NE(msg.find(what), std::string::npos) << "message does not name the call: " << msg;
    EXPECT_NE(msg.find("needs CUDA"), std::string::npos) << msg;
    const bool says_why = msg.find("no CUDA GPU") != std::string::npos ||
                          msg.find("built without CUDA") != std::string::npos;
    EXPECT_TRUE(says_why) << msg;
    EXPECT_EQ(e.code(), detail::kNoDeviceCode);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong exception type: " << e.what();
  }
}

TEST_F(NoGpu, StreamCallsThrowCudaError) {
  expect_unavailable([] { (void)Stream::create(); }, "Stream::create()");
  expect_unavailable([] { (void)Stream::create(0, 0, false); }, "Stream::create()");
  expect_unavailable([] { (void)Stream::from_id(0); }, "Stream::from_id()");
  expect_unavailable([] { (void)priority_range(0); }, "priority_range()");
  expect_unavailable([] { (void)default_stream(); }, "default_stream()");
  expect_unavailable([] { (void)current_stream(); }, "current_stream()");
  expect_unavailable([] { set_current_stream(Stream()); }, "set_current_stream()");
  expect_unavailable([] { StreamGuard g{Stream()}; }, "StreamGuard");
  expect_unavailable([] { Stream().synchronize(); }, "Stream::synchronize()");
  expect_unavailable([] { (void)Stream().query(); }, "Stream::query()");
  expect_unavailable([] { Stream().wait(Event()); }, "Stream::wait()");
}

TEST_F(NoGpu, DefaultConstructedStreamAndEventNeedNoCuda) {
  const Stream s;
  EXPECT_EQ(s.id(), 0u);
  EXPECT_EQ(s.device(), 0);
  EXPECT_EQ(s.priority(), 0);
  EXPECT_TRUE(s.is_default());
  EXPECT_EQ(s, Stream());
  Event e(true);
  EXPECT_FALSE(e.is_created());
  EXPECT_TRUE(e.timing_enabled());
  EXPECT_EQ(e.device(), -1);
  Event moved(std::move(e));
  EXPECT_TRUE(moved.timing_enabled());
}

TEST_F(NoGpu, EventCallsThrowCudaError) {
  expect_unavailable([] { Event().record(Stream()); }, "Event::record()");
  expect_unavailable([] { Event().record(); }, "current_stream()");
  expect_unavailable([] { Event().synchronize(); }, "Event::synchronize()");
  expect_unavailable([] { (void)Event().query(); }, "Event::query()");
  expect_unavailable([] { (void)Event(true).elapsed_ms(Event(true)); }, "Event::elapsed_ms()");
}

TEST_F(NoGpu, DevicePropertiesThrowCudaError) {
  expect_unavailable([] { (void)get_device_properties(); }, "get_device_properties()");
  expect_unavailable([] { (void)get_device_properties(0); }, "get_device_properties()");
  expect_unavailable([] { (void)get_device_name(); }, "get_device_properties()");
  expect_unavailable([] { (void)get_device_capability(0); }, "get_device_properties()");
  expect_unavailable([] { synchronize(); }, "synchronize()");
  expect_unavailable([] { synchronize(0); }, "synchronize(device)");
  expect_unavailable([] { (void)can_access_peer(0, 1); }, "can_access_peer()");
  expect_unavailable([] { enable_peer_access(0, 1); }, "enable_peer_access()");
}

TEST_F(NoGpu, IpcThrowsCudaError) {
  int x = 0;
  expect_unavailable([&] { (void)export_ipc_handle(&x, sizeof x); }, "export_ipc_handle()");
  expect_unavailable([] { (void)IpcMapping::open(IpcHandle{}); }, "IpcMapping::open()");
  IpcMapping m;  // an empty mapping needs no CUDA
  EXPECT_FALSE(m.is_open());
  EXPECT_EQ(m.data(), nullptr);
  m.close();
}

TEST_F(NoGpu, ConvertDtypeCudaThrowsCudaError) {
  float in[4] = {1, 2, 3, 4};
  std::uint16_t out[4] = {};
  expect_unavailable([&] { convert_dtype_cuda(in, DType::kFloat32, out, DType::kFloat16, 4); },
                     "convert_dtype_cuda()");
  // count == 0 is a no-op everywhere, as on the CPU.
  EXPECT_NO_THROW(convert_dtype_cuda(nullptr, DType::kFloat32, nullptr, DType::kFloat16, 0));
}

// Argument errors come before any device question, so these hold everywhere.
TEST(ConvertDtypeCudaArgs, InvalidArgumentsAreRejectedFirst) {
  float in[4] = {};
  std::uint16_t out[4] = {};
  EXPECT_THROW(convert_dtype_cuda(in, static_cast<DType>(42), out, DType::kFloat16, 4), InvalidArgumentError);
  EXPECT_THROW(convert_dtype_cuda(in, DType::kFloat32, out, static_cast<DType>(10), 4), InvalidArgumentError);
  EXPECT_THROW(convert_dtype_cuda(nullptr, DType::kFloat32, out, DType::kFloat16, 4), InvalidArgumentError);
  EXPECT_THROW(convert_dtype_cuda(in, DType::kFloat32, nullptr, DType::kFloat16, 4), InvalidArgumentError);
  EXPECT_NO_THROW(convert_dtype_cuda(in, static_cast<DType>(0), out, DType::kFloat16, 0));
}

TEST(CudaStreamValue, PerThreadDefaultStreamIsOffUnlessRequested) {
  // The test environment does not set GENESIS_PER_THREAD_DEFAULT_STREAM.
  if (std::getenv("GENESIS_PER_THREAD_DEFAULT_STREAM") != nullptr) GTEST_SKIP() << "variable set by the caller";
  EXPECT_FALSE(per_thread_default_stream());
}

TEST(CudaDeviceProperties, UuidStringLooksLikeNvidiaSmi) {
  DeviceProperties p;
  for (int i = 0; i < 16; ++i) p.uuid[i] = static_cast<std::uint8_t>(0x10 * (i % 16) + i);
  EXPECT_EQ(p.uuid_string(), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

}  // namespace
}  // namespace genesis::cuda
