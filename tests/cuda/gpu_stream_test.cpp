// GPU tests of streams, events, the current stream, device properties and
// peer access (genesis/cuda/stream.h, genesis/cuda/device_properties.h).
// Every test skips with a message when the machine has no usable GPU.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::cuda {
namespace {

class GpuStream : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): stream and device tests skipped";
    }
  }
};

using GpuDevice = GpuStream;

#if GENESIS_WITH_CUDA

// Holds a stream busy with a host callback until open(): work stays "in
// flight" deterministically, without a kernel. The destructor opens the gate
// and drains, so a failing test cannot leave the callback spinning.
class Gate {
 public:
  explicit Gate(const Stream& s) : stream_(s) {
    GENESIS_CUDA_CHECK(cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(s.id()), &Gate::wait, this));
  }
  ~Gate() {
    open();
    (void)cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream_.id()));
  }
  void open() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* gate = static_cast<Gate*>(self);
    while (!gate->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  Stream stream_;
  std::atomic<bool> open_{false};
};

TEST_F(GpuStream, CreateQuerySynchronize) {
  const Stream s = Stream::create();
  EXPECT_NE(s.id(), 0u);
  EXPECT_EQ(s.device(), current_device());
  EXPECT_EQ(s.priority(), 0);
  EXPECT_FALSE(s.is_default());
  EXPECT_TRUE(s.query());
  {
    Gate gate(s);
    EXPECT_FALSE(s.query()) << "a stream held by a host callback reports work pending";
    gate.open();
    s.synchronize();
    EXPECT_TRUE(s.query());
  }
  const Stream blocking = Stream::create(kCurrentDevice, 0, /*non_blocking=*/false);
  unsigned flags = 0;
  GENESIS_CUDA_CHECK(cudaStreamGetFlags(reinterpret_cast<cudaStream_t>(blocking.id()), &flags));
  EXPECT_EQ(flags & cudaStreamNonBlocking, 0u);
  GENESIS_CUDA_CHECK(cudaStreamGetFlags(reinterpret_cast<cudaStream_t>(s.id()), &flags));
  EXPECT_NE(flags & cudaStreamNonBlocking, 0u);
}

TEST_F(GpuStream, PrioritiesFollowTheDeviceRange) {
  const auto [least, greatest] = priority_range();
  EXPECT_LE(greatest, least);
  const Stream urgent = Stream::create(kCurrentDevice, greatest);
  EXPECT_EQ(urgent.priority(), greatest);
  int p = 0;
  GENESIS_CUDA_CHECK(cudaStreamGetPriority(reinterpret_cast<cudaStream_t>(urgent.id()), &p));
  EXPECT_EQ(p, greatest);
  EXPECT_THROW((void)Stream::create(kCurrentDevice, greatest - 1), InvalidArgumentError);
  EXPECT_THROW((void)Stream::create(kCurrentDevice, least + 1), InvalidArgumentError);
  EXPECT_THROW((void)Stream::create(device_count()), InvalidArgumentError);
}

TEST_F(GpuStream, CopiesShareOwnership) {
  Stream copy;
  {
    const Stream original = Stream::create();
    copy = original;
    EXPECT_EQ(copy, original);
  }
  // The original is gone; the copy keeps the stream alive and usable.
  void* buf = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
  GENESIS_CUDA_CHECK(cudaMemsetAsync(buf, 1, 1 << 20, reinterpret_cast<cudaStream_t>(copy.id())));
  EXPECT_NO_THROW(copy.synchronize());
  GENESIS_CUDA_CHECK(cudaFree(buf));
  EXPECT_NE(Stream::create(), Stream::create());
}

TEST_F(GpuStream, DefaultAndExternalStreams) {
  const Stream d = default_stream();
  EXPECT_TRUE(d.is_default());
  EXPECT_EQ(d.id(), per_thread_default_stream() ? 2u : 0u);
  EXPECT_EQ(d.device(), current_device());
  EXPECT_NO_THROW(d.synchronize());
  EXPECT_NO_THROW((void)d.query());

  cudaStream_t raw = nullptr;
  GENESIS_CUDA_CHECK(cudaStreamCreateWithPriority(&raw, cudaStreamNonBlocking, priority_range().second));
  {
    const Stream wrapped = Stream::from_id(reinterpret_cast<memory::StreamId>(raw));
    EXPECT_EQ(wrapped.device(), current_device());
    EXPECT_EQ(wrapped.priority(), priority_range().second);
    EXPECT_NO_THROW(wrapped.synchronize());
  }
  // Not owned: still valid after the wrapper died.
  EXPECT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
  GENESIS_CUDA_CHECK(cudaStreamDestroy(raw));
}

