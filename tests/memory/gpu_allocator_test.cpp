// The caching allocator on real CUDA upstreams: the shared contract
// (tests/support/allocator_contract.h) on CudaDeviceResource and
// PinnedHostResource, CUDA out-of-memory reports, stream-ordered reuse with
// real streams and events, and a small multi-threaded stress run.
// Every test skips with a message when the machine has no usable GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "support/allocator_contract.h"
#include "support/allocator_test_util.h"

namespace genesis::memory::testing_support {
namespace {

// --- the contract on CUDA upstreams -------------------------------------------

void host_fill(void* p, std::size_t n, unsigned char pattern) { std::memset(p, pattern, n); }

bool host_check(const void* p, std::size_t n, unsigned char pattern) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (c[i] != pattern) return false;
  return true;
}

#if GENESIS_WITH_CUDA
// Device memory: written with cudaMemset (compute-sanitizer reports any byte
// outside the allocation) and read back whole.
void device_fill(void* p, std::size_t n, unsigned char pattern) {
  GENESIS_CUDA_CHECK(cudaMemset(p, pattern, n));
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
}

bool device_check(const void* p, std::size_t n, unsigned char pattern) {
  std::vector<unsigned char> host(n);
  GENESIS_CUDA_CHECK(cudaMemcpy(host.data(), p, n, cudaMemcpyDeviceToHost));
  return host_check(host.data(), n, pattern);
}
#endif

// chunk_pages 0: CUDA's default (chunks of up to 64 pages); 1: a handle per page.
ContractUpstream cuda_case(bool expandable = false, std::uint32_t chunk_pages = 0) {
  ContractUpstream c;
  c.name = !expandable ? "CudaDevice0" : chunk_pages == 1 ? "CudaDevice0ExpandablePages" : "CudaDevice0Expandable";
  c.expandable = expandable;  // skipped while the resource has no virtual memory support
  c.chunk_pages = chunk_pages;
  c.needs_cuda = true;
  c.make = [] { return std::make_shared<CudaDeviceResource>(0); };
#if GENESIS_WITH_CUDA
  c.fill = device_fill;
  c.check = device_check;
#endif
  c.outstanding_events = [](UpstreamResource& u) { return dynamic_cast<CudaDeviceResource&>(u).outstanding_events(); };
  return c;
}

ContractUpstream pinned_case() {
  ContractUpstream c;
  c.name = "PinnedHost";
  c.needs_cuda = true;
  c.make = [] { return std::make_shared<PinnedHostResource>(); };
  c.fill = host_fill;  // pinned memory is ordinary host memory to the CPU
  c.check = host_check;
  c.outstanding_events = [](UpstreamResource& u) { return dynamic_cast<PinnedHostResource&>(u).outstanding_events(); };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Gpu, AllocatorContractTest, ::testing::Values(cuda_case(), cuda_case(true), cuda_case(true, 1), pinned_case()),
                         contract_case_name);

// --- CUDA-specific behaviour ----------------------------------------------------

class GpuAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (cuda::compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): GPU allocator tests skipped";
    }
  }
};

TEST_F(GpuAllocatorTest, OutOfMemoryIsACudaOom) {
  auto dev = std::make_shared<CudaDeviceResource>(0);
  CachingAllocator a(dev);
  const MemInfo info = dev->mem_info();
  void* small = a.allocate(1000);
  const std::size_t too_much = info.total_bytes + 1 * GiB;
  std::string msg;
  try {
    void* p = a.allocate(too_much);
    a.deallocate(p);
    FAIL() << "allocating more than the GPU has did not throw";
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  for (const std::string& needle : {std::string("CUDA OOM"), std::to_string(too_much) + " bytes", std::string("cuda:0"),
                                    std::string("total"), std::string("free"), std::string("allocated"),
                                    std::string("reserved"), std::string("Try")})
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << needle << "' not in:\n" << msg;
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 1);
#if GENESIS_WITH_CUDA
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the OOM left a CUDA error behind";
#endif
  // Still usable, also for a large block.
  void* p = a.allocate(256 * MiB);
  EXPECT_NE(p, nullptr);
  a.deallocate(p);
  a.deallocate(small);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
}

