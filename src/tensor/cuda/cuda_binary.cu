// CUDA binary entry: comparisons and logical ops (bool out) here, arithmetic
// in cuda_binary_arith.cu (BinaryOp contract in genesis/tensor/backend.h).
#include "cuda_binary_ops.cuh"
#include "cuda_elementwise.cuh"
#include "cuda_kernels.h"

namespace genesis::kernels::cuda_impl {
namespace {

template <typename T>
void compare_typed(cudaStream_t s, BinaryOp op, const StridedOperand* const* ops) {
  switch (op) {
    case BinaryOp::kEq: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Eq>{}, ops);
    case BinaryOp::kNe: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Ne>{}, ops);
    case BinaryOp::kLt: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Lt>{}, ops);
    case BinaryOp::kLe: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Le>{}, ops);
    case BinaryOp::kGt: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Gt>{}, ops);
    case BinaryOp::kGe: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::Ge>{}, ops);
    case BinaryOp::kLogicalAnd: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::LogicalAnd>{}, ops);
    case BinaryOp::kLogicalOr: return launch_elementwise<bool, T, T>(s, BinaryF<bool, T, bop::LogicalOr>{}, ops);
    default: return;
  }
}

}  // namespace

void binary(const KernelContext& ctx, BinaryOp op, const StridedOperand& out, const StridedOperand& a,
            const StridedOperand& b) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  const StridedOperand* ops[] = {&out, &a, &b};
  if (is_comparison(op)) {
    dispatch(a.dtype, [&](auto tag) { compare_typed<typename decltype(tag)::type>(scope.stream(), op, ops); });
  } else {
    binary_arith(scope.stream(), op, ops);
  }
}

}  // namespace genesis::kernels::cuda_impl
