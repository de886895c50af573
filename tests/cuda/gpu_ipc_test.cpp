// GPU tests of CUDA IPC (genesis/cuda/ipc.h) with two real processes.
//
// GpuIpc.ChildProcessReadsAndWritesBack allocates device memory, fills it,
// exports two blocks of the same cudaMalloc segment (as caching-allocator
// blocks are), and starts this test binary again (posix_spawn of
// /proc/self/exe: never fork() once CUDA is initialised) running only
// GpuIpcChild.OpenVerifyAndWriteBack, with the handles in environment
// variables. The child maps both blocks, checks their bytes, writes a new
// pattern and exits; the parent checks the pattern and that nothing outside
// the blocks changed. The child test skips when the variables are absent, so
// it is harmless in a normal run.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/ipc.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/vmm.h"
#include "support/spawn_self.h"

extern char** environ;

namespace genesis::cuda {
namespace {

constexpr const char* kEnvA = "GENESIS_TEST_IPC_HANDLE_A";
constexpr const char* kEnvB = "GENESIS_TEST_IPC_HANDLE_B";
constexpr std::size_t MiB = std::size_t{1} << 20;

class GpuIpc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): CUDA IPC tests skipped";
    }
  }
};

class GpuIpcChild : public GpuIpc {};

#if GENESIS_WITH_CUDA

// What the parent writes: a function of the byte's offset in the segment.
std::uint8_t parent_byte(std::size_t segment_offset) {
  return static_cast<std::uint8_t>(segment_offset * 7 + 3);
}
// What the child writes back.
std::uint8_t child_byte(std::size_t segment_offset) {
  return static_cast<std::uint8_t>((segment_offset * 13 + 5) ^ 0x5a);
}

template <typename Fn>
std::string invalid_argument_message(Fn fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.message();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type> ") + e.what();
  }
  return "<no InvalidArgumentError>";
}

TEST_F(GpuIpc, ChildProcessReadsAndWritesBack) {
  constexpr std::size_t kSegment = 4 * MiB;
  constexpr std::size_t kOffA = MiB / 2, kSizeA = MiB;
  constexpr std::size_t kOffB = 2 * MiB + 512, kSizeB = MiB / 4;
  void* seg = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&seg, kSegment));
  auto* base = static_cast<std::uint8_t*>(seg);
  std::vector<std::uint8_t> host(kSegment);
  for (std::size_t i = 0; i < kSegment; ++i) host[i] = parent_byte(i);
  GENESIS_CUDA_CHECK(cudaMemcpy(base, host.data(), kSegment, cudaMemcpyHostToDevice));

  const IpcHandle a = export_ipc_handle(base + kOffA, kSizeA);
  const IpcHandle b = export_ipc_handle(base + kOffB, kSizeB);
  EXPECT_EQ(a.offset, kOffA);
  EXPECT_EQ(a.nbytes, kSizeA);
  EXPECT_EQ(b.offset, kOffB);
  EXPECT_EQ(a.handle, b.handle) << "two blocks of one cudaMalloc segment should share its CUDA handle";
  EXPECT_EQ(a.device, current_device());
  EXPECT_EQ(a.device_uuid, get_device_properties(a.device).uuid);
  EXPECT_EQ(a.exporter, ipc_process_id());

  const int code = genesis::test::run_self({"--gtest_filter=GpuIpcChild.OpenVerifyAndWriteBack"},
                            {std::string(kEnvA) + "=" + a.to_string(), std::string(kEnvB) + "=" + b.to_string()},
                            std::chrono::seconds(180));
  EXPECT_EQ(code, 0) << "the child test failed: see its GpuIpcChild.OpenVerifyAndWriteBack output above";

  std::vector<std::uint8_t> after(kSegment);
  GENESIS_CUDA_CHECK(cudaMemcpy(after.data(), base, kSegment, cudaMemcpyDeviceToHost));
  std::size_t wrong_inside = 0, wrong_outside = 0, first_wrong = kSegment;
  for (std::size_t i = 0; i < kSegment; ++i) {
    const bool inside = (i >= kOffA && i < kOffA + kSizeA) || (i >= kOffB && i < kOffB + kSizeB);
    const std::uint8_t want = inside && code == 0 ? child_byte(i) : parent_byte(i);
    if (after[i] != want) {
      (inside ? wrong_inside : wrong_outside)++;
      if (first_wrong == kSegment) first_wrong = i;
    }
  }
  EXPECT_EQ(wrong_inside, 0u) << "bytes of the shared blocks without the child's pattern; first wrong at segment offset "
                              << first_wrong;
  EXPECT_EQ(wrong_outside, 0u) << "bytes outside the shared blocks changed; first at segment offset " << first_wrong;
  GENESIS_CUDA_CHECK(cudaFree(seg));
}

