// Two real processes share GPU storages through CUDA IPC: the
// parent exports, a second process (this binary started again) imports,
// checks and rewrites the data, and the parent sees the new values.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/storage/cuda_ipc_storage.h"
#include "genesis/storage/storage.h"
#include "support/spawn_self.h"

namespace genesis {
namespace {

const Device kHost(DeviceType::kCPU);
const Device kDevice(DeviceType::kCUDA, 0);
constexpr std::int64_t kCount = 300000;
constexpr const char* kEnvShareable = "GENESIS_TEST_STORAGE_IPC_SHAREABLE";
constexpr const char* kEnvPooled = "GENESIS_TEST_STORAGE_IPC_POOLED";

bool have_gpu() { return cuda::device_count() > 0; }

std::vector<float> pattern(float base) {
  std::vector<float> v(kCount);
  for (std::int64_t i = 0; i < kCount; ++i) v[static_cast<std::size_t>(i)] = base + static_cast<float>(i % 1000);
  return v;
}

TEST(GpuStorageIpc, SecondProcessReadsAndWritesBack) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU available: storage IPC tests skipped";
  Storage shareable = ipc_shareable_storage({kCount}, DType::kFloat32, kDevice);
  shareable.copy_(create_storage(pattern(1.0f), kHost));
  Storage pooled = Storage::empty({kCount}, DType::kFloat32, kDevice);
  pooled.copy_(create_storage(pattern(5000.0f), kHost));
  const std::string h1 = export_storage(shareable).to_string();
  std::string h2;
  try {
    h2 = export_storage(pooled).to_string();
  } catch (const InvalidArgumentError& e) {
    // Expandable segments (VMM) cannot be exported: the message must say what to use.
    EXPECT_NE(std::string(e.what()).find("ipc_shareable_storage"), std::string::npos) << e.what();
  }
  const int rc = test::run_self({"--gtest_filter=GpuStorageIpcChild.*"},
                                {std::string(kEnvShareable) + "=" + h1, std::string(kEnvPooled) + "=" + h2},
                                std::chrono::seconds(120));
  ASSERT_EQ(rc, 0) << "the second process failed (its output is above)";
  const std::vector<float> a = pattern(1.0f), b = pattern(5000.0f);
  Storage back = shareable.to(kHost);
  for (std::int64_t i = 0; i < kCount; i += 97) ASSERT_EQ(back.data<float>()[i], -a[static_cast<std::size_t>(i)]) << i;
  if (!h2.empty()) {
    Storage pb = pooled.to(kHost);
    for (std::int64_t i = 0; i < kCount; i += 97) ASSERT_EQ(pb.data<float>()[i], -b[static_cast<std::size_t>(i)]) << i;
  }
}

// Runs only in the second process (the variables are set by the test above).
TEST(GpuStorageIpcChild, ImportVerifyNegate) {
  const char* h1 = std::getenv(kEnvShareable);
  if (h1 == nullptr) GTEST_SKIP() << "runs only as the second process of GpuStorageIpc";
  const char* h2 = std::getenv(kEnvPooled);
  struct Case {
    const char* text;
    float base;
  };
  for (const Case& c : {Case{h1, 1.0f}, Case{h2, 5000.0f}}) {
    if (c.text == nullptr || *c.text == '\0') continue;
    const cuda::IpcHandle handle = cuda::IpcHandle::from_string(c.text);
    EXPECT_THROW(import_storage(handle, {kCount + 1}, DType::kFloat32), InvalidArgumentError);
    Storage s = import_storage(handle, {kCount}, DType::kFloat32);
    EXPECT_TRUE(s.device().is_cuda());
    Storage h = s.to(kHost);
    const std::vector<float> want = pattern(c.base);
    for (std::int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(h.data<float>()[i], want[static_cast<std::size_t>(i)]) << "element " << i;
      h.data<float>()[i] = -h.data<float>()[i];
    }
    s.copy_(h);  // blocking: done before this process exits
  }
}

TEST(GpuStorageIpc, BadUse) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU available: storage IPC tests skipped";
  EXPECT_THROW(export_storage(Storage::empty({4}, DType::kFloat32, kHost)), InvalidArgumentError);
  EXPECT_THROW(export_storage(Storage()), InvalidArgumentError);
  EXPECT_THROW(ipc_shareable_storage({4}, DType::kFloat32, kHost), InvalidArgumentError);
  Storage s = ipc_shareable_storage({16}, DType::kInt32, kDevice);
  const cuda::IpcHandle h = export_storage(s);
  EXPECT_THROW(import_storage(h, {16}, DType::kInt32), InvalidArgumentError);  // our own handle
  EXPECT_THROW(import_storage(h, {8}, DType::kInt32), InvalidArgumentError);   // size mismatch
}

}  // namespace
}  // namespace genesis
