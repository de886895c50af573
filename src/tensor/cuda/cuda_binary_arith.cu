// CUDA binary arithmetic (kAdd .. kRightShift of the BinaryOp contract) on the
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
      case BinaryOp::kMul: case BinaryOp::kMinimum: case BinaryOp::kBitwiseAnd:
        return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolAnd>{}, ops);
      case BinaryOp::kBitwiseOr: return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolOr>{}, ops);
      case BinaryOp::kBitwiseXor:
        return launch_elementwise<bool, bool, bool>(s, BinaryF<bool, bool, bop::BoolXor>{}, ops);
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
      case BinaryOp::kTruncDiv: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::TruncDiv>{}, ops);
      case BinaryOp::kFmod: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::Fmod>{}, ops);
      default: break;
    }
    // Bitwise operations and shifts: integer dtypes only (Note [Kernel contracts]).
    if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case BinaryOp::kBitwiseAnd: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::BitAnd>{}, ops);
        case BinaryOp::kBitwiseOr: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::BitOr>{}, ops);
        case BinaryOp::kBitwiseXor: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::BitXor>{}, ops);
        case BinaryOp::kLeftShift: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::ShiftLeft>{}, ops);
        case BinaryOp::kRightShift: return launch_elementwise<T, T, T>(s, BinaryF<T, T, bop::ShiftRight>{}, ops);
        default: return;
      }
    }
  }
}

}  // namespace

void binary_arith(cudaStream_t stream, BinaryOp op, const StridedOperand* const* ops) {
  dispatch(ops[1]->dtype, [&](auto tag) { arith_typed<typename decltype(tag)::type>(stream, op, ops); });
}

}  // namespace genesis::kernels::cuda_impl
