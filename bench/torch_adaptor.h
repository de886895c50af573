// PyTorch's caching allocator as a benchmark adaptor (see bench_common.h):
// raw_alloc / raw_delete, what C++ extensions use. Shared by
// torch_alloc_bench.cpp and torch_alloc_interleaved.cpp; needs libtorch.
#pragma once

#include <cuda_runtime_api.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <stdexcept>
#include <string>

namespace genesis_bench {

struct TorchAdaptor {
  void* alloc(std::size_t n) {
    void* p = c10::cuda::CUDACachingAllocator::raw_alloc(n);
    if (p == nullptr) throw std::runtime_error("raw_alloc returned nullptr");
    return p;
  }
  void free(void* p) { c10::cuda::CUDACachingAllocator::raw_delete(p); }
  void sync() {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw std::runtime_error(std::string("cudaDeviceSynchronize failed: ") + cudaGetErrorString(e));
  }
};

}  // namespace genesis_bench
