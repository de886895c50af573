// alloc_bench: Genesis's CachingAllocator, alloc+free round trips.
//
//   alloc_bench [--upstream host|sim|cuda|pinned|all (or a comma list)]
//               [--quick] [--json FILE] [--reps N] [--threads 1,4,8]
//               [--patterns hot,mixed,threads,events,api] [--iters N]
//               [--expandable auto|on|off] [--sim-vmm-cost none|cuda|M,S,U]
//               [--arenas N]
//
// Upstreams: HostResource (pageable host memory), SimulatedDevice (80 GiB
// fake GPU), CudaDeviceResource (device 0) and PinnedHostResource; the last
// two need a GPU and are reported as "skipped: no GPU" without one.
// For every upstream (patterns in bench_common.h):
//   api=ptr  events=off   hot (512 B .. 256 MiB), mixed, threads_hot, threads_mixed
//   api=block events=off  hot, mixed: the handle API (allocate_block/free_block)
//   api=ptr  events=on    hot, mixed with set_event_recording(true)
// Each variant runs on a fresh CachingAllocator with default options.
// The comparison with PyTorch, cudaMallocAsync and cudaMalloc is
// bench/torch_alloc_bench.cpp (same patterns, same output format);
// scripts/bench_alloc_gpu.sh runs both and prints them side by side.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/detail/asymmetric_fence.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "genesis/memory/simulated_device.h"

namespace {

using genesis::memory::AllocatorOptions;
using genesis::memory::CachingAllocator;
using genesis::memory::UpstreamResource;
namespace gb = genesis_bench;
using Labels = std::vector<std::pair<std::string, std::string>>;

constexpr std::size_t kSimCapacity = std::size_t{80} << 30;  // an 80 GiB GPU

/// Raw-pointer API: allocate / deallocate (the free looks the block up).
struct PtrAdaptor {
  CachingAllocator* a;
  int sync_device;  // CUDA device to synchronize before timing, -1: none
  void* alloc(std::size_t n) { return a->allocate(n); }
  void free(void* p) { a->deallocate(p); }
  void sync() {
    if (sync_device >= 0) genesis::cuda::synchronize_device(sync_device);
  }
};

/// An "allocator" that only touches thread-local memory: a LIFO of 64
/// buffers and two counters per thread, no shared state at all. Run through
/// the same thread suite it shows how far this machine scales per-thread
/// work (cores, hyper-threads, clock boost): the ceiling for any allocator's
/// thread speedup.
struct BaselineAdaptor {
  struct Local {
    void* stack[64];
    int n = 0;
    std::uint64_t allocs = 0, frees = 0;
    alignas(64) char arena[64 * 64];
    Local() {
      for (int i = 0; i < 64; ++i) stack[n++] = arena + i * 64;
    }
  };
  static Local& local() {
    thread_local Local l;
    return l;
  }
  void* alloc(std::size_t) {
    Local& l = local();
    ++l.allocs;
    return l.stack[--l.n];
  }
  void free(void* p) {
    Local& l = local();
    ++l.frees;
    l.stack[l.n++] = p;
  }
  void sync() {}
};

/// Handle API: allocate_block / free_block (no address lookup on free).
struct BlockAdaptor {
  CachingAllocator* a;
  int sync_device;
  void* alloc(std::size_t n) { return a->allocate_block(n); }
  void free(void* p) { a->free_block(static_cast<CachingAllocator::Block*>(p)); }
  void sync() {
    if (sync_device >= 0) genesis::cuda::synchronize_device(sync_device);
  }
};

struct Upstream {
  std::shared_ptr<UpstreamResource> resource;
  int sync_device = -1;
  std::string skip_reason;  // non-empty: cannot run here
};

// Allocator options of every run (--expandable).
AllocatorOptions g_options;
// Cost model of the simulated device's page mappings (--sim-vmm-cost).
genesis::memory::SimulatedDevice::VmmCost g_sim_vmm_cost;

Upstream make_upstream(const std::string& name) {
  Upstream u;
  if (name == "host") {
    u.resource = std::make_shared<genesis::memory::HostResource>();
  } else if (name == "sim") {
    u.resource = std::make_shared<genesis::memory::SimulatedDevice>(kSimCapacity, 0, g_sim_vmm_cost);
  } else if (name == "cuda" || name == "pinned") {
    if (!genesis::cuda::compiled_with_cuda()) {
      u.skip_reason = "built without CUDA";
    } else if (genesis::cuda::device_count() == 0) {
      u.skip_reason = "no GPU";
    } else if (name == "cuda") {
      u.resource = std::make_shared<genesis::memory::CudaDeviceResource>(0);
      u.sync_device = 0;
    } else {
      u.resource = std::make_shared<genesis::memory::PinnedHostResource>();
      u.sync_device = 0;
    }
  } else {
    u.skip_reason = "unknown upstream";
  }
  return u;
}

std::string fmt_bytes(double b) {
  char buf[64];
  if (b >= double(1u << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1u << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1u << 20));
  }
  return buf;
}

