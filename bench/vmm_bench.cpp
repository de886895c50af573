// What the CUDA virtual-memory calls cost, per physical handle and per byte:
// the figures behind the page size of expandable segments (Note [Expandable
// segments]). For each chunk size, maps N chunks into one reserved range
// (create + map per chunk, one set-access per run), then unmaps and releases
// them, and prints microseconds per chunk for each step. Then what the calls
// cost the GPU's work: a queue of kernels runs while the host maps and unmaps
// chunks elsewhere, and its time is compared with the same queue run alone (a
// call that stalls the device shows there, not in its own time).
//
//   vmm_bench [--chunks N] [--stall-cycles N (0: skip the GPU part)]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/vmm.h"
#include "genesis/tensor/api.h"

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Unmaps and releases the first `mapped` chunks of a run at `base`, then the
// reservation of `total` bytes; returns the microseconds the chunks took.
double release_run(std::uintptr_t base, std::size_t chunk, const std::vector<genesis::cuda::vmm::Handle>& handles,
                   int mapped, std::size_t total) {
  const auto t0 = Clock::now();
  for (int i = 0; i < mapped; ++i)
    genesis::cuda::vmm::unmap_and_release(base + static_cast<std::size_t>(i) * chunk, chunk,
                                          handles[static_cast<std::size_t>(i)]);
  const double us = us_since(t0);
  genesis::cuda::vmm::free_reservation(base, total);
  return us;
}

// Queues `kernels` additions of two 64M-element float tensors on the current
// stream, runs `host_work` while they run, waits for the device, and returns
// {wall ms, host_work ms}.
template <class F>
std::pair<double, double> gpu_queue_with(int kernels, genesis::Tensor& out, const genesis::Tensor& a,
                                         const genesis::Tensor& b, F&& host_work) {
  genesis::cuda::synchronize_device(0);
  const auto t0 = Clock::now();
  for (int k = 0; k < kernels; ++k) genesis::add_out(out, a, b);
  const auto t1 = Clock::now();
  host_work();
  const double host_ms = us_since(t1) / 1000.0;
  genesis::cuda::synchronize_device(0);
  return {us_since(t0) / 1000.0, host_ms};
}

