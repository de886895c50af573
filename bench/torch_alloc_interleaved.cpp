// torch_alloc_interleaved: Genesis's caching allocator and PyTorch's, side by
// side in one process, their repetitions interleaved (G, T, T, G, G, T, ...).
//
//   torch_alloc_interleaved [--reps N] [--rep-ms MS]
//
// Why: the GPU machines' CPUs change speed by more than half from one
// minute to the next (the same Genesis hot pair reads fast and slow phases of
// tens of seconds within one alloc_bench run; bench/HISTORY.md, "The GPU
// machines' CPUs today"), and alloc_bench
// and torch_alloc_bench run one after the other, so the ratio of their
// figures mixes the allocators with the machine's phase. Here both see the
// same phases: each repetition of one is next to a repetition of the other.
// Patterns and adaptors as in bench/bench_common.h (hot at 512 B .. 256 MiB,
// mixed: 64 live random sizes, mixed_set: 64 live from 64 sizes); Genesis
// through the pointer API on device 0 with default options (classic
// segments, thread cache on), PyTorch through raw_alloc / raw_delete.
// Reported per allocator: median and minimum ns per pair over the
// repetitions, and PyTorch / Genesis for both.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/cuda_resource.h"

#ifndef GENESIS_BENCH_NO_TORCH
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "torch_adaptor.h"
#endif

namespace {

namespace gb = genesis_bench;

struct GenesisAdaptor {
  genesis::memory::CachingAllocator* a;
  void* alloc(std::size_t n) { return a->allocate(n); }
  void free(void* p) { a->deallocate(p); }
  void sync() { genesis::cuda::synchronize_device(0); }
};

#ifndef GENESIS_BENCH_NO_TORCH
using gb::TorchAdaptor;
#endif

struct Row {
  std::string pattern;
  gb::Timing genesis, torch;
};

// One pattern: `run_g(n)` / `run_t(n)` do n pairs. Each side's pair count is
// set so that one repetition takes about rep_ms (calibration doubles as the
// warm-up); then `reps` rounds, the order alternating every round.
template <class RunG, class RunT>
Row interleave(const std::string& pattern, RunG&& run_g, RunT&& run_t, int reps, double rep_ms) {
  auto count = [&](auto& run) {
    const double per_pair = gb::calibrate(run, rep_ms / 4, std::uint64_t{1} << 24);
    return std::max<std::uint64_t>(1000, static_cast<std::uint64_t>(rep_ms * 1e6 / std::max(per_pair, 1e-3)));
  };
  const std::uint64_t ng = count(run_g), nt = count(run_t);
  std::vector<double> g, t;
  auto time = [](auto& run, std::uint64_t n, std::vector<double>& out) {
    const auto t0 = gb::Clock::now();
    run(n);
    out.push_back(gb::elapsed_ns(t0, gb::Clock::now()) / static_cast<double>(n));
  };
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      time(run_g, ng, g);
      time(run_t, nt, t);
    } else {
      time(run_t, nt, t);
      time(run_g, ng, g);
    }
  }
  return Row{pattern, gb::summarize(std::move(g)), gb::summarize(std::move(t))};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  double rep_ms = 40;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const bool has_value = i + 1 < argc;
    if (k == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else if (k == "--rep-ms" && has_value) {
      rep_ms = std::atof(argv[++i]);
    } else {
      std::printf("usage: %s [--reps N (21)] [--rep-ms MS (40)]\n", argv[0]);
      return k == "--help" || k == "-h" ? 0 : 2;
    }
  }
  if (reps < 1 || rep_ms <= 0) {
    std::fprintf(stderr, "error: --reps must be >= 1 and --rep-ms > 0\n");
    return 2;
  }
#ifdef GENESIS_BENCH_NO_TORCH
  std::printf("SKIP torch_alloc_interleaved: built without libtorch\n");
  return 0;
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP torch_alloc_interleaved: no GPU\n");
    return 0;
  }
  try {
    at::Tensor warm = at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, 0)));
    warm.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: PyTorch CUDA initialisation failed: %s\n", e.what());
    return 1;
  }
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, 0);
  std::printf("# torch_alloc_interleaved: gpu %s; cpu %s; reps %d of ~%.0f ms each, order alternating\n", prop.name,
              gb::cpu_model().c_str(), reps, rep_ms);

  auto genesis_alloc = std::make_unique<genesis::memory::CachingAllocator>(
      std::make_shared<genesis::memory::CudaDeviceResource>(0));
  GenesisAdaptor g{genesis_alloc.get()};
  TorchAdaptor t;
  const gb::MixedSequence seq = gb::MixedSequence::make(gb::kMixedSeed);
  const gb::MixedSequence seq_set = gb::MixedSequence::make(gb::kMixedSeed, gb::kMixedSteps, 64);

  std::vector<Row> rows;
  try {
    for (std::size_t size : gb::hot_sizes()) {
      auto rg = [&](std::uint64_t n) { gb::hot_loop(g, size, n); };
      auto rt = [&](std::uint64_t n) { gb::hot_loop(t, size, n); };
      rows.push_back(interleave("hot " + std::to_string(size), rg, rt, reps, rep_ms));
    }
    for (const auto* s : {&seq, &seq_set}) {
      gb::MixedState<GenesisAdaptor> sg(g, *s);
      gb::MixedState<TorchAdaptor> st(t, *s);
      auto rg = [&](std::uint64_t n) { sg.run(n); };
      auto rt = [&](std::uint64_t n) { st.run(n); };
      rows.push_back(interleave(s == &seq ? "mixed" : "mixed_set", rg, rt, reps, rep_ms));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }

  std::printf("\n| pattern | Genesis median | Genesis min | PyTorch median | PyTorch min | PyTorch/Genesis (medians) | (mins) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.1f ns | %.1f ns | %.1f ns | %.1f ns | %.1fx | %.1fx |\n", r.pattern.c_str(), r.genesis.median,
                r.genesis.min, r.torch.median, r.torch.min, r.torch.median / r.genesis.median,
                r.torch.min / r.genesis.min);
    std::printf("RESULT interleaved pattern=\"%s\" genesis_median=%.2f genesis_min=%.2f torch_median=%.2f torch_min=%.2f\n",
                r.pattern.c_str(), r.genesis.median, r.genesis.min, r.torch.median, r.torch.min);
  }
  return 0;
#endif
}
