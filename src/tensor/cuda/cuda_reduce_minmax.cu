// CUDA max, min, any, all (Note [CUDA reduction paths]) and arg_reduce.
#include "cuda_kernels.h"
#include "cuda_reduce.cuh"

namespace genesis::kernels::cuda_impl {
namespace {

// One (value, index) candidate of an arg-reduction. A NaN beats everything
// (for max and for min) and among equals the smaller index wins: the CPU's
// "first index of the extreme, first NaN wins".
template <typename C, bool kMax>
__device__ __forceinline__ bool better(C v, std::int64_t i, bool v_nan, C best, std::int64_t best_i, bool best_nan) {
  if (best_nan) return v_nan && i < best_i;
  if (v_nan) return true;
  if (kMax ? v > best : v < best) return true;
  return v == best && i < best_i;
}

template <typename C>
__device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_integral_v<C>) return false;
  else return v != v;
}

// One warp per output row of `len` elements along the reduced dim.
template <typename T, bool kMax>
__global__ void __launch_bounds__(256) arg_reduce_kernel(const char* in, Iter<3> outer, std::int64_t num_out,
                                                         std::int64_t len, std::int64_t step, char* values,
                                                         char* indices) {
  using C = compute_t<T>;
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (o >= num_out) return;
  const int lane = threadIdx.x & 31;
  std::int64_t off[3];
  iter_offsets<std::int64_t, 3>(outer, o, off);
  const char* row = in + off[0];
  C best{};
  std::int64_t best_i = 0x7fffffffffffffffll;
  bool best_nan = false, have = false;
  for (std::int64_t k = lane; k < len; k += 32) {
    const C v = static_cast<C>(*reinterpret_cast<const T*>(row + k * step));
    const bool v_nan = is_nan(v);
    if (!have || better<C, kMax>(v, k, v_nan, best, best_i, best_nan)) {
      best = v;
      best_i = k;
      best_nan = v_nan;
      have = true;
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    const C v = shfl_down(best, d);
    const std::int64_t i = __shfl_down_sync(0xffffffffu, static_cast<long long>(best_i), d);
    const bool v_nan = __shfl_down_sync(0xffffffffu, static_cast<int>(best_nan), d) != 0;
    const bool v_have = __shfl_down_sync(0xffffffffu, static_cast<int>(have), d) != 0;
    if (v_have && (!have || better<C, kMax>(v, i, v_nan, best, best_i, best_nan))) {
      best = v;
      best_i = i;
      best_nan = v_nan;
      have = true;
    }
  }
  if (lane == 0) {
    *reinterpret_cast<std::int64_t*>(indices + off[1]) = best_i;
    if (values != nullptr) *reinterpret_cast<T*>(values + off[2]) = cast<T>(best);
  }
}

}  // namespace

void reduce_minmax_family(const LaunchScope& scope, int device, ReduceOp op, const StridedOperand& out,
                          const StridedOperand& in) {
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case ReduceOp::kMax: return launch_reduce(scope, device, out, in, RMinMax<T, true>{});
      case ReduceOp::kMin: return launch_reduce(scope, device, out, in, RMinMax<T, false>{});
      case ReduceOp::kAny: return launch_reduce(scope, device, out, in, RAnyAll<T, true>{});
      case ReduceOp::kAll: return launch_reduce(scope, device, out, in, RAnyAll<T, false>{});
      default: return;
    }
  });
}

void arg_reduce(const KernelContext& ctx, ArgReduceOp op, const StridedOperand& values, const StridedOperand& indices,
                const StridedOperand& in, int dim) {
  StridedOperand outer = in;
  outer.sizes[dim] = 1;
  const std::int64_t num_out = outer.numel();
  if (num_out == 0) return;
  LaunchScope scope(ctx);
  const bool with_values = values.data != nullptr;
  // Iterate the outputs over in's other dims: operands in, indices, values.
  const std::int64_t* strides[3] = {in.strides, indices.strides, with_values ? values.strides : indices.strides};
  const std::size_t isz[3] = {dtype_size(in.dtype), 8, with_values ? dtype_size(in.dtype) : 8};
  const Iter<3> it = make_iter<3>(outer.ndim, outer.sizes, strides, isz);
  const std::int64_t len = in.sizes[dim];
  const std::int64_t step = in.strides[dim] * static_cast<std::int64_t>(dtype_size(in.dtype));
  const auto blocks = static_cast<unsigned>((num_out + 7) / 8);
  if (num_out > 0x7fffffffll * 8) GENESIS_THROW(InvalidArgumentError, "arg_reduce: too many outputs (", num_out, ")");
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    char* vals = with_values ? static_cast<char*>(values.data) : nullptr;
    if (op == ArgReduceOp::kMax) {
      arg_reduce_kernel<T, true><<<blocks, 256, 0, scope.stream()>>>(static_cast<const char*>(in.data), it, num_out,
                                                                      len, step, vals, static_cast<char*>(indices.data));
    } else {
      arg_reduce_kernel<T, false><<<blocks, 256, 0, scope.stream()>>>(static_cast<const char*>(in.data), it, num_out,
                                                                       len, step, vals, static_cast<char*>(indices.data));
    }
  });
  GENESIS_CUDA_CHECK_LAUNCH();
}

}  // namespace genesis::kernels::cuda_impl