TEST_F(GpuStream, CurrentStreamIsPerThreadAndGuardsRestore) {
  const Stream initial = current_stream();
  EXPECT_EQ(initial, default_stream());
  const Stream a = Stream::create();
  const Stream b = Stream::create();
  {
    StreamGuard ga(a);
    EXPECT_EQ(current_stream(), a);
    EXPECT_EQ(ga.previous_stream(), initial);
    {
      StreamGuard gb(b);
      EXPECT_EQ(current_stream(), b);
      // Another thread has its own current stream.
      Stream seen;
      std::thread t([&] { seen = current_stream(a.device()); });
      t.join();
      EXPECT_EQ(seen, default_stream(a.device()));
    }
    EXPECT_EQ(current_stream(), a);
  }
  EXPECT_EQ(current_stream(), initial);
  set_current_stream(b);
  EXPECT_EQ(current_stream(), b);
  set_current_stream(initial);
  EXPECT_EQ(current_stream(), initial);
}

TEST_F(GpuStream, GuardSwitchesAndRestoresTheDevice) {
  if (device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const int before = current_device();
  const int other = before == 0 ? 1 : 0;
  const Stream s = Stream::create(other);
  EXPECT_EQ(s.device(), other);
  {
    StreamGuard g(s);
    EXPECT_EQ(current_device(), other);
    EXPECT_EQ(current_stream(), s);
    EXPECT_EQ(current_stream(before), default_stream(before)) << "other devices' current streams are unchanged";
    EXPECT_EQ(g.previous_device(), before);
  }
  EXPECT_EQ(current_device(), before);
  EXPECT_EQ(current_stream(other), default_stream(other));
}

TEST_F(GpuStream, EventsRecordQueryWaitAndTime) {
  const Stream producer = Stream::create();
  const Stream consumer = Stream::create();
  Event e;
  EXPECT_TRUE(e.query()) << "an event never recorded is complete";
  EXPECT_NO_THROW(e.synchronize());
  {
    Gate gate(producer);
    e.record(producer);
    EXPECT_TRUE(e.is_created());
    EXPECT_EQ(e.device(), producer.device());
    EXPECT_FALSE(e.query());
    consumer.wait(e);
    Event after;
    after.record(consumer);
    EXPECT_FALSE(after.query()) << "the consumer must wait for the producer's event";
    gate.open();
    after.synchronize();
    EXPECT_TRUE(e.query());
  }

  Event start(true), end(true);
  void* buf = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&buf, 64 << 20));
  start.record(producer);
  for (int i = 0; i < 4; ++i)
    GENESIS_CUDA_CHECK(cudaMemsetAsync(buf, i, 64 << 20, reinterpret_cast<cudaStream_t>(producer.id())));
  end.record(producer);
  end.synchronize();
  const float ms = start.elapsed_ms(end);
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
  GENESIS_CUDA_CHECK(cudaFree(buf));

  Event untimed;
  untimed.record(producer);
  untimed.synchronize();
  EXPECT_THROW((void)untimed.elapsed_ms(end), InvalidArgumentError);
  Event never(true);
  EXPECT_THROW((void)start.elapsed_ms(never), InvalidArgumentError);

  Event moved = std::move(start);
  EXPECT_TRUE(moved.is_created());
  EXPECT_FALSE(start.is_created());
  {
    StreamGuard g(consumer);
    Event on_current;
    on_current.record();
    on_current.synchronize();
    EXPECT_TRUE(on_current.query());
  }
}

TEST_F(GpuStream, BlockUsedOnADroppedStreamFreesSafely) {
  // Note [Streams are recycled, never destroyed]: the allocator records an
  // event on every stream a block was used on when the block is freed; the
  // Stream object may be long gone by then (this crashed in the driver when
  // streams were destroyed with their last copy).
  memory::CachingAllocator& alloc = memory::cuda_allocator(0);
  void* p = alloc.allocate(1 << 20);
  memory::StreamId id = 0;
  {
    Stream s = Stream::create(0);
    id = s.id();
    alloc.record_stream(p, s.id());
  }
  alloc.deallocate(p);  // records an event on the (recycled, still valid) stream
  Stream again = Stream::create(0);
  EXPECT_EQ(again.id(), id) << "a dropped stream is handed out again";
  Stream other = Stream::create(0);
  EXPECT_NE(other.id(), again.id()) << "live streams are distinct";
  again.synchronize();
  synchronize();
}

