// The memory sources (Note [Memory sources]): a trace replayed at max speed
// and at a speed, its figures against what the trace implies, sites, OOMs;
// the allocator source; the process sources on this process and on
// children; NVML's absence on machines without a driver.
#include "genesis/debug/memory_source.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "debug/trace_test_util.h"
#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/debug/trace.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/memory/publish.h"
#include "genesis/memory/simulated_device.h"

namespace genesis::debug {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kMs = 1'000'000;  // ns
constexpr std::uint64_t kFar = std::uint64_t{1} << 62;

std::uint64_t round512(std::uint64_t n) { return (n + 511) / 512 * 512; }

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using testing_support::error_of;

// alloc A (1000 B) at 0 ms, B (3000 B) at 10 ms, free A at 20 ms, alloc C
// (700 B) at 30 ms; time stamps in us from 5000 (trace time starts at 0).
Trace small_timed_trace() {
  TraceBuilder b("small");
  b.alloc(0xA, 1000, 0, 5000);
  b.alloc(0xB, 3000, 0, 15000);
  b.free(0xA, 0, 25000);
  b.alloc(0xC, 700, 0, 35000);
  return b.finish();
}

// `n` allocations of 4 KiB spread evenly over `ms` milliseconds, each freed
// by the next.
Trace spread_trace(int n, int ms) {
  TraceBuilder b("spread");
  for (int i = 0; i < n; ++i) {
    const std::uint64_t t = static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(ms) * 1000 / (n - 1);
    b.alloc(0x1000 + static_cast<std::uintptr_t>(i), 4096, 0, t);
    if (i > 0) b.free(0x1000 + static_cast<std::uintptr_t>(i - 1), 0, t);
  }
  return b.finish();
}

// --- trace source -----------------------------------------------------------

TEST(TraceSourceTest, SamplesFollowTraceTime) {
  auto src = open_trace_source(small_timed_trace());
  StopFlag stop{false};
  ASSERT_EQ(src->devices().size(), 1u);
  EXPECT_EQ(src->devices()[0].id, "0");
  EXPECT_EQ(src->devices()[0].total, std::size_t{128} << 30);
  EXPECT_EQ(src->now_ns(), 0u);

  ASSERT_TRUE(src->advance_to(15 * kMs, stop));
  EXPECT_EQ(src->now_ns(), 15 * kMs);
  MemorySample s = src->sample("0");
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.time_ns, 15 * kMs);
  EXPECT_EQ(s.allocated, round512(1000) + round512(3000));
  EXPECT_EQ(s.num_allocs, 2u);
  EXPECT_EQ(s.total, std::size_t{128} << 30);
  EXPECT_EQ(s.used, s.reserved);
  EXPECT_EQ(s.free, s.total - s.used);
  EXPECT_GE(s.reserved, s.allocated);
  EXPECT_EQ(s.cached, s.reserved - s.allocated);
  EXPECT_GE(s.active, s.allocated);
  EXPECT_FALSE(src->ended());

  ASSERT_TRUE(src->advance_to(25 * kMs, stop));
  EXPECT_EQ(src->sample("0").allocated, round512(3000));
  EXPECT_GE(src->sample("0").free_blocks, 1u);  // A's block

  EXPECT_FALSE(src->advance_to(kFar, stop));  // the trace ends at 30 ms
  EXPECT_TRUE(src->ended());
  EXPECT_EQ(src->now_ns(), 30 * kMs);
  EXPECT_EQ(src->sample("0").allocated, round512(3000) + round512(700));
  EXPECT_NE(src->end_reason().find("trace finished"), std::string::npos) << src->end_reason();
  EXPECT_FALSE(src->advance_to(kFar, stop));
}