// What mapping calls cost the device's queued work (see the top of the file).
void gpu_stall(int cycles) {
  namespace vmm = genesis::cuda::vmm;
  using genesis::Tensor;
  const genesis::Device gpu{genesis::DeviceType::kCUDA, 0};
  Tensor a = genesis::ones({std::int64_t{64} << 20}, gpu);
  Tensor b = genesis::ones({std::int64_t{64} << 20}, gpu);
  Tensor out = genesis::empty({std::int64_t{64} << 20}, gpu);
  const int kernels = 1500;
  const std::size_t g = vmm::granularity(0);
  std::printf("# GPU work while the host maps: %d kernels (64M-float additions), %d host cycles\n", kernels, cycles);
  std::printf("%-34s %10s %10s %14s\n", "host work", "wall ms", "host ms", "GPU us/cycle");
  gpu_queue_with(kernels / 4, out, a, b, [] {});  // warm up
  double alone = 1e300;
  for (int r = 0; r < 3; ++r) alone = std::min(alone, gpu_queue_with(kernels, out, a, b, [] {}).first);
  std::printf("%-34s %10.2f %10s %14s\n", "none", alone, "-", "-");
  std::printf("RESULT vmm_stall work=none wall_ms=%.3f\n", alone);
  struct Case {
    const char* name;
    std::size_t chunk;
    int what;  // 0: create+map, set access, unmap+release; 1: create+map, unmap+release; 2: cudaMalloc+cudaFree
  };
  for (const Case c : {Case{"map+access+unmap, 2 MiB", g, 0}, Case{"map+access+unmap, 32 MiB", 16 * g, 0},
                       Case{"map+unmap (no access), 2 MiB", g, 1}, Case{"cudaMalloc+cudaFree, 2 MiB", g, 2}}) {
    const std::uintptr_t base = c.what == 2 ? 0 : vmm::reserve(c.chunk, g);
    if (c.what != 2 && base == 0) continue;
    bool ok = true;
    auto work = [&] {
      for (int i = 0; i < cycles && ok; ++i) {
        if (c.what == 2) {
          void* p = genesis::cuda::malloc_device(c.chunk);
          ok = p != nullptr;
          genesis::cuda::free_device(p);
          continue;
        }
        vmm::Handle h = 0;
        ok = vmm::create_and_map(0, base, c.chunk, &h);
        if (ok && c.what == 0) ok = vmm::set_access(0, base, c.chunk);
        if (h != 0) vmm::unmap_and_release(base, c.chunk, h);
      }
    };
    double wall = 1e300, host = 0;
    for (int r = 0; r < 3; ++r) {
      const auto [w, h] = gpu_queue_with(kernels, out, a, b, work);
      if (w < wall) wall = w, host = h;
    }
    if (base != 0) vmm::free_reservation(base, c.chunk);
    const double stall_us = (wall - alone) * 1000.0 / cycles;
    std::printf("%-34s %10.2f %10.2f %14.2f%s\n", c.name, wall, host, stall_us,
                !ok ? " (a call failed)" : host >= alone ? " (host longer than the queue)" : "");
    std::printf("RESULT vmm_stall work=%d chunk=%zu cycles=%d wall_ms=%.3f host_ms=%.3f gpu_us_per_cycle=%.3f\n", c.what,
                c.chunk, cycles, wall, host, stall_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int chunks = 256;
  int cycles = 400;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--chunks") == 0) chunks = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--stall-cycles") == 0) cycles = std::atoi(argv[i + 1]);
  }
  if (genesis::cuda::device_count() == 0 || !genesis::cuda::vmm::available(0)) {
    std::printf("vmm_bench: skipped: no GPU with virtual memory management\n");
    return 0;
  }
  namespace vmm = genesis::cuda::vmm;
  const std::size_t g = vmm::granularity(0);
  std::printf("# granularity %zu bytes; %d chunks per size\n", g, chunks);
  std::printf("%-10s %14s %14s %14s %14s\n", "chunk", "create+map us", "set_access us", "unmap+rel us", "total us");
  for (const std::size_t mult : {1u, 2u, 10u, 32u}) {
    const std::size_t chunk = g * mult;
    const std::size_t total = chunk * static_cast<std::size_t>(chunks);
    const std::uintptr_t base = vmm::reserve(total, g);
    if (base == 0) {
      std::printf("%-10zu reserve failed\n", chunk);
      continue;
    }
    std::vector<vmm::Handle> handles(static_cast<std::size_t>(chunks));
    auto t0 = Clock::now();
    int mapped = 0;
    for (; mapped < chunks; ++mapped)
      if (!vmm::create_and_map(0, base + static_cast<std::size_t>(mapped) * chunk, chunk,
                               &handles[static_cast<std::size_t>(mapped)]))
        break;
    const double create_us = us_since(t0);
    t0 = Clock::now();
    const bool access = mapped > 0 && vmm::set_access(0, base, static_cast<std::size_t>(mapped) * chunk);
    const double access_us = us_since(t0);
    const double release_us = release_run(base, chunk, handles, mapped, total);
    if (mapped == 0) {
      std::printf("%-10zu out of memory\n", chunk);
      continue;
    }
    std::printf("%-10zu %14.2f %14.2f %14.2f %14.2f%s\n", chunk, create_us / mapped, access_us / mapped,
                release_us / mapped, (create_us + access_us + release_us) / mapped, access ? "" : " (set_access failed)");
    std::printf("RESULT vmm chunk=%zu chunks=%d create_map_us=%.3f set_access_us=%.3f unmap_release_us=%.3f\n", chunk,
                mapped, create_us / mapped, access_us / mapped, release_us / mapped);
  }
  // What CudaDeviceResource does with chunks of several pages (Note
  // [Physical chunks]): create, map and set access one chunk at a time.
  std::printf("# one chunk at a time (create + map + set_access per chunk), %d chunks per size\n", chunks);
  std::printf("%-10s %14s %14s\n", "chunk", "map+access us", "unmap+rel us");
  for (const std::size_t mult : {1u, 4u, 16u, 64u}) {
    const std::size_t chunk = g * mult;
    const int n = mult >= 16 ? std::max(1, chunks / 8) : chunks;  // stay well inside device memory
    const std::size_t total = chunk * static_cast<std::size_t>(n);
    const std::uintptr_t base = vmm::reserve(total, g);
    if (base == 0) continue;
    std::vector<vmm::Handle> handles(static_cast<std::size_t>(n));
    auto t0 = Clock::now();
    int mapped = 0;
    for (; mapped < n; ++mapped) {
      const std::uintptr_t at = base + static_cast<std::size_t>(mapped) * chunk;
      if (!vmm::create_and_map(0, at, chunk, &handles[static_cast<std::size_t>(mapped)])) break;
      if (!vmm::set_access(0, at, chunk)) {
        vmm::unmap_and_release(at, chunk, handles[static_cast<std::size_t>(mapped)]);
        break;
      }
    }
    const double map_us = us_since(t0);
    const double release_us = release_run(base, chunk, handles, mapped, total);
    if (mapped == 0) continue;
    std::printf("%-10zu %14.2f %14.2f\n", chunk, map_us / mapped, release_us / mapped);
    std::printf("RESULT vmm_each chunk=%zu chunks=%d map_access_us=%.3f unmap_release_us=%.3f\n", chunk, mapped,
                map_us / mapped, release_us / mapped);
  }
  if (cycles > 0) gpu_stall(cycles);
  return 0;
}