void print_stats(gb::Reporter& rep, const std::string& what, const CachingAllocator& a) {
  const auto s = a.stats();
  const double allocs = s.num_allocs > 0 ? static_cast<double>(s.num_allocs) : 1.0;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s: allocs=%lld thread-cache hits=%.1f%% cache hits=%.1f%% upstream allocs=%lld "
                "reserved peak=%s arenas=%u",
                what.c_str(), static_cast<long long>(s.num_allocs), 100.0 * s.num_thread_cache_hits / allocs,
                100.0 * s.num_cache_hits / allocs, static_cast<long long>(s.num_upstream_allocs),
                fmt_bytes(static_cast<double>(s.reserved_bytes[0].peak)).c_str(), a.arenas_in_use());
  rep.note(buf);
}

/// All variants for one upstream. Returns false if something failed.
bool bench_upstream(const std::string& name, const gb::Config& cfg, gb::Reporter& rep,
                    const gb::MixedSequence& seq, const gb::MixedSequence& seq_set) {
  Upstream u;
  try {
    u = make_upstream(name);
  } catch (const std::exception& e) {
    rep.skip("genesis", name, std::string("cannot create upstream: ") + e.what());
    return false;
  }
  if (!u.skip_reason.empty()) {
    rep.skip("genesis", name, u.skip_reason);
    return u.skip_reason != "unknown upstream";
  }
  rep.note("genesis(" + name + "): upstream " + u.resource->name());
  const int dev = u.sync_device;
  bool ok = true;

  // 1. raw-pointer API, no event recording: every pattern.
  try {
    CachingAllocator alloc(u.resource, g_options);
    PtrAdaptor a{&alloc, dev};
    const Labels labels = {{"allocator", "genesis"}, {"upstream", name}, {"api", "ptr"}, {"events", "off"}};
    if (cfg.wants("hot")) {
      for (std::size_t size : gb::hot_sizes()) rep.add(gb::run_hot(a, size, cfg, labels));
    }
    if (cfg.wants("mixed")) rep.add(gb::run_mixed(a, seq, cfg, labels));
    if (cfg.wants("mixed_set")) rep.add(gb::run_mixed(a, seq_set, cfg, labels, "mixed_set"));
    if (cfg.wants("threads")) {
      gb::run_thread_suite([&](int) { return PtrAdaptor{&alloc, dev}; }, cfg, rep, labels);
    }
    print_stats(rep, "genesis(" + name + ") api=ptr", alloc);
  } catch (const std::exception& e) {
    rep.note("genesis(" + name + ") api=ptr failed: " + e.what());
    ok = false;
  }

  // 2. handle API.
  if (cfg.wants("api")) {
    try {
      CachingAllocator alloc(u.resource, g_options);
      BlockAdaptor a{&alloc, dev};
      const Labels labels = {{"allocator", "genesis"}, {"upstream", name}, {"api", "block"}, {"events", "off"}};
      for (std::size_t size : gb::hot_sizes()) rep.add(gb::run_hot(a, size, cfg, labels));
      rep.add(gb::run_mixed(a, seq, cfg, labels));
    } catch (const std::exception& e) {
      rep.note("genesis(" + name + ") api=block failed: " + e.what());
      ok = false;
    }
  }

  // 3. event recording on.
  if (cfg.wants("events")) {
    try {
      CachingAllocator alloc(u.resource, g_options);
      alloc.set_event_recording(true);
      PtrAdaptor a{&alloc, dev};
      const Labels labels = {{"allocator", "genesis"}, {"upstream", name}, {"api", "ptr"}, {"events", "on"}};
      for (std::size_t size : gb::hot_sizes()) rep.add(gb::run_hot(a, size, cfg, labels));
      rep.add(gb::run_mixed(a, seq, cfg, labels));
      alloc.set_event_recording(false);
      alloc.clear_events();
    } catch (const std::exception& e) {
      rep.note("genesis(" + name + ") events=on failed: " + e.what());
      ok = false;
    }
  }
  return ok;
}