// Runs only in the child started above.
TEST_F(GpuIpcChild, OpenVerifyAndWriteBack) {
  const char* text_a = std::getenv(kEnvA);
  const char* text_b = std::getenv(kEnvB);
  if (text_a == nullptr || text_b == nullptr)
    GTEST_SKIP() << "runs only as the child of GpuIpc.ChildProcessReadsAndWritesBack";
  const IpcHandle ha = IpcHandle::from_string(text_a);
  const IpcHandle hb = IpcHandle::from_string(text_b);
  EXPECT_NE(ha.exporter, ipc_process_id());

  IpcMapping a = IpcMapping::open(ha);
  IpcMapping b = IpcMapping::open(hb);  // same segment: reuses the mapping
  ASSERT_TRUE(a.is_open());
  ASSERT_TRUE(b.is_open());
  EXPECT_EQ(a.nbytes(), ha.nbytes);
  EXPECT_EQ(b.nbytes(), hb.nbytes);
  EXPECT_EQ(static_cast<std::uint8_t*>(b.data()) - static_cast<std::uint8_t*>(a.data()),
            static_cast<std::ptrdiff_t>(hb.offset - ha.offset))
      << "both blocks should be views of one mapping of the segment";
  EXPECT_EQ(get_device_properties(a.device()).uuid, ha.device_uuid);

  for (auto [m, h] : {std::pair{&a, &ha}, std::pair{&b, &hb}}) {
    std::vector<std::uint8_t> bytes(m->nbytes());
    GENESIS_CUDA_CHECK(cudaMemcpy(bytes.data(), m->data(), bytes.size(), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < bytes.size(); ++j) wrong += bytes[j] != parent_byte(h->offset + j);
    EXPECT_EQ(wrong, 0u) << "the child read bytes the parent did not write (block at offset " << h->offset << ")";
    for (std::size_t j = 0; j < bytes.size(); ++j) bytes[j] = child_byte(h->offset + j);
    GENESIS_CUDA_CHECK(cudaMemcpy(m->data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  }
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());

  IpcMapping moved = std::move(a);
  EXPECT_FALSE(a.is_open());
  moved.close();
  moved.close();  // idempotent
  EXPECT_FALSE(moved.is_open());
  // b still maps the segment after a's close (reference counted).
  std::uint8_t first = 0;
  GENESIS_CUDA_CHECK(cudaMemcpy(&first, b.data(), 1, cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, child_byte(hb.offset));
}

TEST_F(GpuIpc, OpeningOwnHandleIsAClearError) {
  void* p = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&p, MiB));
  const IpcHandle h = export_ipc_handle(p, MiB);
  EXPECT_NE(invalid_argument_message([&] { (void)IpcMapping::open(h); }).find("exported by this very process"),
            std::string::npos);
  GENESIS_CUDA_CHECK(cudaFree(p));
}

TEST_F(GpuIpc, ExportRejectsWhatCannotBeShared) {
  void* dev = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&dev, MiB));
  EXPECT_NE(invalid_argument_message([&] { (void)export_ipc_handle(nullptr, 1); }).find("null"), std::string::npos);
  EXPECT_NE(invalid_argument_message([&] { (void)export_ipc_handle(static_cast<char*>(dev) + 512, MiB); })
                .find("runs past the end of its allocation"),
            std::string::npos);
  EXPECT_NO_THROW((void)export_ipc_handle(static_cast<char*>(dev) + 512, MiB - 512));
  std::vector<char> pageable(64);
  EXPECT_NE(invalid_argument_message([&] { (void)export_ipc_handle(pageable.data(), 64); }).find("not device memory"),
            std::string::npos);
  void* pinned = nullptr;
  GENESIS_CUDA_CHECK(cudaMallocHost(&pinned, 4096));
  EXPECT_NE(invalid_argument_message([&] { (void)export_ipc_handle(pinned, 64); }).find("pinned host memory"),
            std::string::npos);
  GENESIS_CUDA_CHECK(cudaFreeHost(pinned));
  void* managed = nullptr;
  GENESIS_CUDA_CHECK(cudaMallocManaged(&managed, 4096));
  EXPECT_NE(invalid_argument_message([&] { (void)export_ipc_handle(managed, 64); }).find("managed memory"),
            std::string::npos);
  GENESIS_CUDA_CHECK(cudaFree(managed));
  GENESIS_CUDA_CHECK(cudaFree(dev));
}

TEST_F(GpuIpc, ExportOfVirtualMemoryNamesExpandableSegments) {
  const int device = current_device();
  if (!vmm::available(device)) GTEST_SKIP() << "no CUDA virtual memory management on this device";
  const std::size_t g = vmm::granularity(device);
  const std::uintptr_t addr = vmm::reserve(g, g);
  ASSERT_NE(addr, 0u);
  vmm::Handle handle{};
  ASSERT_TRUE(vmm::create_and_map(device, addr, g, &handle));
  ASSERT_TRUE(vmm::set_access(device, addr, g));
  const std::string msg =
      invalid_argument_message([&] { (void)export_ipc_handle(reinterpret_cast<void*>(addr + 256), 256); });
  EXPECT_NE(msg.find("virtual-memory API"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expandable segments"), std::string::npos) << msg;
  vmm::unmap_and_release(addr, g, handle);
  vmm::free_reservation(addr, g);
}

TEST_F(GpuIpc, HandleForAMissingGpuIsAClearError) {
  void* p = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&p, MiB));
  IpcHandle h = export_ipc_handle(p, MiB);
  h.exporter ^= 1;  // pretend another process exported it
  for (auto& byte : h.device_uuid) byte = static_cast<std::uint8_t>(~byte);
  h.device = 99;
  std::string msg = invalid_argument_message([&] { (void)IpcMapping::open(h); });
  EXPECT_NE(msg.find("is not visible in this process"), std::string::npos) << msg;
  h.device_uuid = {};
  msg = invalid_argument_message([&] { (void)IpcMapping::open(h); });
  EXPECT_NE(msg.find("names device 99"), std::string::npos) << msg;
  GENESIS_CUDA_CHECK(cudaFree(p));
  EXPECT_THROW((void)IpcHandle::from_string("genesis-ipc-v1:not a handle"), InvalidArgumentError);
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis::cuda
