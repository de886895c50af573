// CPU element-wise kernels: unary, binary (arithmetic and comparisons) and
// where. One template per op instantiated over the dtypes the contract
// allows (genesis/tensor/backend.h).
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_kernels.h"
#include "cpu_loops.h"

namespace genesis::kernels::cpu {
namespace {

template <typename T>
inline constexpr bool kFloatLike = !std::is_integral_v<T>;

// Applies f over out[i] = f(in[i]) with T the input type and O the output.
template <typename O, typename T, typename F>
void unary_loop(const StridedOperand& out, const StridedOperand& in, F f) {
  const StridedOperand* ops[] = {&out, &in};
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  run(make_loop(ops, 2, base), [&](char** p, const std::int64_t* s, std::int64_t n) {
    using C = compute_t<T>;
    if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
      O* o = reinterpret_cast<O*>(p[0]);
      const T* a = reinterpret_cast<const T*>(p[1]);
      for (std::int64_t i = 0; i < n; ++i) o[i] = cast<O>(f(static_cast<C>(a[i])));
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        store<O>(p[0] + i * s[0], cast<O>(f(static_cast<C>(load<T>(p[1] + i * s[1])))));
      }
    }
  });
}

template <typename T>
void unary_typed(UnaryOp op, const StridedOperand& out, const StridedOperand& in) {
  using C = compute_t<T>;
  if (op == UnaryOp::kLogicalNot) {
    unary_loop<bool, T>(out, in, [](C x) { return !cast<bool>(x); });
    return;
  }
  if (op == UnaryOp::kBitwiseNot) {  // integer and bool dtypes only
    if constexpr (std::is_same_v<T, bool>) unary_loop<bool, T>(out, in, [](bool x) { return !x; });
    else if constexpr (std::is_integral_v<T>) unary_loop<T, T>(out, in, [](C x) { return static_cast<C>(~x); });
    return;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case UnaryOp::kNeg:
        // Unsigned negation wraps (uint8 -x = 256 - x), like PyTorch.
        return unary_loop<T, T>(out, in, [](C x) {
          if constexpr (std::is_integral_v<C>) {
            return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(x));
          } else {
            return -x;
          }
        });
      case UnaryOp::kAbs:
        return unary_loop<T, T>(out, in, [](C x) {
          if constexpr (std::is_unsigned_v<C>) return x;
          else if constexpr (std::is_integral_v<C>) {
            using U = std::make_unsigned_t<C>;
            return static_cast<C>(x < 0 ? U(0) - static_cast<U>(x) : static_cast<U>(x));  // abs(MIN) wraps
          }
          else return std::fabs(x);
        });
      case UnaryOp::kRelu:
        return unary_loop<T, T>(out, in, [](C x) { return (x > C(0) || x != x) ? x : C(0); });
      default: break;
    }
    if constexpr (kFloatLike<T>) {
      switch (op) {
        case UnaryOp::kExp: return unary_loop<T, T>(out, in, [](C x) { return std::exp(x); });
        case UnaryOp::kLog: return unary_loop<T, T>(out, in, [](C x) { return std::log(x); });
        case UnaryOp::kSqrt: return unary_loop<T, T>(out, in, [](C x) { return std::sqrt(x); });
        case UnaryOp::kSigmoid: return unary_loop<T, T>(out, in, [](C x) { return C(1) / (C(1) + std::exp(-x)); });
        case UnaryOp::kTanh: return unary_loop<T, T>(out, in, [](C x) { return std::tanh(x); });
        case UnaryOp::kSin: return unary_loop<T, T>(out, in, [](C x) { return std::sin(x); });
        case UnaryOp::kCos: return unary_loop<T, T>(out, in, [](C x) { return std::cos(x); });
        default: break;
      }
    }
  }
}

