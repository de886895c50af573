// What the CUDA virtual-memory calls cost, per physical handle and per byte:
// the figures behind the page size of expandable segments (Note [Expandable
// segments]). For each chunk size, maps N chunks into one reserved range
// (create + map per chunk, one set-access per run), then unmaps and releases
// them, and prints microseconds per chunk for each step.
//
//   vmm_bench [--chunks N]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <vector>

#include "genesis/cuda/runtime.h"
#include "genesis/cuda/vmm.h"

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

}  // namespace

int main(int argc, char** argv) {
  int chunks = 256;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--chunks") == 0) chunks = std::atoi(argv[i + 1]);
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
  return 0;
}