TEST_F(GpuAllocatorTest, EmptyCacheGivesMemoryBackToTheDevice) {
  auto dev = std::make_shared<CudaDeviceResource>(0);
  CachingAllocator a(dev);
  const std::size_t free_before = dev->mem_info().free_bytes;
  std::vector<void*> ptrs;
  for (int i = 0; i < 8; ++i) ptrs.push_back(a.allocate(128 * MiB));
  EXPECT_LE(dev->mem_info().free_bytes + 1 * GiB - 64 * MiB, free_before);
  for (void* p : ptrs) a.deallocate(p);
  EXPECT_GE(a.stats().reserved_bytes[kStatAggregate].current, static_cast<std::int64_t>(1 * GiB));
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  // Within what other processes / the driver may have moved meanwhile.
  EXPECT_GE(dev->mem_info().free_bytes + 64 * MiB, free_before);
}

TEST_F(GpuAllocatorTest, MemoryFractionOfTheGpu) {
  auto dev = std::make_shared<CudaDeviceResource>(0);
  CachingAllocator a(dev);
  a.set_memory_fraction(0.05);
  const std::size_t limit = a.memory_limit();
  EXPECT_NEAR(static_cast<double>(limit), 0.05 * static_cast<double>(dev->mem_info().total_bytes), 1.0 * MiB);
  std::string msg;
  try {
    (void)a.allocate(limit + 2 * MiB);
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("CUDA OOM"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memory_fraction"), std::string::npos) << msg;
  a.deallocate(a.allocate(limit / 2));
}

#if GENESIS_WITH_CUDA

// A stream held busy by a host callback until open(): keeps work in flight
// deterministically without a kernel.
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
  void sync() { GENESIS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  StreamId id() const { return reinterpret_cast<StreamId>(stream_); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* gate = static_cast<GatedStream*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> open_{false};
};

struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { GENESIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(stream); }
  StreamId id() const { return reinterpret_cast<StreamId>(stream); }
};

template <typename Resource>
void recorded_block_waits_for_stream(std::shared_ptr<Resource> res) {
  // Streams outlive the allocator: a segment keeps its stream's handle.
  Stream other, third;
  CachingAllocator a(res);
  Stream home;
  void* p = a.allocate(1 * MiB, home.id());
  {
    GatedStream busy;
    a.record_stream(p, busy.id());
    a.deallocate(p);
    EXPECT_EQ(res->outstanding_events(), 1u);
    std::vector<void*> others;
    for (int i = 0; i < 3; ++i) {
      void* q = a.allocate(1 * MiB, home.id());
      EXPECT_NE(q, p) << "reused while the other stream still runs";
      others.push_back(q);
    }
    busy.open();
    busy.sync();
    void* again = a.allocate(1 * MiB, home.id());
    EXPECT_EQ(again, p);
    EXPECT_EQ(res->outstanding_events(), 0u);
    others.push_back(again);
    for (void* q : others) a.deallocate(q);
  }
  // Another stream: a free block whose stream may still be using it is not
  // lent to it; once that stream is idle, one may be.
  {
    // Gates only while in use: CUDA runs host functions one at a time, so a
    // closed gate would hold every other gated stream's too.
    GatedStream owner;
    void* x = a.allocate(12 * MiB, owner.id());
    a.deallocate(x);
    const std::int64_t borrows = a.stats().num_stream_borrows;
    void* y = a.allocate(12 * MiB, other.id());
    EXPECT_NE(y, x) << "lent while its stream's work may still use it";
    EXPECT_EQ(a.stats().num_stream_borrows, borrows);
    a.deallocate(y);
    owner.open();
    owner.sync();
    void* z = a.allocate(12 * MiB, third.id());
    EXPECT_TRUE(z == x || z == y) << "an idle stream's free block did not serve";
    EXPECT_EQ(a.stats().num_stream_borrows, borrows + 1);
    a.deallocate(z);
    a.empty_cache();  // no segment may outlive its stream
  }
  // empty_cache waits for pending work.
  {
    GatedStream busy;
    void* z = a.allocate(12 * MiB, home.id());
    a.record_stream(z, busy.id());
    a.deallocate(z);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      busy.open();
    });
    a.empty_cache();  // blocks until the gate opens
    opener.join();
    EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
    EXPECT_EQ(res->outstanding_events(), 0u);
  }
}