// Python floor division and modulo for integers (divisor zero -> 0: the
// tensor layer raised before, Note [Integer division by zero]).
template <typename C>
C floor_div_int(C a, C b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    // MIN / -1 overflows (a trap on x86): negate with wrap-around instead.
    if (b == C(-1)) return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
    C q = static_cast<C>(a / b);
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    return static_cast<C>(a / b);
  }
}
template <typename C>
C remainder_int(C a, C b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return 0;
    C r = static_cast<C>(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    return r;
  } else {
    return static_cast<C>(a % b);
  }
}
// C's integer / and % (toward zero; divisor zero -> 0, MIN / -1 wraps).
template <typename C>
C trunc_div_int(C a, C b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(a));
  }
  return static_cast<C>(a / b);
}
template <typename C>
C fmod_int(C a, C b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return 0;
  }
  return static_cast<C>(a % b);
}
// NumPy's shifts: a count < 0 or >= the bit width shifts every bit out. The
// left shift goes through the unsigned type (wraps, no signed overflow);
// the right shift of a signed value is arithmetic.
template <typename C>
C shift_left(C a, C count) {
  constexpr int kBits = static_cast<int>(sizeof(C) * 8);
  if constexpr (std::is_signed_v<C>) {
    if (count < 0) return 0;
  }
  if (count >= kBits) return 0;
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) << count));
}
template <typename C>
C shift_right(C a, C count) {
  constexpr int kBits = static_cast<int>(sizeof(C) * 8);
  bool all_out = count >= kBits;
  if constexpr (std::is_signed_v<C>) all_out = all_out || count < 0;
  if (all_out) {
    if constexpr (std::is_signed_v<C>) return a < 0 ? C(-1) : C(0);
    else return 0;
  }
  return static_cast<C>(a >> count);
}
template <typename C>
C pow_int(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == C(-1)) return (exp % 2 == 0) ? C(1) : C(-1);
      return 0;
    }
  }
  // Square-and-multiply in the unsigned type so overflow wraps (defined).
  using U = std::make_unsigned_t<C>;
  U result = 1, b = static_cast<U>(base);
  auto e = static_cast<std::make_unsigned_t<C>>(exp);
  while (e) {
    if (e & 1u) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<C>(result);
}

template <typename O, typename T, typename F>
void binary_loop(const StridedOperand& out, const StridedOperand& a, const StridedOperand& b, F f) {
  std::int64_t slot_a = 0, slot_b = 0;
  const StridedOperand* ops[] = {&out, &a, &b};
  char* base[] = {static_cast<char*>(out.data), input_base(a, &slot_a), input_base(b, &slot_b)};
  using C = compute_t<T>;
  run(make_loop(ops, 3, base), [&](char** p, const std::int64_t* s, std::int64_t n) {
    if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
      O* o = reinterpret_cast<O*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      const T* y = reinterpret_cast<const T*>(p[2]);
      for (std::int64_t i = 0; i < n; ++i) o[i] = cast<O>(f(static_cast<C>(x[i]), static_cast<C>(y[i])));
    } else if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == 0) {
      O* o = reinterpret_cast<O*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      const C y = static_cast<C>(load<T>(p[2]));
      for (std::int64_t i = 0; i < n; ++i) o[i] = cast<O>(f(static_cast<C>(x[i]), y));
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        store<O>(p[0] + i * s[0], cast<O>(f(static_cast<C>(load<T>(p[1] + i * s[1])),
                                           static_cast<C>(load<T>(p[2] + i * s[2])))));
      }
    }
  });
}

