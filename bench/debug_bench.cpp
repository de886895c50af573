// What the memory debugger costs the program it watches.
//
//   build/debug_bench [--trace FILE] [--seconds S]
//
// 1. Sampling cost: a MemoryDebugger with every tool on samples an
//    allocator source every 0.1 s for S seconds of wall time (default 5)
//    while 10,000 allocations are live (sites read every 10 rounds), and
//    reports the sampler thread's CPU time in percent of one core. The same
//    over NVML when a driver is present (the driver call is most of it).
// 2. History bound: bytes of one device's history after 1 hour and after
//    10 hours of samples at 0.1 s (the bound is 5 MiB per device).
// 3. A trace at --speed max: wall time of the trace source replaying the
//    trace to its end under the sampler (every tool, 0.1 s of trace time)
//    against debug::replay() of the same trace and configuration.
// Output: one RESULT line per figure, then a short table.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/memory_source.h"
#include "genesis/debug/replay.h"
#include "genesis/debug/sample_history.h"
#include "genesis/debug/trace.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"

namespace {

using namespace genesis;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void sampling_cost(double seconds) {
  auto device = std::make_shared<memory::SimulatedDevice>(std::size_t{64} << 30);
  memory::CachingAllocator allocator(device);
  std::vector<void*> live;
  live.reserve(10000);
  {
    memory::ScopedAllocationContext site(memory::intern_location("bench.py:10 in step\nbench.py:40 in main"));
    for (int i = 0; i < 10000; ++i) live.push_back(allocator.allocate(std::size_t{4096} << (i % 8)));
  }
  auto source = debug::open_allocator_source({{"0", "sim:0", &allocator}});
  debug::DebugOptions o;
  o.interval_s = 0.1;
  o.duration_s = seconds;
  debug::MemoryDebugger d(*source, o);
  d.run_for_duration();
  const debug::SamplerCost c = d.cost();
  std::printf("RESULT what=sampling source=allocator live=10000 interval_s=0.1 rounds=%llu percent_of_core=%.4f "
              "thread_percent_of_core=%.4f\n",
              static_cast<unsigned long long>(c.rounds), c.percent_of_core(),
              c.source_elapsed_ns ? 100.0 * static_cast<double>(c.thread_cpu_ns) / static_cast<double>(c.source_elapsed_ns)
                                  : 0.0);
  for (void* p : live) allocator.deallocate(p);

  if (debug::nvml_available()) {
    auto nvml = debug::open_nvml_source();
    debug::MemoryDebugger dn(*nvml, o);
    dn.run_for_duration();
    const debug::SamplerCost cn = dn.cost();
    std::printf("RESULT what=sampling source=nvml devices=%zu interval_s=0.1 rounds=%llu percent_of_core=%.4f\n",
                nvml->devices().size(), static_cast<unsigned long long>(cn.rounds), cn.percent_of_core());
  } else {
    std::printf("RESULT what=sampling source=nvml skipped=no_driver\n");
  }
}

void history_bound() {
  for (double hours : {1.0, 10.0}) {
    debug::SampleHistory h;
    const auto n = static_cast<std::uint64_t>(hours * 36000);
    for (std::uint64_t i = 0; i < n; ++i) {
      debug::MemorySample s;
      s.time_ns = i * 100'000'000ull;
      s.total = std::uint64_t{80} << 30;
      s.allocated = (i * 7919) % (std::uint64_t{40} << 30);
      s.reserved = s.used = s.allocated + (std::uint64_t{1} << 30);
      s.exact = true;
      h.add(s);
    }
    std::printf("RESULT what=history hours=%.0f samples=%llu buckets=%zu bytes=%zu merged=%llu\n", hours,
                static_cast<unsigned long long>(h.count()), h.buckets().size(), h.bytes(),
                static_cast<unsigned long long>(h.merged()));
  }
}

void trace_speed(const std::string& path) {
  const debug::Trace trace = debug::read_trace(path);
  double replay_s = 1e30, source_s = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    Clock::time_point t0 = Clock::now();
    debug::replay(trace, debug::make_replay_config("genesis"));
    replay_s = std::min(replay_s, seconds_since(t0));

    t0 = Clock::now();
    debug::TraceSourceOptions to;
    to.speed = 0;
    auto source = debug::open_trace_source(debug::Trace(trace), to);
    debug::DebugOptions o;
    o.interval_s = 0.1;
    debug::MemoryDebugger d(*source, o);
    d.run_for_duration();
    source_s = std::min(source_s, seconds_since(t0));
  }
  std::printf("RESULT what=trace_max trace=%s events=%zu replay_s=%.4f debugger_s=%.4f ratio=%.2f\n", path.c_str(),
              trace.events.size(), replay_s, source_s, source_s / replay_s);
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace = "data/traces/gpt2_train.trace.csv.gz";
  double seconds = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) trace = argv[++i];
    else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: debug_bench [--trace FILE] [--seconds S]\n");
      return 2;
    }
  }
  try {
    sampling_cost(seconds);
    history_bound();
    trace_speed(trace);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "debug_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
