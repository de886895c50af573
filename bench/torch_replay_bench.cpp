// Replays an allocation trace through PyTorch's CUDA caching allocator or
// cudaMallocAsync, on the GPU, so that Genesis's `genesis-mem replay --device
// cuda` numbers have their reference measured in the same run.
//
//   torch_replay_bench TRACE [--allocator pytorch|cudaMallocAsync] [--repeat N]
//
// The PyTorch allocator's own settings come from PYTORCH_CUDA_ALLOC_CONF
// (e.g. expandable_segments:True), read when it initialises: run the program
// once per setting. --repeat N replays the trace N times (default 1), each
// time from an empty cache (the memory of the pass before given back,
// untimed), as `genesis-mem replay --device cuda --repeat N` does with a new
// allocator per pass: one pass of a few thousand events is mostly a handful
// of cudaMalloc and cudaFree calls, whose time varies several-fold from one
// pass to the next, so the median is what compares. Prints one line:
//   REPLAY allocator=... conf=... events=N peak_live=B peak_reserved=B ratio=R ns_per_event=T [runs=T1,T2,...]
// (ns_per_event: the median of the passes; peak_reserved: the highest.)
// Built only with -DGENESIS_TORCH_BENCH=ON (libtorch on the GPU machine).
#include <cuda_runtime_api.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "genesis/debug/trace.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Outcome {
  std::uint64_t peak_live = 0;
  std::uint64_t peak_reserved = 0;
  double ns_per_event = 0;
  std::uint64_t ooms = 0;
};

// empty_fn: the program gave the allocator's cache back (PyTorch's
// empty_cache; Note [Released caches] in genesis/debug/trace.h).
template <class Alloc, class Free, class Empty>
Outcome run(const genesis::debug::Trace& trace, Alloc&& alloc, Free&& free_fn, Empty&& empty_fn) {
  std::vector<void*> slots(trace.num_slots, nullptr);
  std::vector<std::uint64_t> sizes(trace.num_slots, 0);
  Outcome o;
  std::uint64_t live = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& e : trace.events) {
    if (e.op == genesis::debug::TraceOp::kAlloc) {
      void* p = nullptr;
      try {
        p = alloc(e.size);
      } catch (const std::exception&) {
        p = nullptr;
      }
      if (p == nullptr) {
        ++o.ooms;
        continue;
      }
      slots[e.slot] = p;
      sizes[e.slot] = e.size;
      live += e.size;
      o.peak_live = std::max(o.peak_live, live);
    } else if (e.op == genesis::debug::TraceOp::kEmptyCache) {
      empty_fn();
    } else if (e.slot != genesis::debug::kNullSlot && slots[e.slot] != nullptr) {
      free_fn(slots[e.slot]);
      live -= sizes[e.slot];
      slots[e.slot] = nullptr;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  o.ns_per_event = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(trace.events.size());
  for (void* p : slots)
    if (p != nullptr) free_fn(p);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [--allocator pytorch|cudaMallocAsync]\n", argv[0]);
    return 2;
  }
  std::string which = "pytorch";
  int repeat = 1;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--allocator") == 0) which = argv[i + 1];
    if (std::strcmp(argv[i], "--repeat") == 0) {
      char* end = nullptr;
      const long n = std::strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0' || n < 1 || n > 1000) {
        std::fprintf(stderr, "--repeat: expected a count in [1, 1000], got '%s'\n", argv[i + 1]);
        return 2;
      }
      repeat = static_cast<int>(n);
    }
  }
  try {
    const genesis::debug::Trace trace = genesis::debug::read_trace(argv[1]);
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaFree(nullptr), "context creation");
    Outcome o;
    std::vector<double> runs;
    // One pass's outcome joins the others: the highest peak, every time.
    auto add = [&](const Outcome& pass) {
      runs.push_back(pass.ns_per_event);
      o.peak_live = pass.peak_live;
      o.ooms = std::max(o.ooms, pass.ooms);
      o.peak_reserved = std::max(o.peak_reserved, pass.peak_reserved);
    };
    std::string conf = "-";
    if (which == "pytorch") {
      if (const char* c = std::getenv("PYTORCH_CUDA_ALLOC_CONF")) conf = c;
      // A tensor allocation runs PyTorch's lazy CUDA initialisation.
      at::Tensor t = at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, 0)));
      t.reset();
      for (int pass = 0; pass < repeat; ++pass) {
        c10::cuda::CUDACachingAllocator::emptyCache();  // every pass starts from an empty cache
        c10::cuda::CUDACachingAllocator::resetPeakStats(0);
        Outcome one = run(
            trace, [](std::size_t n) { return c10::cuda::CUDACachingAllocator::raw_alloc(n); },
            [](void* p) { c10::cuda::CUDACachingAllocator::raw_delete(p); },
            [] { c10::cuda::CUDACachingAllocator::emptyCache(); });
        const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
        one.peak_reserved = static_cast<std::uint64_t>(stats.reserved_bytes[0].peak);
        add(one);
      }
    } else if (which == "cudaMallocAsync") {
      cudaMemPool_t pool;
      check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
      std::uint64_t threshold = UINT64_MAX;  // "no release": keep freed memory in the pool
      check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "release threshold");
      cudaStream_t stream;
      check(cudaStreamCreate(&stream), "cudaStreamCreate");
      for (int pass = 0; pass < repeat; ++pass) {
        check(cudaStreamSynchronize(stream), "sync");
        check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");  // every pass starts from an empty pool
        std::uint64_t zero = 0;
        check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero), "reset reserved high");
        Outcome one = run(
            trace,
            [&](std::size_t n) {
              void* p = nullptr;
              if (cudaMallocAsync(&p, n, stream) != cudaSuccess) {
                (void)cudaGetLastError();
                return static_cast<void*>(nullptr);
              }
              return p;
            },
            [&](void* p) { check(cudaFreeAsync(p, stream), "cudaFreeAsync"); },
            [&] {
              check(cudaStreamSynchronize(stream), "sync");
              check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
            });
        check(cudaStreamSynchronize(stream), "sync");
        std::uint64_t high = 0;
        check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high), "reserved high");
        one.peak_reserved = high;
        add(one);
      }
    } else {
      std::fprintf(stderr, "unknown allocator '%s'\n", which.c_str());
      return 2;
    }
    std::vector<double> sorted = runs;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t m = sorted.size() / 2;
    o.ns_per_event = sorted.size() % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
    std::string all;
    for (double r : runs) all += (all.empty() ? "" : ",") + std::to_string(static_cast<long long>(r + 0.5));
    std::printf("REPLAY allocator=%s conf=%s events=%zu peak_live=%llu peak_reserved=%llu ratio=%.4f "
                "ns_per_event=%.1f ooms=%llu runs=%s\n",
                which.c_str(), conf.c_str(), trace.events.size(), static_cast<unsigned long long>(o.peak_live),
                static_cast<unsigned long long>(o.peak_reserved),
                o.peak_live ? static_cast<double>(o.peak_reserved) / static_cast<double>(o.peak_live) : 0.0,
                o.ns_per_event, static_cast<unsigned long long>(o.ooms), all.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_replay_bench: error: %s\n", e.what());
    return 1;
  }
}