template <typename T>
void binary_typed(BinaryOp op, const StridedOperand& out, const StridedOperand& a, const StridedOperand& b) {
  using C = compute_t<T>;
  switch (op) {
    case BinaryOp::kEq: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x == y; });
    case BinaryOp::kNe: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x != y; });
    case BinaryOp::kLt: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x < y; });
    case BinaryOp::kLe: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x <= y; });
    case BinaryOp::kGt: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x > y; });
    case BinaryOp::kGe: return binary_loop<bool, T>(out, a, b, [](C x, C y) { return x >= y; });
    case BinaryOp::kLogicalAnd:
      return binary_loop<bool, T>(out, a, b, [](C x, C y) { return cast<bool>(x) && cast<bool>(y); });
    case BinaryOp::kLogicalOr:
      return binary_loop<bool, T>(out, a, b, [](C x, C y) { return cast<bool>(x) || cast<bool>(y); });
    default: break;
  }
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::kAdd: case BinaryOp::kMaximum:
        return binary_loop<T, T>(out, a, b, [](bool x, bool y) { return x || y; });
      case BinaryOp::kSub: return binary_loop<T, T>(out, a, b, [](bool x, bool y) { return x != y; });
      case BinaryOp::kMul: case BinaryOp::kMinimum: case BinaryOp::kBitwiseAnd:
        return binary_loop<T, T>(out, a, b, [](bool x, bool y) { return x && y; });
      case BinaryOp::kBitwiseOr: return binary_loop<T, T>(out, a, b, [](bool x, bool y) { return x || y; });
      case BinaryOp::kBitwiseXor: return binary_loop<T, T>(out, a, b, [](bool x, bool y) { return x != y; });
      default: return;  // excluded by the tensor layer
    }
  } else {
    switch (op) {
      case BinaryOp::kAdd:
        if constexpr (std::is_integral_v<C>) {
          // Wrap on overflow (two's complement) without signed-overflow UB.
          using U = std::make_unsigned_t<C>;
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(static_cast<U>(x) + static_cast<U>(y)); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return x + y; });
        }
      case BinaryOp::kSub:
        if constexpr (std::is_integral_v<C>) {
          using U = std::make_unsigned_t<C>;
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(static_cast<U>(x) - static_cast<U>(y)); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return x - y; });
        }
      case BinaryOp::kMul:
        if constexpr (std::is_integral_v<C>) {
          using U = std::make_unsigned_t<C>;
          using W = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, U>;  // avoid int promotion UB
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(static_cast<W>(static_cast<U>(x)) * static_cast<W>(static_cast<U>(y))); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return x * y; });
        }
      case BinaryOp::kDiv:
        if constexpr (!std::is_integral_v<C>) return binary_loop<T, T>(out, a, b, [](C x, C y) { return x / y; });
        return;
      case BinaryOp::kFloorDiv:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return floor_div_int(x, y); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) {
            if (y == C(0)) return x / y;
            const C mod = std::fmod(x, y);
            C div = (x - mod) / y;
            if (mod != C(0) && ((y < C(0)) != (mod < C(0)))) div -= C(1);
            C floordiv = std::floor(div);
            if (div - floordiv > C(0.5)) floordiv += C(1);
            return div == C(0) ? std::copysign(C(0), x / y) : floordiv;
          });
        }
      case BinaryOp::kRemainder:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return remainder_int(x, y); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) {
            C m = std::fmod(x, y);
            if (m != C(0) && ((y < C(0)) != (m < C(0)))) m += y;
            return m;
          });
        }
      case BinaryOp::kTruncDiv:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return trunc_div_int(x, y); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return std::trunc(x / y); });
        }
      case BinaryOp::kFmod:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return fmod_int(x, y); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return std::fmod(x, y); });
        }
      case BinaryOp::kBitwiseAnd:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(x & y); });
        }
        return;
      case BinaryOp::kBitwiseOr:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(x | y); });
        }
        return;
      case BinaryOp::kBitwiseXor:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return static_cast<C>(x ^ y); });
        }
        return;
      case BinaryOp::kLeftShift:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return shift_left(x, y); });
        }
        return;
      case BinaryOp::kRightShift:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return shift_right(x, y); });
        }
        return;
      case BinaryOp::kPow:
        if constexpr (std::is_integral_v<C>) {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return pow_int(x, y); });
        } else {
          return binary_loop<T, T>(out, a, b, [](C x, C y) { return std::pow(x, y); });
        }
      case BinaryOp::kMaximum:
        return binary_loop<T, T>(out, a, b, [](C x, C y) {
          if constexpr (!std::is_integral_v<C>) {
            if (x != x) return x;
            if (y != y) return y;
          }
          return x > y ? x : y;
        });
      case BinaryOp::kMinimum:
        return binary_loop<T, T>(out, a, b, [](C x, C y) {
          if constexpr (!std::is_integral_v<C>) {
            if (x != x) return x;
            if (y != y) return y;
          }
          return x < y ? x : y;
        });
      default: return;
    }
  }
}

}  // namespace

void unary(const KernelContext&, UnaryOp op, const StridedOperand& out, const StridedOperand& in) {
  dispatch(in.dtype, [&](auto tag) { unary_typed<typename decltype(tag)::type>(op, out, in); });
}

void binary(const KernelContext&, BinaryOp op, const StridedOperand& out, const StridedOperand& a,
            const StridedOperand& b) {
  dispatch(a.dtype, [&](auto tag) { binary_typed<typename decltype(tag)::type>(op, out, a, b); });
}

void where(const KernelContext&, const StridedOperand& out, const StridedOperand& cond, const StridedOperand& a,
           const StridedOperand& b) {
  std::int64_t slot_a = 0, slot_b = 0;
  const StridedOperand* ops[] = {&out, &cond, &a, &b};
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(cond.data), input_base(a, &slot_a),
                  input_base(b, &slot_b)};
  const Loop loop = make_loop(ops, 4, base);
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run(loop, [&](char** p, const std::int64_t* s, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        const bool c = load<bool>(p[1] + i * s[1]);
        store<T>(p[0] + i * s[0], load<T>(c ? p[2] + i * s[2] : p[3] + i * s[3]));
      }
    });
  });
}

}  // namespace genesis::kernels::cpu
