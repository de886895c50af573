// The memory sources on a real GPU: NVML's figures of device 0, an
// allocation through the process-wide CUDA allocator seen by the allocator
// source and by NVML's per-process used memory, and a child publishing its
// CUDA allocator's figures. Skips without a GPU or without NVML.
#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "genesis/cuda/runtime.h"
#include "genesis/debug/memory_source.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/memory/publish.h"

namespace genesis::debug {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kMs = 1'000'000;

#define SKIP_WITHOUT_GPU_AND_NVML()                                              \
  do {                                                                           \
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";                    \
    if (!nvml_available()) GTEST_SKIP() << "no NVML (libnvidia-ml.so.1)";        \
  } while (0)

TEST(GpuSourcesTest, NvmlSamplesDevice0) {
  SKIP_WITHOUT_GPU_AND_NVML();
  auto src = open_nvml_source({0});
  ASSERT_EQ(src->devices().size(), 1u);
  EXPECT_EQ(src->devices()[0].id, "0");
  EXPECT_FALSE(src->devices()[0].name.empty());
  const MemorySample s = src->sample("0");
  EXPECT_GT(s.total, 0u);
  EXPECT_LE(s.used, s.total);
  EXPECT_EQ(s.free, s.total - s.used);
  EXPECT_FALSE(s.exact);
  EXPECT_THROW((void)open_nvml_source({1000}), InvalidArgumentError);
}

TEST(GpuSourcesTest, AllocationShowsInAllocatorAndNvmlPerProcess) {
  SKIP_WITHOUT_GPU_AND_NVML();
  memory::CachingAllocator& cuda0 = memory::cuda_allocator(0);
  // The CUDA context first: it takes memory of its own.
  void* warm = cuda0.allocate(1 << 20);
  // Earlier tests of this process may have left free segments cached, which
  // would serve the block below without new device memory for NVML to see.
  cuda0.empty_cache();
  auto allocs = open_allocator_source(process_cuda_allocators());
  auto proc = open_process_source(getpid(), {0});
  const MemorySample before = proc->sample("0");
  const MemorySample before_alloc = allocs->sample("0");

  void* big = cuda0.allocate(256 * kMiB);
  const MemorySample after_alloc = allocs->sample("0");
  EXPECT_TRUE(after_alloc.exact);
  EXPECT_GE(after_alloc.allocated, before_alloc.allocated + 256 * kMiB);
  EXPECT_GT(after_alloc.total, 0u);

  const MemorySample after = proc->sample("0");
  std::printf("NVML per-process used on GPU 0: %.1f kMiB before, %.1f kMiB after 256 kMiB (exact %d)\n",
              static_cast<double>(before.used) / kMiB, static_cast<double>(after.used) / kMiB, after.exact ? 1 : 0);
  EXPECT_GE(after.used, before.used + 200 * kMiB);
  EXPECT_GT(after.host_rss, 0u);
  cuda0.deallocate(big);
  cuda0.deallocate(warm);
}

// The child of ChildPublishesCudaFigures: 256 kMiB on GPU 0, published.
TEST(GpuSourcesHelper, PublishingChild) {
  if (std::getenv("GENESIS_TEST_GPU_PUBLISH_CHILD") == nullptr) GTEST_SKIP() << "only as a child";
  void* p = nullptr;
  {
    memory::ScopedAllocationContext ctx("gpu_child.py:3 in main");
    p = memory::cuda_allocator(0).allocate(256 * kMiB);  // creates the allocator: publishing starts
  }
  std::this_thread::sleep_for(std::chrono::seconds(30));  // the watcher ends it sooner
  memory::cuda_allocator(0).deallocate(p);
}

TEST(GpuSourcesTest, ChildPublishesCudaFigures) {
  SKIP_WITHOUT_GPU_AND_NVML();
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  ::setenv("GENESIS_TEST_GPU_PUBLISH_CHILD", "1", 1);
  auto src = open_child_source({exe, "--gtest_filter=GpuSourcesHelper.PublishingChild"}, {0});
  ::unsetenv("GENESIS_TEST_GPU_PUBLISH_CHILD");
  StopFlag stop{false};
  MemorySample s;
  bool sited = false;
  for (int i = 0; i < 1000 && !(s.exact && s.allocated >= 256 * kMiB && sited); ++i) {
    ASSERT_TRUE(src->advance_to(src->now_ns() + 20 * kMs, stop)) << src->end_reason();
    s = src->sample("0");
    for (const SiteStat& st : src->sites("0")) sited = sited || st.site == "gpu_child.py:3 in main";
  }
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.allocated, 256 * kMiB);
  EXPECT_GE(s.used, 256 * kMiB);  // NVML's per-process figure (context included)
  EXPECT_TRUE(sited);
  EXPECT_NE(src->describe().find("nvml + genesis"), std::string::npos) << src->describe();
}

}  // namespace
}  // namespace genesis::debug
