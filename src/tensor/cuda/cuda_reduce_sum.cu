// CUDA sum, prod and mean (Note [CUDA reduction paths]) and the `reduce`
// entry, which hands max/min/any/all to cuda_reduce_minmax.cu.
#include "cuda_kernels.h"
#include "cuda_reduce.cuh"

namespace genesis::kernels::cuda_impl {

void reduce_sum_family(const LaunchScope& scope, int device, ReduceOp op, const StridedOperand& out,
                       const StridedOperand& in) {
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case ReduceOp::kSum: return launch_reduce(scope, device, out, in, RSum<T>{});
      case ReduceOp::kProd: return launch_reduce(scope, device, out, in, RProd<T>{});
      case ReduceOp::kMean:
        if constexpr (!std::is_integral_v<T>) return launch_reduce(scope, device, out, in, RMean<T>{});
        return;
      default: return;
    }
  });
}

void reduce(const KernelContext& ctx, ReduceOp op, const StridedOperand& out, const StridedOperand& in) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  if (op == ReduceOp::kSum || op == ReduceOp::kProd || op == ReduceOp::kMean) {
    reduce_sum_family(scope, ctx.device.index(), op, out, in);
  } else {
    reduce_minmax_family(scope, ctx.device.index(), op, out, in);
  }
}

}  // namespace genesis::kernels::cuda_impl
