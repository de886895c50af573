// CUDA iota and random fills. Both are pure functions of the element index,
// evaluated with the CPU's formulas (Note [Random numbers]) so that a seed
// gives the same tensor on CPU and GPU.
//
// Note [No FMA contraction]: nvcc fuses a + b * c into one fused
// multiply-add by default, which rounds once where the CPU (x86-64 without
// -mfma, ISO C++ mode: no contraction) rounds twice. This file is therefore
// compiled with --fmad=false (CMakeLists.txt), so that random_element's
// `low + (high - low) * u` rounds like the CPU; iota spells its product and
// sum with __dmul_rn / __dadd_rn as well, which are never contracted.
#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "genesis/tensor/random_element.h"

namespace genesis::kernels::cuda_impl {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads)
    iota_kernel(T* out, std::int64_t n, std::int64_t start_i, std::int64_t step_i, double start_d, double step_d) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_integral_v<T>) {
      // Unsigned arithmetic: wraps like the CPU's int64 result, without UB.
      out[i] = static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(start_i) +
                                                        static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(step_i)));
    } else {
      out[i] = cast<T>(__dadd_rn(start_d, __dmul_rn(static_cast<double>(i), step_d)));
    }
  }
}

// Element i is random_element<T>(p, i), the CPU's own definition.
template <typename T>
__global__ void __launch_bounds__(kThreads) random_kernel(T* out, std::int64_t n, RandomParams p) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = random_element<T>(p, static_cast<std::uint64_t>(i));
  }
}

}  // namespace

void iota(const KernelContext& ctx, const StridedOperand& out, Scalar start, Scalar step) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  LaunchScope scope(ctx);
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    iota_kernel<T><<<grid_for(n), kThreads, 0, scope.stream()>>>(static_cast<T*>(out.data), n, start.to_int64(),
                                                                  step.to_int64(), start.to_double(), step.to_double());
  });
  GENESIS_CUDA_CHECK_LAUNCH();
}

void random(const KernelContext& ctx, const StridedOperand& out, const RandomParams& params) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  LaunchScope scope(ctx);
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<T><<<grid_for(n), kThreads, 0, scope.stream()>>>(static_cast<T*>(out.data), n, params);
  });
  GENESIS_CUDA_CHECK_LAUNCH();
}

}  // namespace genesis::kernels::cuda_impl