TEST(TraceSourceTest, PeaksBetweenSamplesAreSeen) {
  TraceBuilder b("peak");
  b.alloc(0x1, 10 << 20, 0, 0);
  b.free(0x1, 0, 1000);
  b.alloc(0x2, 1 << 20, 0, 2000);
  auto src = open_trace_source(b.finish());
  StopFlag stop{false};
  ASSERT_TRUE(src->advance_to(1500 * 1000, stop));  // after the free: nothing live
  const MemorySample s = src->sample("0");
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.peak_allocated, std::uint64_t{10} << 20);
  EXPECT_GE(s.peak_reserved, std::uint64_t{10} << 20);
  EXPECT_FALSE(src->advance_to(kFar, stop));
  EXPECT_EQ(src->sample("0").peak_allocated, std::uint64_t{10} << 20);
}

TEST(TraceSourceTest, AllocatedIsTheLiveBytesRoundedTo512) {
  // Random sizes, some freed: after each step, allocated == the live sizes rounded.
  TraceBuilder b("random");
  std::vector<std::uint64_t> live(64, 0);
  std::vector<std::uint64_t> expect;
  std::uint64_t sum = 0, seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const std::size_t k = (seed >> 33) % live.size();
    if (live[k] != 0) {
      b.free(0x100000 + k, 0, static_cast<std::uint64_t>(i));
      sum -= round512(live[k]);
      live[k] = 0;
    } else {
      live[k] = 1 + (seed >> 20) % (3 << 20);  // up to 3 MiB: both pools
      b.alloc(0x100000 + k, live[k], 0, static_cast<std::uint64_t>(i));
      sum += round512(live[k]);
    }
    expect.push_back(sum);
  }
  auto src = open_trace_source(b.finish());
  StopFlag stop{false};
  for (std::uint64_t t = 0; t < 2000; t += 97) {
    src->advance_to(t * 1000, stop);
    EXPECT_EQ(src->sample("0").allocated, expect[t]) << "at event " << t;
  }
}

