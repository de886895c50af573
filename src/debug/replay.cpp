// The replay engine (Note [Replay measurement] in replay.h) and the named
// allocator configurations that `genesis-mem replay --compare` runs.
#include "genesis/debug/replay.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/simulated_device.h"

namespace genesis::debug {

using memory::AllocatorOptions;
using memory::CachingAllocator;

std::string_view replay_device_name(ReplayDevice device) noexcept {
  return device == ReplayDevice::kCuda ? "cuda" : "sim";
}

ReplayDevice parse_replay_device(std::string_view name) {
  if (name == "sim") return ReplayDevice::kSimulated;
  if (name == "cuda") return ReplayDevice::kCuda;
  GENESIS_THROW(InvalidArgumentError, "unknown device '", name, "': expected 'sim' (simulated GPU) or 'cuda' (GPU 0)");
}

const std::vector<NamedReplayConfig>& known_replay_configs() {
  static const std::vector<NamedReplayConfig> configs = [] {
    std::vector<NamedReplayConfig> c;
    AllocatorOptions o;
    c.push_back({"genesis", "defaults: expandable segments auto, thread cache on", o});
    o.expandable_segments = AllocatorOptions::Expandable::kOff;
    c.push_back({"genesis-classic", "expandable segments off (fixed-size segments)", o});
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    c.push_back({"genesis-expandable", "expandable segments on", o});
    o.chunk_pages = 1;
    c.push_back({"genesis-expandable-pages", "expandable segments, a physical allocation per 2 MiB page", o});
    o = AllocatorOptions{};
    o.thread_cache = false;
    c.push_back({"genesis-no-tcache", "thread cache off (every call takes the allocator's mutex)", o});
    return c;
  }();
  return configs;
}

std::size_t default_simulated_capacity(const Trace& trace) noexcept {
  std::size_t capacity = std::size_t{128} << 30;
  while (capacity / 4 < trace.peak_live_bytes && capacity < memory::SimulatedDevice::kAddressSpan) capacity *= 2;
  return capacity;
}

ReplayConfig make_replay_config(std::string_view name, ReplayDevice device, std::size_t capacity) {
  for (const NamedReplayConfig& c : known_replay_configs()) {
    if (c.name != name) continue;
    ReplayConfig config;
    config.name = c.name;
    config.device = device;
    config.capacity = capacity;
    config.options = c.options;
    return config;
  }
  std::string valid;
  for (const NamedReplayConfig& c : known_replay_configs()) valid += (valid.empty() ? "" : ", ") + c.name;
  GENESIS_THROW(InvalidArgumentError, "unknown configuration '", name, "'; valid: ", valid);
}

namespace {

// The upstream of one run, and the stream ids the trace's streams map to.
// Declared before the allocator of the run, so destroyed after it.
struct Upstream {
  // Real CUDA streams standing in for a trace's streams (device kCuda only):
  // the trace's values are stream handles of the recorded process,
  // meaningless here, and the allocator hands a segment's stream to CUDA
  // (expandable segments synchronize it before unmapping pages). Stream 0
  // stays the default stream. Owned cuda::Streams: they outlive the
  // allocator, then go back to the stream pool.
  std::vector<cuda::Stream> cuda_streams;
  std::shared_ptr<memory::UpstreamResource> resource;
  std::vector<StreamId> streams;  // indexed by TraceEvent::stream
};

Upstream make_upstream(const Trace& trace, const ReplayConfig& config, AllocatorOptions& options) {
  Upstream up;
  if (config.device == ReplayDevice::kSimulated) {
    const std::size_t capacity = config.capacity != 0 ? config.capacity : default_simulated_capacity(trace);
    GENESIS_CHECK(capacity <= memory::SimulatedDevice::kAddressSpan, "the simulated device holds at most 1 TiB, got ",
                  genesis::detail::format_bytes(capacity), " (--capacity)");
    auto dev = std::make_shared<memory::SimulatedDevice>(capacity, 0, config.sim_vmm_cost);
    // Real stream ids of the simulated device, so that anything the
    // allocator asks of a stream is checked.
    for (const StreamId s : trace.streams) up.streams.push_back(s == 0 ? 0 : dev->create_stream());
    up.resource = std::move(dev);
    return up;
  }
  auto dev = std::make_shared<memory::CudaDeviceResource>(config.cuda_device);
  const std::size_t total = dev->mem_info().total_bytes;
  if (config.capacity != 0 && total > 0 && config.capacity < total) {
    options.memory_fraction =
        std::min(options.memory_fraction, static_cast<double>(config.capacity) / static_cast<double>(total));
  }
  for (const StreamId s : trace.streams) {
    if (s == 0) {
      up.streams.push_back(0);
      continue;
    }
    up.cuda_streams.push_back(cuda::Stream::create(config.cuda_device, /*priority=*/0, /*non_blocking=*/true));
    up.streams.push_back(up.cuda_streams.back().id());
  }
  up.resource = std::move(dev);
  return up;
}

// The timed loop: nothing but allocator calls. Never inlined, so that a
// profiler can count it alone (bench/alloc_icount.sh: callgrind's
// --toggle-collect); one call per progress step costs nothing measurable.
[[gnu::noinline]] void replay_range(CachingAllocator& alloc, const TraceEvent* events, std::uint64_t begin,
                                    std::uint64_t end, void** slots, const StreamId* streams,
                                    std::vector<std::uint64_t>& failed) {
  for (std::uint64_t i = begin; i < end; ++i) {
    const TraceEvent& e = events[i];
    if (e.op == TraceOp::kAlloc) {
      try {
        slots[e.slot] = alloc.allocate(e.size, streams[e.stream]);
      } catch (const OutOfMemoryError&) {
        slots[e.slot] = nullptr;  // its free becomes a no-op
        failed.push_back(i);
      }
    } else if (GENESIS_LIKELY(e.op == TraceOp::kFree)) {
      alloc.deallocate(slots[e.slot]);  // nullptr (unknown free, failed alloc): no-op
    } else {
      alloc.empty_cache();  // Note [Released caches]
    }
  }
}

// Peak of the sum of requested sizes of live allocations, leaving out the
// ones that failed (`failed`: ascending event indices).
std::uint64_t peak_live(const Trace& trace, const std::vector<std::uint64_t>& failed) {
  std::vector<std::uint64_t> slot_size(trace.num_slots, 0);
  std::uint64_t live = 0, peak = 0;
  std::size_t next_failed = 0;
  for (std::uint64_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.op == TraceOp::kAlloc) {
      if (next_failed < failed.size() && failed[next_failed] == i) {
        ++next_failed;
        slot_size[e.slot] = 0;
        continue;
      }
      slot_size[e.slot] = e.size;
      live += e.size;
      peak = std::max(peak, live);
    } else if (e.op == TraceOp::kFree) {
      live -= slot_size[e.slot];
      slot_size[e.slot] = 0;
    }
  }
  return peak;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// One run on a fresh allocator and device. `done` counts progress over runs.
ReplayResult run_once(const Trace& trace, const ReplayConfig& config, const ReplayOptions& options,
                      std::uint64_t& done, std::uint64_t total) {
  AllocatorOptions alloc_options = config.options;
  Upstream up = make_upstream(trace, config, alloc_options);
  CachingAllocator alloc(up.resource, alloc_options);

  std::vector<void*> slots(trace.num_slots, nullptr);
  std::vector<std::uint64_t> failed;
  const std::uint64_t n = trace.events.size();
  const std::uint64_t step = options.progress ? std::max<std::uint64_t>(1, options.progress_every) : n;
  std::chrono::steady_clock::duration elapsed{0};
  for (std::uint64_t begin = 0; begin < n; begin += step) {
    const std::uint64_t end = std::min(n, begin + step);
    const auto t0 = std::chrono::steady_clock::now();
    replay_range(alloc, trace.events.data(), begin, end, slots.data(), up.streams.data(), failed);
    elapsed += std::chrono::steady_clock::now() - t0;
    done += end - begin;
    if (options.progress) options.progress(done, total);
  }

  ReplayResult r;
  r.config = config.name;
  r.upstream = up.resource->name();
  r.capacity = up.resource->mem_info().total_bytes;
  r.events = n;
  r.final_stats = alloc.stats();
  if (options.inspect) options.inspect(alloc);
  for (const std::uint32_t s : trace.live_at_end_slots) {
    alloc.deallocate(slots[s]);
    slots[s] = nullptr;
  }
  r.allocated_after_cleanup = alloc.stats().allocated_bytes[memory::kStatAggregate].current;

  const memory::MemoryStats& st = r.final_stats;
  r.peak_live_bytes = peak_live(trace, failed);
  r.peak_reserved_bytes = static_cast<std::uint64_t>(st.reserved_bytes[memory::kStatAggregate].peak);
  r.reserved_per_live = r.peak_live_bytes > 0
                            ? static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(r.peak_live_bytes)
                            : 0.0;
  const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  r.ns_per_event = n > 0 ? ns / static_cast<double>(n) : 0.0;
  r.ns_per_event_runs.push_back(r.ns_per_event);
  r.upstream_allocs = st.num_upstream_allocs;
  r.upstream_frees = st.num_upstream_frees;
  r.stream_borrows = st.num_stream_borrows;
  r.ooms = failed.size();
  r.unknown_frees = trace.counts.unknown_frees;
  r.live_at_end = trace.live_at_end_slots.size();
  return r;
}

}  // namespace

ReplayResult replay(const Trace& trace, const ReplayConfig& config, const ReplayOptions& options) {
  GENESIS_CHECK(options.repeat >= 1, "replay: repeat must be at least 1, got ", options.repeat);
  check_trace(trace);  // the loop indexes without bounds checks, even for a Trace built by hand
  GENESIS_CHECK(options.warmup >= -1, "replay: warmup must be -1 (auto) or at least 0, got ", options.warmup);
  // Auto on the simulated device: untimed runs for at least kReplayAutoWarmup
  // of wall time (one run of the GPT-2 trace takes ~0.5 ms: one alone is too
  // short for the CPU to reach its clock).
  const bool auto_warmup = options.warmup < 0 && config.device == ReplayDevice::kSimulated;
  const int warmup = options.warmup >= 0 ? options.warmup : auto_warmup ? 1 : 0;
  const auto warmup_start = std::chrono::steady_clock::now();
  ReplayOptions quiet;  // no progress, no inspection: the results are dropped
  for (int i = 0; i < warmup || (auto_warmup && std::chrono::steady_clock::now() - warmup_start < kReplayAutoWarmup);
       ++i) {
    std::uint64_t ignored = 0;
    (void)run_once(trace, config, quiet, ignored, trace.events.size());
  }
  const std::uint64_t total = trace.events.size() * options.repeat;
  std::uint64_t done = 0;
  ReplayResult result = run_once(trace, config, options, done, total);
  for (unsigned i = 1; i < options.repeat; ++i) {
    const ReplayResult again = run_once(trace, config, options, done, total);
    result.ns_per_event_runs.push_back(again.ns_per_event);
  }
  result.ns_per_event = median(result.ns_per_event_runs);
  return result;
}

}  // namespace genesis::debug