TEST_F(GpuAllocatorTest, RecordStreamOnDeviceMemory) {
  recorded_block_waits_for_stream(std::make_shared<CudaDeviceResource>(0));
}

TEST_F(GpuAllocatorTest, RecordStreamOnPinnedMemory) {
  recorded_block_waits_for_stream(std::make_shared<PinnedHostResource>());
}

// Expandable segments at the mark lend another stream's free pages: the
// borrowing stream's work must wait, on the device, for the work the owner
// queued before the free. Here the owner's memset waits behind a gate; if
// the borrower did not wait, its memset would run first and the owner's
// would overwrite it.
TEST_F(GpuAllocatorTest, ALentBlocksNewStreamWaitsForItsOwnersWork) {
  auto res = std::make_shared<CudaDeviceResource>(0);
  if (!res->supports_virtual_memory()) GTEST_SKIP() << "device 0 has no VMM support";
  AllocatorOptions o;
  o.expandable_segments = AllocatorOptions::Expandable::kOn;
  o.thread_cache = false;
  // Streams outlive the allocator: a segment keeps its stream's handle.
  Stream borrower;
  GatedStream owner;
  CachingAllocator a(res, o);
  constexpr std::size_t n = 8 * MiB;
  {
    void* p = a.allocate(n, owner.id());
    GENESIS_CUDA_CHECK(cudaMemsetAsync(p, 0x11, n, reinterpret_cast<cudaStream_t>(owner.id())));
    a.deallocate(p);
    void* q = a.allocate(n, borrower.id());  // mapping more would pass the mark: p's pages are lent
    EXPECT_EQ(q, p);
    EXPECT_EQ(a.stats().num_stream_borrows, 1);
    EXPECT_EQ(a.stats().num_upstream_frees, 0) << "pages were unmapped instead";
    GENESIS_CUDA_CHECK(cudaMemsetAsync(q, 0x22, n, borrower.stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(cudaStreamQuery(borrower.stream), cudaErrorNotReady) << "the borrower did not wait for the owner";
    owner.open();
    GENESIS_CUDA_CHECK(cudaStreamSynchronize(borrower.stream));
    EXPECT_TRUE(device_check(q, n, 0x22)) << "the owner's earlier work overwrote the borrower's";
    a.deallocate(q);
  }
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(res->outstanding_events(), 0u);
}

// Several threads, several streams, real cudaMemsetAsync on every block.
TEST_F(GpuAllocatorTest, ConcurrentStress) {
  auto dev = std::make_shared<CudaDeviceResource>(0);
  CachingAllocator a(dev);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(std::make_unique<Stream>());
  LiveRanges ranges;
  std::atomic<int> overlaps{0};
  const int threads = 8;
  const int ops = scaled(4000);
  auto worker = [&](int index) {
    std::mt19937_64 rng(static_cast<unsigned>(index));
    std::vector<std::pair<void*, StreamId>> live;
    for (int i = 0; i < ops; ++i) {
      if (live.size() < 16 && rng() % 2 == 0) {
        const std::size_t n = rng() % 10 == 0 ? 1 * MiB + rng() % (32 * MiB) : 1 + rng() % (256 * KiB);
        const StreamId s = streams[rng() % streams.size()]->id();
        void* p = a.allocate(n, s);
        if (!ranges.insert(addr_of(p), round512(n)).empty()) overlaps.fetch_add(1);
        (void)cudaMemsetAsync(p, index, n, reinterpret_cast<cudaStream_t>(s));
        if (rng() % 10 == 0) a.record_stream(p, streams[rng() % streams.size()]->id());
        live.emplace_back(p, s);
      } else if (!live.empty()) {
        const std::size_t k = rng() % live.size();
        (void)ranges.erase(addr_of(live[k].first));
        a.deallocate(live[k].first);
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (auto& [p, s] : live) {
      (void)ranges.erase(addr_of(p));
      a.deallocate(p);
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker, i);
  std::thread maint([&] {
    for (int i = 0; i < 20; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      a.empty_cache();
      EXPECT_TRUE(SnapshotConsistent(a.snapshot()));
    }
  });
  for (auto& t : ts) t.join();
  maint.join();
  EXPECT_EQ(overlaps.load(), 0);
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.num_allocs, s.num_frees);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(dev->outstanding_events(), 0u);
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis::memory::testing_support