TEST(TraceSourceTest, MaxSpeedDoesNotSleep) {
  auto src = open_trace_source(spread_trace(200, 10'000));  // ten seconds of trace
  StopFlag stop{false};
  const auto t0 = Clock::now();
  EXPECT_FALSE(src->advance_to(kFar, stop));
  EXPECT_LT(ms_since(t0), 2000.0);
  EXPECT_EQ(src->now_ns(), 10'000 * kMs);
  EXPECT_NE(src->describe().find("max speed"), std::string::npos) << src->describe();
}

TEST(TraceSourceTest, PacedAtItsSpeed) {
  TraceSourceOptions o;
  o.speed = 10;
  auto src = open_trace_source(spread_trace(100, 200), o);  // 200 ms at 10x: ~20 ms
  EXPECT_NE(src->describe().find("at 10x"), std::string::npos) << src->describe();
  StopFlag stop{false};
  const auto t0 = Clock::now();
  std::uint64_t t = 0;
  int steps = 0;
  while (src->advance_to(t += 5 * kMs, stop)) ++steps;  // sampled every 5 ms of trace time
  const double wall = ms_since(t0);
  EXPECT_GE(wall, 15.0);
  EXPECT_LT(wall, 1000.0);
  EXPECT_GE(steps, 35);
  EXPECT_EQ(src->now_ns(), 200 * kMs);

  // Real speed: half of a 200 ms trace takes about 100 ms.
  o.speed = 1;
  auto real = open_trace_source(spread_trace(100, 200), o);
  const auto t1 = Clock::now();
  EXPECT_TRUE(real->advance_to(100 * kMs, stop));
  const double half = ms_since(t1);
  EXPECT_GE(half, 90.0);
  EXPECT_LT(half, 1500.0);
  EXPECT_EQ(real->now_ns(), 100 * kMs);
}

TEST(TraceSourceTest, StopEndsASlowReplayQuickly) {
  TraceSourceOptions o;
  o.speed = 0.001;  // 10 s of trace would take hours
  auto src = open_trace_source(spread_trace(100, 10'000), o);
  StopFlag stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.store(true);
  });
  const auto t0 = Clock::now();
  EXPECT_FALSE(src->advance_to(kFar, stop));
  const double wall = ms_since(t0);
  stopper.join();
  EXPECT_LT(wall, 1000.0);
  EXPECT_FALSE(src->ended());
}

TEST(TraceSourceTest, WithoutTimesEachEventIsOneMicrosecond) {
  TraceBuilder b("untimed");
  for (int i = 0; i < 5; ++i) b.alloc(0x10 + static_cast<std::uintptr_t>(i), 100);
  auto src = open_trace_source(b.finish());
  EXPECT_NE(src->describe().find("1 us per event"), std::string::npos) << src->describe();
  StopFlag stop{false};
  ASSERT_TRUE(src->advance_to(2500, stop));  // events at 0, 1000, 2000 ns
  EXPECT_EQ(src->sample("0").num_allocs, 3u);
  EXPECT_FALSE(src->advance_to(kFar, stop));
  EXPECT_EQ(src->now_ns(), 4000u);
}

TEST(TraceSourceTest, TimesGoingBackAreClamped) {
  TraceBuilder b("backwards");
  b.alloc(0x1, 100, 0, 1000);
  b.alloc(0x2, 100, 0, 400);   // before the first: trace time 0
  b.alloc(0x3, 100, 0, 3000);  // 2 ms
  b.alloc(0x4, 100, 0, 2500);  // back: stays at 2 ms
  b.alloc(0x5, 100, 0, 4000);  // 3 ms
  auto src = open_trace_source(b.finish());
  StopFlag stop{false};
  ASSERT_TRUE(src->advance_to(0, stop));
  EXPECT_EQ(src->sample("0").num_allocs, 2u);
  ASSERT_TRUE(src->advance_to(2 * kMs, stop));
  EXPECT_EQ(src->sample("0").num_allocs, 4u);
  EXPECT_FALSE(src->advance_to(kFar, stop));
  EXPECT_EQ(src->now_ns(), 3 * kMs);
}

TEST(TraceSourceTest, SitesGroupLiveAllocations) {
  TraceBuilder b("sites");
  b.alloc(0x1, 3 << 20, 0, 0, "model.py:5 in forward|train.py:9 in step");
  b.alloc(0x2, 1000, 0, 1, "model.py:5 in forward|train.py:9 in step");
  b.alloc(0x3, 2 << 20, 0, 2, "data.py:3 in load");
  b.alloc(0x4, 600, 0, 3);  // no site
  b.alloc(0x5, 5 << 20, 0, 4, "gone.py:1 in tmp");
  b.free(0x5, 0, 5);
  auto src = open_trace_source(b.finish());
  EXPECT_TRUE(src->has_sites());
  StopFlag stop{false};
  EXPECT_FALSE(src->advance_to(kFar, stop));
  const std::vector<SiteStat> sites = src->sites("0");
  ASSERT_EQ(sites.size(), 3u);
  EXPECT_EQ(sites[0].site, "model.py:5 in forward\ntrain.py:9 in step");
  EXPECT_EQ(sites[0].bytes, round512(3 << 20) + round512(1000));
  EXPECT_EQ(sites[0].count, 2u);
  EXPECT_EQ(sites[1].site, "data.py:3 in load");
  EXPECT_EQ(sites[1].bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(sites[2].site, "<unknown>");
  EXPECT_EQ(sites[2].bytes, 1024u);
  EXPECT_EQ(sites[2].count, 1u);

  auto plain = open_trace_source(small_timed_trace());
  EXPECT_FALSE(plain->has_sites());
  EXPECT_TRUE(plain->sites("0").empty());
}

TEST(TraceSourceTest, OutOfMemoryIsCountedAndTheReplayGoesOn) {
  TraceBuilder b("oom");
  b.alloc(0x1, 10 << 20, 0, 0);
  b.alloc(0x2, 10 << 20, 0, 1);  // does not fit beside the first
  b.free(0x2, 0, 2);             // a no-op
  b.free(0x1, 0, 3);
  b.alloc(0x3, 10 << 20, 0, 4);  // fits again
  TraceSourceOptions o;
  o.capacity = 16 << 20;
  auto src = open_trace_source(b.finish(), o);
  StopFlag stop{false};
  EXPECT_FALSE(src->advance_to(kFar, stop));
  const MemorySample s = src->sample("0");
  EXPECT_EQ(s.num_ooms, 1u);
  EXPECT_EQ(s.allocated, std::uint64_t{10} << 20);
  EXPECT_EQ(s.total, std::uint64_t{16} << 20);
  EXPECT_LE(s.used, s.total);
  EXPECT_NE(src->end_reason().find("1 allocations out of memory"), std::string::npos) << src->end_reason();

  const std::vector<memory::MemoryEvent> ev = src->events("0");
  ASSERT_EQ(ev.size(), 4u);  // alloc, oom, free, alloc (the no-op free is not an event)
  EXPECT_EQ(ev[0].action, memory::EventAction::kAlloc);
  EXPECT_EQ(ev[1].action, memory::EventAction::kOOM);
  EXPECT_EQ(ev[2].action, memory::EventAction::kFree);
  EXPECT_EQ(ev[3].action, memory::EventAction::kAlloc);
  EXPECT_EQ(ev[3].time_ns, 4000u);
  EXPECT_EQ(ev[3].size, std::uint64_t{10} << 20);
}

TEST(TraceSourceTest, BadArguments) {
  auto src = open_trace_source(small_timed_trace());
  EXPECT_NE(error_of<InvalidArgumentError>([&] { (void)src->sample("1"); }).find("unknown device '1'"),
            std::string::npos);
  TraceSourceOptions o;
  o.config = "nope";
  EXPECT_NE(error_of<InvalidArgumentError>([&] { (void)open_trace_source(small_timed_trace(), o); })
                .find("unknown configuration 'nope'"),
            std::string::npos);
  Trace broken = small_timed_trace();
  broken.time_us.pop_back();
  EXPECT_NE(error_of<InvalidArgumentError>([&] { (void)open_trace_source(broken); }).find("time_us has"),
            std::string::npos);
}

class TraceSourceFileTest : public testing_support::TempDirTest {};

TEST_F(TraceSourceFileTest, OpensAFileWithSites) {
  const std::string p = write_plain("t.csv",
                                    "time_us,action,addr,size,stream,site\n"
                                    "0,alloc,0x10,4096,0,\"a.py:1 in f\"\n"
                                    "10,alloc,0x20,512,0,\n");
  TraceSourceOptions o;
  o.config = "genesis-classic";
  auto src = open_trace_source(p, o);
  EXPECT_NE(src->describe().find("config genesis-classic"), std::string::npos) << src->describe();
  EXPECT_NE(src->devices()[0].name.find("t.csv"), std::string::npos) << src->devices()[0].name;
  StopFlag stop{false};
  EXPECT_FALSE(src->advance_to(kFar, stop));
  const auto sites = src->sites("0");
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].site, "a.py:1 in f");
  EXPECT_NE(error_of<InvalidArgumentError>([&] { (void)open_trace_source(path("missing.csv")); }).find("cannot open"),
            std::string::npos);
}

TEST(ParseSpeedTest, MaxOrAPositiveNumber) {
  EXPECT_EQ(parse_speed("max"), 0.0);
  EXPECT_EQ(parse_speed("10"), 10.0);
  EXPECT_EQ(parse_speed("2.5x"), 2.5);
  EXPECT_EQ(parse_speed(" 1 "), 1.0);
  for (const char* bad : {"0", "-1", "abc", "", "inf", "nan", "1e400"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(error_of<InvalidArgumentError>([&] { (void)parse_speed(bad); }).find("invalid speed"),
              std::string::npos);
  }
}

TEST(MemorySampleTest, DerivedFigures) {
  MemorySample s;
  EXPECT_EQ(s.fragmentation(), 0.0);
  EXPECT_EQ(s.utilization_percent(), 0.0);
  s.reserved = 1000;
  s.allocated = 750;
  s.total = 4000;
  s.used = 1000;
  EXPECT_DOUBLE_EQ(s.fragmentation(), 0.25);
  EXPECT_DOUBLE_EQ(s.utilization_percent(), 25.0);
}

// --- allocator source -------------------------------------------------------

TEST(AllocatorSourceTest, ExactFiguresSitesAndTheSteadyClock) {
  auto dev = std::make_shared<memory::SimulatedDevice>(std::size_t{1} << 30, 3);
  memory::CachingAllocator alloc(dev);
  void* a = nullptr;
  void* b = nullptr;
  {
    memory::ScopedAllocationContext ctx("layer.py:4 in forward");
    a = alloc.allocate(3 << 20);
  }
  b = alloc.allocate(1000);
  auto src = open_allocator_source({NamedAllocator{"sim:3", "simulated", &alloc}});
  ASSERT_EQ(src->devices().size(), 1u);
  EXPECT_EQ(src->devices()[0].id, "sim:3");
  EXPECT_EQ(src->devices()[0].total, std::uint64_t{1} << 30);
  const MemorySample s = src->sample("sim:3");
  EXPECT_TRUE(s.exact);
  EXPECT_EQ(s.allocated, (std::uint64_t{3} << 20) + 1024);
  EXPECT_EQ(s.num_allocs, 2u);
  EXPECT_EQ(s.total, std::uint64_t{1} << 30);
  EXPECT_EQ(s.used, s.reserved);
  EXPECT_TRUE(src->has_sites());
  const auto sites = src->sites("sim:3");
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].site, "layer.py:4 in forward");
  EXPECT_EQ(sites[0].bytes, std::uint64_t{3} << 20);
  EXPECT_EQ(sites[1].site, "<unknown>");
  EXPECT_THROW((void)src->sample("0"), InvalidArgumentError);

  StopFlag stop{false};
  const std::uint64_t t0 = src->now_ns();
  const auto w0 = Clock::now();
  EXPECT_TRUE(src->advance_to(t0 + 30 * kMs, stop));
  EXPECT_GE(src->now_ns(), t0 + 30 * kMs);
  EXPECT_GE(ms_since(w0), 25.0);
  stop.store(true);
  const auto w1 = Clock::now();
  EXPECT_FALSE(src->advance_to(src->now_ns() + 10'000 * kMs, stop));
  EXPECT_LT(ms_since(w1), 500.0);
  alloc.deallocate(a);
  alloc.deallocate(b);
}

TEST(AllocatorSourceTest, PeaksCountFromTheOpening) {
  auto dev = std::make_shared<memory::SimulatedDevice>(std::size_t{1} << 30, 4);
  memory::CachingAllocator alloc(dev);
  alloc.deallocate(alloc.allocate(8 << 20));  // a peak before the source opened
  auto src = open_allocator_source({NamedAllocator{"sim:4", "", &alloc}});
  EXPECT_EQ(src->devices()[0].name, "sim:4");
  EXPECT_EQ(src->sample("sim:4").peak_allocated, 0u);  // not the 8 MiB of before
  void* a = alloc.allocate(2 << 20);
  EXPECT_EQ(src->sample("sim:4").peak_allocated, std::uint64_t{2} << 20);  // sampled
  alloc.deallocate(a);
  alloc.deallocate(alloc.allocate(16 << 20));  // a new high no sample catches
  const MemorySample s = src->sample("sim:4");
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.peak_allocated, std::uint64_t{16} << 20);
  alloc.reset_peak_stats();
  EXPECT_EQ(src->sample("sim:4").peak_allocated, std::uint64_t{16} << 20);  // monotone
}

TEST(AllocatorSourceTest, ProcessCudaAllocatorsNeedAGpu) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU (see gpu_sources_test)";
  EXPECT_TRUE(process_cuda_allocators().empty());
}

// --- NVML -------------------------------------------------------------------

TEST(NvmlSourceTest, WithoutTheDriverTheErrorNamesTheOtherSources) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) {
    dlclose(lib);
    GTEST_SKIP() << "this machine has NVML";
  }
  EXPECT_FALSE(nvml_available());
  const std::string msg = error_of<Error>([] { (void)open_nvml_source(); });
  EXPECT_NE(msg.find("NVML is not available (libnvidia-ml.so.1: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("no NVIDIA driver on this machine"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--trace FILE"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--pid PID / -- CMD"), std::string::npos) << msg;
  // A process can still be watched, on "host" only.
  EXPECT_THROW((void)open_process_source(getpid(), {0}), InvalidArgumentError);
}

// --- process sources --------------------------------------------------------

TEST(ProcessSourceTest, ThisProcess) {
  auto src = open_process_source(getpid());
  const auto devices = src->devices();
  ASSERT_FALSE(devices.empty());
  if (!nvml_available()) {
    ASSERT_EQ(devices.size(), 1u);
    EXPECT_EQ(devices[0].id, "host");
    EXPECT_GT(devices[0].total, 0u);
  }
  const MemorySample s = src->sample(devices[0].id);
  EXPECT_GT(s.host_rss, 0u);
  EXPECT_GT(s.total, 0u);
  if (devices[0].id == "host") {
    EXPECT_EQ(s.used, s.host_rss);
    if (!s.exact) {
      EXPECT_EQ(s.allocated, s.host_rss);
    }
  }
  EXPECT_FALSE(src->ended());
  EXPECT_NE(src->describe().find("pid " + std::to_string(getpid())), std::string::npos) << src->describe();
  StopFlag stop{false};
  EXPECT_TRUE(src->advance_to(src->now_ns() + 10 * kMs, stop));
  EXPECT_EQ(child_exit_status(*src), -1);
}

TEST(ProcessSourceTest, MissingPidIsAClearError) {
  // Beyond any pid_max (at most 2^22).
  const std::string msg = error_of<InvalidArgumentError>([] { (void)open_process_source(999'999'999); });
  EXPECT_NE(msg.find("no process with pid 999999999"), std::string::npos) << msg;
  EXPECT_THROW((void)open_process_source(0), InvalidArgumentError);
  EXPECT_THROW((void)open_process_source(-5), InvalidArgumentError);
}

TEST(ProcessSourceTest, ChildEndsWithItsStatus) {
  const auto t0 = Clock::now();
  auto src = open_child_source({"/bin/sh", "-c", "sleep 0.2; exit 3"});
  EXPECT_EQ(child_exit_status(*src), -1);
  EXPECT_NE(src->describe().find("sleep 0.2; exit 3"), std::string::npos) << src->describe();
  StopFlag stop{false};
  int steps = 0;
  while (src->advance_to(src->now_ns() + 20 * kMs, stop) && steps < 500) {
    (void)src->sample(src->devices()[0].id);
    ++steps;
  }
  EXPECT_TRUE(src->ended());
  EXPECT_GE(ms_since(t0), 150.0);
  EXPECT_LT(ms_since(t0), 5000.0);
  EXPECT_EQ(child_exit_status(*src), 3);
  EXPECT_NE(src->end_reason().find("exited with 3"), std::string::npos) << src->end_reason();
  (void)src->sample(src->devices()[0].id);  // a last sample after the end works
}

TEST(ProcessSourceTest, ChildKilledBySignal) {
  auto src = open_child_source({"/bin/sh", "-c", "kill -9 $$"});
  StopFlag stop{false};
  for (int i = 0; i < 500 && src->advance_to(src->now_ns() + 10 * kMs, stop); ++i) {
  }
  EXPECT_EQ(child_exit_status(*src), 128 + 9);
  EXPECT_NE(src->end_reason().find("killed by signal 9"), std::string::npos) << src->end_reason();
}

TEST(ProcessSourceTest, MissingCommandIsAClearError) {
  std::string msg = error_of<InvalidArgumentError>([] { (void)open_child_source({"/no/such/genesis-cmd"}); });
  EXPECT_NE(msg.find("cannot run '/no/such/genesis-cmd': No such file or directory"), std::string::npos) << msg;
  msg = error_of<InvalidArgumentError>([] { (void)open_child_source({"no-such-genesis-command-xyz", "a"}); });
  EXPECT_NE(msg.find("cannot run 'no-such-genesis-command-xyz': No such file or directory"), std::string::npos)
      << msg;
  EXPECT_THROW((void)open_child_source({}), InvalidArgumentError);
}

// The pid in a child source's describe(): "'cmd' (pid N) (...)".
int pid_of(const MemorySource& src) {
  const std::string d = src.describe();
  const std::size_t at = d.find("(pid ");
  return at == std::string::npos ? -1 : std::atoi(d.c_str() + at + 5);
}

TEST(ProcessSourceTest, DestroyedEarlyEndsAndReapsTheChild) {
  auto src = open_child_source({"sleep", "30"});
  const int pid = pid_of(*src);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), 0);
  const auto t0 = Clock::now();
  src.reset();
  EXPECT_LT(ms_since(t0), 3000.0);
  // Gone and reaped: not even a zombie is left.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(ProcessSourceTest, ChildFinishedBeforeTheSourceGoesIsReaped) {
  auto src = open_child_source({"/bin/true"});
  const int pid = pid_of(*src);
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  src.reset();  // never asked whether it ended
  EXPECT_EQ(::kill(pid, 0), -1);
}

