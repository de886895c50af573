// Storage copies, Genesis and PyTorch side by side in one process:
//   h2d_pinned    1 GiB host (pinned) -> device
//   d2h_pinned    1 GiB device -> host (pinned)
//   h2d_pageable  1 GiB host (pageable) -> device
//   d2h_pageable  1 GiB device -> host (pageable)
//   d2d           1 GiB device -> device (GB/s count bytes read + written)
//   batch_overlap 256 MiB H2D + 256 MiB D2H (pinned): BatchStorage on two
//                 streams vs the same two copies one after the other
// plus a sweep of the staging options for pageable host -> device.
//
// Each figure is the median of --reps timed repetitions after two warm-ups;
// one repetition = the copy + cudaDeviceSynchronize, timed with
// std::chrono::steady_clock. Output: "RESULT op=.. impl=.. gbps=.." lines and
// a table. Needs a GPU and libtorch (built with -DGENESIS_TORCH_BENCH=ON).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "genesis/memory/device_allocators.h"
#include "genesis/storage/batch_storage.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/storage.h"

#include <ATen/ATen.h>

namespace {

using Clock = std::chrono::steady_clock;
int g_reps = 10;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median seconds of `fn` (+ device sync) over g_reps runs after 2 warm-ups.
double median_seconds(const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) {
    fn();
    check(cudaDeviceSynchronize(), "sync");
  }
  std::vector<double> t;
  for (int i = 0; i < g_reps; ++i) {
    const auto a = Clock::now();
    fn();
    check(cudaDeviceSynchronize(), "sync");
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  std::string op, impl;
  double gbps;
};
std::vector<Row> g_rows;

void report(const std::string& op, const std::string& impl, double bytes, double seconds) {
  const double gbps = bytes / seconds / 1e9;
  g_rows.push_back({op, impl, gbps});
  std::printf("RESULT op=%s impl=%s gbps=%.2f ms=%.3f\n", op.c_str(), impl.c_str(), gbps, seconds * 1e3);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 1024;
  bool sweep = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--reps" && i + 1 < argc) {
      g_reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--no-sweep") {
      sweep = false;
    } else {
      std::printf("usage: %s [--mib N (default 1024)] [--reps N (default 10)] [--no-sweep]\n", argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP torch_copy_bench: no GPU\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::printf("torch_copy_bench %s, device %s, %zu MiB per copy, median of %d\n", date, prop.name, mib, g_reps);

  using namespace genesis;
  const std::size_t n = mib << 20;
  const auto len = static_cast<std::int64_t>(n);
  const Device cpu(DeviceType::kCPU), gpu(DeviceType::kCUDA, 0);

  // Genesis buffers.
  Storage g_pinned = Storage::empty({len}, DType::kUInt8, cpu, kCurrentStream, true);
  Storage g_pageable = Storage::empty({len}, DType::kUInt8, cpu);
  Storage g_dev = Storage::empty({len}, DType::kUInt8, gpu);
  Storage g_dev2 = Storage::empty({len}, DType::kUInt8, gpu);
  std::memset(g_pinned.data_ptr(), 1, n);
  std::memset(g_pageable.data_ptr(), 2, n);  // touched: resident, like a real host tensor

  // PyTorch buffers.
  auto u8 = at::TensorOptions().dtype(at::kByte);
  at::Tensor t_pinned = at::empty({len}, u8.pinned_memory(true));
  at::Tensor t_pageable = at::empty({len}, u8);
  at::Tensor t_dev = at::empty({len}, u8.device(at::kCUDA, 0));
  at::Tensor t_dev2 = at::empty({len}, u8.device(at::kCUDA, 0));
  t_pinned.fill_(1);
  t_pageable.fill_(2);

  const double b = static_cast<double>(n);
  report("h2d_pinned", "genesis", b, median_seconds([&] { g_dev.copy_(g_pinned); }));
  report("h2d_pinned", "pytorch", b, median_seconds([&] { t_dev.copy_(t_pinned); }));
  report("d2h_pinned", "genesis", b, median_seconds([&] { g_pinned.copy_(g_dev); }));
  report("d2h_pinned", "pytorch", b, median_seconds([&] { t_pinned.copy_(t_dev); }));
  report("h2d_pageable", "genesis", b, median_seconds([&] { g_dev.copy_(g_pageable); }));
  report("h2d_pageable", "pytorch", b, median_seconds([&] { t_dev.copy_(t_pageable); }));
  report("d2h_pageable", "genesis", b, median_seconds([&] { g_pageable.copy_(g_dev); }));
  report("d2h_pageable", "pytorch", b, median_seconds([&] { t_pageable.copy_(t_dev); }));
  report("d2d", "genesis", 2 * b, median_seconds([&] { g_dev2.copy_(g_dev); }));
  report("d2d", "pytorch", 2 * b, median_seconds([&] { t_dev2.copy_(t_dev); }));

  // Overlap: one copy per direction, on two streams vs one after the other.
  {
    const auto q = len / 4;
    Storage hi = Storage::empty({q}, DType::kUInt8, cpu, kCurrentStream, true);
    Storage ho = Storage::empty({q}, DType::kUInt8, cpu, kCurrentStream, true);
    Storage di = Storage::empty({q}, DType::kUInt8, gpu);
    Storage dout = Storage::empty({q}, DType::kUInt8, gpu);
    BatchStorage batch({hi, dout}, 2);
    std::vector<Storage> targets{di, ho};
    const double bytes = 2.0 * static_cast<double>(q);
    report("batch_overlap", "genesis_sequential", bytes, median_seconds([&] {
             di.copy_(hi);
             ho.copy_(dout);
           }));
    report("batch_overlap", "genesis_batch", bytes, median_seconds([&] { batch.batch_copy(targets); }));
  }

  if (sweep) {
    const StagingOptions saved = staging_options();
    for (std::size_t chunk_mib : {2, 4, 8, 16, 32}) {
      for (int buffers : {2, 4}) {
        for (int threads : {4, 8, 16}) {
          set_staging_options({chunk_mib << 20, buffers, threads});
          char impl[96];
          std::snprintf(impl, sizeof impl, "genesis_chunk%zuMiB_buf%d_thr%d", chunk_mib, buffers, threads);
          report("h2d_pageable_sweep", impl, b, median_seconds([&] { g_dev.copy_(g_pageable); }));
        }
      }
    }
    set_staging_options(saved);
  }

  std::printf("\n%-20s %-36s %10s\n", "op", "impl", "GB/s");
  for (const Row& r : g_rows) std::printf("%-20s %-36s %10.2f\n", r.op.c_str(), r.impl.c_str(), r.gbps);
  return 0;
}
