// The binary operations of the CUDA backend as device functors, one per
// BinaryOp, each the CPU backend's formula (src/tensor/cpu/
// cpu_elementwise.cpp) on the compute type C = compute_t<T>, so integer
// results, comparisons and the IEEE operations (+ - * / fmod floor) agree bit
// for bit; only pow goes through a libm that may differ by an ulp.
#pragma once

#include <type_traits>

#include "cuda_common.cuh"
#include "cuda_math.cuh"

namespace genesis::kernels::cuda_impl {

// out = cast<O>(Op(C(a), C(b))).
template <typename O, typename T, typename Op>
struct BinaryF {
  __device__ __forceinline__ O operator()(T a, T b) const {
    using C = compute_t<T>;
    return cast<O>(Op{}(static_cast<C>(a), static_cast<C>(b)));
  }
};

namespace bop {

struct Eq { template <typename C> __device__ bool operator()(C x, C y) const { return x == y; } };
struct Ne { template <typename C> __device__ bool operator()(C x, C y) const { return x != y; } };
struct Lt { template <typename C> __device__ bool operator()(C x, C y) const { return x < y; } };
struct Le { template <typename C> __device__ bool operator()(C x, C y) const { return x <= y; } };
struct Gt { template <typename C> __device__ bool operator()(C x, C y) const { return x > y; } };
struct Ge { template <typename C> __device__ bool operator()(C x, C y) const { return x >= y; } };
struct LogicalAnd { template <typename C> __device__ bool operator()(C x, C y) const { return cast<bool>(x) && cast<bool>(y); } };
struct LogicalOr { template <typename C> __device__ bool operator()(C x, C y) const { return cast<bool>(x) || cast<bool>(y); } };

struct BoolOr { __device__ bool operator()(bool x, bool y) const { return x || y; } };
struct BoolXor { __device__ bool operator()(bool x, bool y) const { return x != y; } };
struct BoolAnd { __device__ bool operator()(bool x, bool y) const { return x && y; } };

// Integer + - * wrap in two's complement, computed unsigned (no UB).
struct Add {
  template <typename C> __device__ C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(x) + static_cast<U>(y));
    } else {
      return x + y;
    }
  }
};
struct Sub {
  template <typename C> __device__ C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(x) - static_cast<U>(y));
    } else {
      return x - y;
    }
  }
};
struct Mul {
  template <typename C> __device__ C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      using W = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, U>;
      return static_cast<C>(static_cast<W>(static_cast<U>(x)) * static_cast<W>(static_cast<U>(y)));
    } else {
      return x * y;
    }
  }
};
struct Div { template <typename C> __device__ C operator()(C x, C y) const { return x / y; } };

struct FloorDiv {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        // MIN / -1 overflows: negate with wrap-around, as the CPU does.
        if (b == C(-1)) return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
        C q = static_cast<C>(a / b);
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
      } else {
        return static_cast<C>(a / b);
      }
    } else {
      if (b == C(0)) return a / b;
      const C mod = dmath::fmod(a, b);
      C div = (a - mod) / b;
      if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
      C floordiv = dmath::floor(div);
      if (div - floordiv > C(0.5)) floordiv += C(1);
      return div == C(0) ? dmath::copysign(C(0), a / b) : floordiv;
    }
  }
};

struct Remainder {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return 0;
        C r = static_cast<C>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      C m = dmath::fmod(a, b);
      if (m != C(0) && ((b < C(0)) != (m < C(0)))) m += b;
      return m;
    }
  }
};

// C's integer / and % (divisor zero -> 0, MIN / -1 wraps), as the CPU.
struct TruncDiv {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
      }
      return static_cast<C>(a / b);
    } else {
      return dmath::trunc(a / b);
    }
  }
};
struct Fmod {
  template <typename C> __device__ C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return 0;
      }
      return static_cast<C>(a % b);
    } else {
      return dmath::fmod(a, b);
    }
  }
};

// Integer dtypes only (bool goes through BoolAnd/BoolOr/BoolXor).
struct BitAnd { template <typename C> __device__ C operator()(C x, C y) const { return static_cast<C>(x & y); } };
struct BitOr { template <typename C> __device__ C operator()(C x, C y) const { return static_cast<C>(x | y); } };
struct BitXor { template <typename C> __device__ C operator()(C x, C y) const { return static_cast<C>(x ^ y); } };
// NumPy's shifts, as the CPU: a count < 0 or >= the bit width shifts every bit out.
struct ShiftLeft {
  template <typename C> __device__ C operator()(C a, C count) const {
    constexpr int kBits = static_cast<int>(sizeof(C) * 8);
    if constexpr (std::is_signed_v<C>) {
      if (count < 0) return 0;
    }
    if (count >= kBits) return 0;
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) << count));
  }
};
struct ShiftRight {
  template <typename C> __device__ C operator()(C a, C count) const {
    constexpr int kBits = static_cast<int>(sizeof(C) * 8);
    bool all_out = count >= kBits;
    if constexpr (std::is_signed_v<C>) all_out = all_out || count < 0;
    if (all_out) {
      if constexpr (std::is_signed_v<C>) return a < 0 ? C(-1) : C(0);
      else return C(0);
    }
    return static_cast<C>(a >> count);
  }
};

struct Pow {
  template <typename C> __device__ C operator()(C base, C exp) const {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (exp < 0) {
          if (base == 1) return 1;
          if (base == C(-1)) return (exp % 2 == 0) ? C(1) : C(-1);
          return 0;
        }
      }
      using U = std::make_unsigned_t<C>;
      U result = 1, b = static_cast<U>(base);
      auto e = static_cast<U>(exp);
      while (e) {
        if (e & 1u) result = static_cast<U>(result * b);
        b = static_cast<U>(b * b);
        e = static_cast<U>(e >> 1);
      }
      return static_cast<C>(result);
    } else {
      return dmath::pow(base, exp);
    }
  }
};

struct Maximum {
  template <typename C> __device__ C operator()(C x, C y) const {
    if constexpr (!std::is_integral_v<C>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return x > y ? x : y;
  }
};
struct Minimum {
  template <typename C> __device__ C operator()(C x, C y) const {
    if constexpr (!std::is_integral_v<C>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return x < y ? x : y;
  }
};

}  // namespace bop

/// Arithmetic half of `binary` (cuda_binary_arith.cu): ops kAdd .. kRightShift.
void binary_arith(cudaStream_t stream, BinaryOp op, const StridedOperand* const* ops);

}  // namespace genesis::kernels::cuda_impl