// A Genesis program publishing its figures (Note [Published figures]): this
// test binary run again with GENESIS_TEST_PUBLISH_CHILD=1, which only the
// test below sets.
TEST(ProcessSourceHelper, PublishingChild) {
  if (std::getenv("GENESIS_TEST_PUBLISH_CHILD") == nullptr) GTEST_SKIP() << "only as a child of ChildPublishes";
  void* p = nullptr;
  {
    memory::ScopedAllocationContext ctx("child.py:7 in main");
    p = memory::host_allocator().allocate(std::size_t{5} << 20);  // starts publishing (GENESIS_MEM_PUBLISH=1)
  }
  std::this_thread::sleep_for(std::chrono::seconds(20));  // the watcher ends it sooner
  memory::host_allocator().deallocate(p);
}

TEST(ProcessSourceTest, ChildPublishes) {
  char exe[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  ::setenv("GENESIS_TEST_PUBLISH_CHILD", "1", 1);
  auto src = open_child_source({exe, "--gtest_filter=ProcessSourceHelper.PublishingChild"});
  ::unsetenv("GENESIS_TEST_PUBLISH_CHILD");
  const int pid = pid_of(*src);
  ASSERT_GT(pid, 0);
  const std::string host = src->devices().back().id;
  StopFlag stop{false};
  bool exact = false, sited = false;
  MemorySample s;
  std::vector<SiteStat> sites;
  bool published = false;
  for (int i = 0; i < 300 && !(published && (host != "host" || (exact && sited))); ++i) {
    ASSERT_TRUE(src->advance_to(src->now_ns() + 20 * kMs, stop)) << src->end_reason();
    published = memory::read_published(pid).has_value();
    // On a GPU machine the host allocator is not one of the devices.
    if (host != "host") continue;
    s = src->sample(host);
    exact = s.exact && s.allocated >= (std::uint64_t{5} << 20);
    sites = src->sites(host);
    for (const SiteStat& st : sites) sited = sited || st.site == "child.py:7 in main";
  }
  EXPECT_TRUE(published);
  if (host == "host") {
    EXPECT_TRUE(exact) << "allocated " << s.allocated;
    EXPECT_TRUE(sited);
    EXPECT_TRUE(src->has_sites());
    EXPECT_NE(src->describe().find("genesis"), std::string::npos) << src->describe();
    EXPECT_GT(s.host_rss, 0u);
    EXPECT_GE(s.peak_allocated, std::uint64_t{5} << 20);  // a child's peaks all count
  }
  src.reset();  // SIGTERM: the child leaves its file behind ...
  EXPECT_FALSE(memory::read_published(pid).has_value());  // ... which the watcher removes
  EXPECT_NE(::access(memory::published_path(pid).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace genesis::debug
