// CUDA binary arithmetic (kAdd .. kMinimum of the BinaryOp contract) on the
// element-wise engine. Kept apart from the comparisons so that the two halves
// compile in parallel (each is ~100 kernel instantiations).
#include "cuda_binary_ops.cuh"
#include "cuda_elementwise.cuh"

namespace genesis::kernels::cuda_impl {
namespace {

template <typename T>
void arith_typed(cudaStream_t s, BinaryOp op, const StridedOperand* const* ops) {
  if constexpr (std::is_same_v<T, bool>) {
    // PyTorch's results on bool: + and max are or, - is xor, * and min are and.
    switch (op) {
      case BinaryOp::kAdd: case BinaryOp::kMaximum:
        return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolOr>{}, ops);
      case BinaryOp::kSub: return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolXor>{}, ops);
      case BinaryOp::kMul: case BinaryOp::kMinimum:
        return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolAnd>{}, ops);
      default: return;
    }
  } else {
    switch (op) {
      case BinaryOp::kAdd: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Add>{}, ops);
      case BinaryOp::kSub: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Sub>{}, ops);
      case BinaryOp::kMul: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Mul>{}, ops);
      case BinaryOp::kDiv:
        if constexpr (!std::is_integral_v<T>) return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Div>{}, ops);
        return;
      case BinaryOp::kFloorDiv: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::FloorDiv>{}, ops);
      case BinaryOp::kRemainder: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Remainder>{}, ops);
      case BinaryOp::kPow: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Pow>{}, ops);
      case BinaryOp::kMaximum: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Maximum>{}, ops);
      case BinaryOp::kMinimum: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Minimum>{}, ops);
      default: return;
    }
  }
}

}  // namespace

void binary_arith(cudaStream_t stream, BinaryOp op, const StridedOperand* const* ops) {
  dispatch(ops[1]->dtype, [&](auto tag) { arith_typed<typename decltype(tag)::type>(stream, op, ops); });
}

}  // namespace genesis::kernels::cuda_impl