TEST_F(GpuStream, EventStaysOnItsDevice) {
  if (device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  Event e;
  e.record(Stream::create(0));
  EXPECT_THROW(e.record(Stream::create(1)), InvalidArgumentError);
  // Waiting on another device's event is allowed.
  const Stream s1 = Stream::create(1);
  EXPECT_NO_THROW(s1.wait(e));
  s1.synchronize();
}

TEST_F(GpuDevice, PropertiesAreCachedAndPlausible) {
  const int d = current_device();
  const DeviceProperties& p = get_device_properties();
  EXPECT_EQ(&p, &get_device_properties(d)) << "cached: one object per device";
  EXPECT_EQ(p.index, d);
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(get_device_name(), p.name);
  EXPECT_GE(p.major, 5);
  EXPECT_EQ(get_device_capability(d), std::make_pair(p.major, p.minor));
  const std::size_t reported = mem_get_info(d).total_bytes;  // same memory, maybe counted a little differently
  EXPECT_LE(p.total_memory > reported ? p.total_memory - reported : reported - p.total_memory, p.total_memory / 100)
      << p.total_memory << " bytes in the properties, " << reported << " from cudaMemGetInfo";
  EXPECT_GT(p.multi_processor_count, 0);
  EXPECT_EQ(p.warp_size, 32);
  EXPECT_GE(p.max_threads_per_block, 1024);
  EXPECT_GT(p.l2_cache_size, 0u);
  EXPECT_GT(p.memory_bus_width, 0);
  EXPECT_GE(p.shared_memory_per_block_optin, p.shared_memory_per_block);
  EXPECT_GE(p.pci_bus_id.size(), 12u) << p.pci_bus_id;  // "0000:1b:00.0"
  EXPECT_NE(p.pci_bus_id.find(':'), std::string::npos) << p.pci_bus_id;
  EXPECT_EQ(p.uuid_string().rfind("GPU-", 0), 0u);
  EXPECT_NE(p.uuid, (std::array<std::uint8_t, 16>{}));
  std::printf("[ info     ] cuda:%d %s sm_%d%d, %d SMs, %.1f GiB, L2 %zu KiB, bus %d bit, %s, %s\n", d,
              p.name.c_str(), p.major, p.minor, p.multi_processor_count,
              static_cast<double>(p.total_memory) / (1 << 30), p.l2_cache_size >> 10, p.memory_bus_width,
              p.pci_bus_id.c_str(), p.uuid_string().c_str());
  EXPECT_THROW((void)get_device_properties(device_count()), InvalidArgumentError);
  EXPECT_THROW((void)get_device_properties(-2), InvalidArgumentError);
}

TEST_F(GpuDevice, PropertiesFromManyThreadsAreOneObject) {
  std::vector<const DeviceProperties*> seen(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { seen[i] = &get_device_properties(0); });
  for (auto& t : threads) t.join();
  for (auto* p : seen) EXPECT_EQ(p, seen[0]);
}

TEST_F(GpuDevice, SynchronizeWaitsForQueuedWork) {
  const Stream s = Stream::create();
  {
    Gate gate(s);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate.open();
    });
    synchronize();  // returns only after the gate opened
    EXPECT_TRUE(s.query());
    opener.join();
  }
  const int before = current_device();
  EXPECT_NO_THROW(synchronize(device_count() - 1));
  EXPECT_EQ(current_device(), before);
  EXPECT_THROW(synchronize(device_count()), InvalidArgumentError);
}

TEST_F(GpuDevice, PeerAccess) {
  EXPECT_TRUE(can_access_peer(0, 0));
  EXPECT_NO_THROW(enable_peer_access(0, 0));
  EXPECT_THROW((void)can_access_peer(0, device_count()), InvalidArgumentError);
  if (device_count() < 2) GTEST_SKIP() << "peer access between GPUs needs two";
  if (!can_access_peer(0, 1)) {
    EXPECT_THROW(enable_peer_access(0, 1), CudaError);
    GTEST_SKIP() << "GPUs 0 and 1 cannot access each other";
  }
  // Idempotent and thread-safe, also when CUDA already has it enabled.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      try {
        enable_peer_access(0, 1);
        enable_peer_access(1, 0);
      } catch (...) {
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  {
    DeviceGuard g(0);
    EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    (void)cudaGetLastError();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis::cuda