std::string now_utc() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  gb::Config cfg;
  std::string upstreams = "all";
  bool help = false;
  const bool parsed = gb::parse_common(argc, argv, cfg, &help, [&](const std::string& k, const std::string& v) {
    if (k == "--upstream") {
      upstreams = v;
      return true;
    }
    if (k == "--sim-vmm-cost") {
      try {
        g_sim_vmm_cost = genesis::memory::SimulatedDevice::VmmCost::parse(v);
      } catch (const std::exception&) {
        return false;
      }
      return true;
    }
    if (k == "--arenas") {  // Note [Arenas]: 1 gives a single pool, for comparison
      char* end = nullptr;
      const unsigned long n = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n > genesis::memory::CachingAllocator::kMaxArenas) return false;
      g_options.arenas = static_cast<std::uint32_t>(n);
      return true;
    }
    if (k == "--alloc-conf") {  // on top of the options the flags above set
      try {
        g_options = genesis::memory::parse_alloc_conf(v, g_options, "--alloc-conf");
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return false;
      }
      return true;
    }
    if (k == "--expandable") {
      using E = AllocatorOptions::Expandable;
      if (v != "auto" && v != "on" && v != "off") return false;
      g_options.expandable_segments = v == "on" ? E::kOn : v == "off" ? E::kOff : E::kAuto;
      return true;
    }
    return false;
  });
  if (!parsed || help) {
    std::printf(
        "usage: %s [--upstream host|sim|cuda|pinned|all] [options]\n"
        "Genesis CachingAllocator alloc+free round trips (see bench/bench_common.h).\n"
        "  --upstream LIST    comma list of host, sim, cuda, pinned, or all (default)\n"
        "  --expandable M     expandable segments: auto (default: where supported and cheap), on, off\n"
        "  --arenas N         pools threads are dealt over: 0 (default: one per hardware thread, at most 8),\n"
        "                     1 (a single pool) .. 8\n"
        "  --sim-vmm-cost C   simulated device's page mapping cost: none (default), cuda (H200 driver\n"
        "                     figures), or MAP,SET_ACCESS,UNMAP microseconds per physical chunk\n"
        "  --alloc-conf TEXT  allocator options as GENESIS_ALLOC_CONF writes them (e.g.\n"
        "                     thread_cache_large_park:4), applied after the flags before it\n%s",
        argv[0], gb::common_usage());
    return parsed ? 0 : 2;
  }
  std::vector<std::string> names;
  for (const auto& u : gb::split_list(upstreams)) {
    if (u == "all") {
      for (const char* n : {"host", "sim", "cuda", "pinned"}) names.emplace_back(n);
    } else if (u == "host" || u == "sim" || u == "cuda" || u == "pinned") {
      names.push_back(u);
    } else {
      std::fprintf(stderr, "error: unknown upstream '%s' (host, sim, cuda, pinned, all)\n", u.c_str());
      return 2;
    }
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const std::string date = now_utc(), cpu = gb::cpu_model();
  const unsigned hw = std::thread::hardware_concurrency();
  const gb::MixedSequence seq = gb::MixedSequence::make(gb::kMixedSeed);
  const gb::MixedSequence seq_set = gb::MixedSequence::make(gb::kMixedSeed, gb::kMixedSteps, 64);
  gb::Reporter rep("alloc_bench");
  rep.note("alloc_bench " + date);
  rep.note("command: " + command);
  rep.note("cpu: " + cpu + ", " + std::to_string(hw) + " hardware threads; CUDA devices: " +
           std::to_string(genesis::cuda::device_count()));
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "nominal pairs: hot %llu, mixed %llu, per thread %llu; reps %d (threads %d); budget %.0f ms/rep; "
                "mixed mean size %.2f MiB",
                static_cast<unsigned long long>(cfg.hot_iters), static_cast<unsigned long long>(cfg.mixed_iters),
                static_cast<unsigned long long>(cfg.thread_pairs), cfg.reps, cfg.thread_reps, cfg.rep_budget_ms,
                seq.mean_size() / double(gb::MiB));
  rep.note(buf);
  rep.note(gb::describe_cpu_order());
  rep.note(g_options.arenas == 0 ? "arenas: one per hardware thread, at most 8 (default)"
                                 : "arenas: " + std::to_string(g_options.arenas) + " (--arenas)");
  rep.note(genesis::memory::detail::asymmetric_fence_available()
               ? "hot-path fence: compiler barrier (membarrier registered)"
               : "hot-path fence: full fence on every call (membarrier unavailable)");

  bool ok = true;
  for (const auto& n : names) ok = bench_upstream(n, cfg, rep, seq, seq_set) && ok;
  if (cfg.wants("threads")) {
    // The machine's own scaling ceiling (hot pattern only: mixed needs memory).
    gb::Config c = cfg;
    c.patterns = {"threads"};
    const Labels labels = {{"allocator", "baseline"}, {"upstream", "none"}, {"api", "ptr"}, {"events", "off"}};
    gb::run_thread_suite([](int) { return BaselineAdaptor{}; }, c, rep, labels, /*hot_only=*/true);
  }

  rep.print_table();
  if (!cfg.json_path.empty()) {
    ok = rep.write_json(cfg.json_path, {{"date", date}, {"cpu", cpu}, {"command", command}}) && ok;
  }
  return ok ? 0 : 1;
}
