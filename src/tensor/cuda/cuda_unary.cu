// CUDA unary element-wise ops and where (UnaryOp contract in
// genesis/tensor/backend.h), on the element-wise engine (Note [CUDA
// element-wise paths]). Each op is the CPU backend's formula
// (src/tensor/cpu/cpu_elementwise.cpp) evaluated in compute_t<T>.
#include <cstring>

#include "cuda_common.cuh"
#include "cuda_elementwise.cuh"
#include "cuda_kernels.h"
#include "cuda_math.cuh"

namespace genesis::kernels::cuda_impl {
namespace {

// out = cast<O>(Op(C(in))) with C the compute type of the input T.
template <typename O, typename T, typename Op>
struct UnaryF {
  __device__ __forceinline__ O operator()(T a) const { return cast<O>(Op{}(static_cast<compute_t<T>>(a))); }
};

struct LogicalNotOp {
  template <typename C>
  __device__ bool operator()(C x) const { return !cast<bool>(x); }
};
struct BitwiseNotOp {  // integer and bool dtypes only
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_same_v<C, bool>) return !x;
    else return static_cast<C>(~x);
  }
};
struct NegOp {
  template <typename C>
  __device__ C operator()(C x) const {
    // Integer negation wraps (uint8: 256 - x), like the CPU and PyTorch.
    if constexpr (std::is_integral_v<C>) return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(x));
    else return -x;
  }
};
struct AbsOp {
  template <typename C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(x < 0 ? U(0) - static_cast<U>(x) : static_cast<U>(x));
    } else {
      return dmath::fabs(x);
    }
  }
};
struct ReluOp {
  template <typename C>
  __device__ C operator()(C x) const { return (x > C(0) || x != x) ? x : C(0); }
};
#define GENESIS_FLOAT_UNARY(Name, expr)                       \
  struct Name {                                               \
    template <typename C>                                     \
    __device__ C operator()(C x) const { return expr; }       \
  };
GENESIS_FLOAT_UNARY(ExpOp, dmath::exp(x))
GENESIS_FLOAT_UNARY(LogOp, dmath::log(x))
GENESIS_FLOAT_UNARY(SqrtOp, dmath::sqrt(x))
GENESIS_FLOAT_UNARY(SigmoidOp, C(1) / (C(1) + dmath::exp(-x)))
GENESIS_FLOAT_UNARY(TanhOp, dmath::tanh(x))
GENESIS_FLOAT_UNARY(SinOp, dmath::sin(x))
GENESIS_FLOAT_UNARY(CosOp, dmath::cos(x))
#undef GENESIS_FLOAT_UNARY

template <typename T>
void unary_typed(cudaStream_t s, UnaryOp op, const StridedOperand* const* ops) {
  if (op == UnaryOp::kLogicalNot) return launch_elementwise<bool, T>(s, UnaryF<bool, T, LogicalNotOp>{}, ops);
  if (op == UnaryOp::kBitwiseNot) {
    if constexpr (std::is_integral_v<T>) return launch_elementwise<T, T>(s, UnaryF<T, T, BitwiseNotOp>{}, ops);
    return;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case UnaryOp::kNeg: return launch_elementwise<T, T>(s, UnaryF<T, T, NegOp>{}, ops);
      case UnaryOp::kAbs: return launch_elementwise<T, T>(s, UnaryF<T, T, AbsOp>{}, ops);
      case UnaryOp::kRelu: return launch_elementwise<T, T>(s, UnaryF<T, T, ReluOp>{}, ops);
      default: break;
    }
    if constexpr (!std::is_integral_v<T>) {
      switch (op) {
        case UnaryOp::kExp: return launch_elementwise<T, T>(s, UnaryF<T, T, ExpOp>{}, ops);
        case UnaryOp::kLog: return launch_elementwise<T, T>(s, UnaryF<T, T, LogOp>{}, ops);
        case UnaryOp::kSqrt: return launch_elementwise<T, T>(s, UnaryF<T, T, SqrtOp>{}, ops);
        case UnaryOp::kSigmoid: return launch_elementwise<T, T>(s, UnaryF<T, T, SigmoidOp>{}, ops);
        case UnaryOp::kTanh: return launch_elementwise<T, T>(s, UnaryF<T, T, TanhOp>{}, ops);
        case UnaryOp::kSin: return launch_elementwise<T, T>(s, UnaryF<T, T, SinOp>{}, ops);
        case UnaryOp::kCos: return launch_elementwise<T, T>(s, UnaryF<T, T, CosOp>{}, ops);
        default: break;
      }
    }
  }
}

template <typename T>
struct WhereF {
  __device__ __forceinline__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

void unary(const KernelContext& ctx, UnaryOp op, const StridedOperand& out, const StridedOperand& in) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  const StridedOperand* ops[] = {&out, &in};
  dispatch(in.dtype, [&](auto tag) { unary_typed<typename decltype(tag)::type>(scope.stream(), op, ops); });
}

void where(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& cond, const StridedOperand& a,
           const StridedOperand& b) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  const StridedOperand* ops[] = {&out, &cond, &a, &b};
  // Only bits move: one instantiation per element size. A constant input's
  // value is converted in its dtype first, then reinterpreted.
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = uint_of_size_t<sizeof(T)>;
    StridedOperand ua = a, ub = b;
    auto as_bits = [](StridedOperand& op) {
      if (!op.is_scalar) return;
      const T v = scalar_to<T>(op.scalar);
      U bits;
      std::memcpy(&bits, &v, sizeof(T));
      op.scalar = Scalar(static_cast<std::int64_t>(bits));  // scalar_to<U> of an int64 wraps back to the bits
    };
    as_bits(ua);
    as_bits(ub);
    const StridedOperand* uops[] = {ops[0], ops[1], &ua, &ub};
    launch_elementwise<U, bool, U, U>(scope.stream(), WhereF<U>{}, uops);
  });
}

}  // namespace genesis::kernels::cuda_impl
