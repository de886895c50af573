// Half: IEEE binary16 (float16) and bfloat16 storage types and their
// conversions to and from float and double.
//
// Note [Half conversions]: every conversion here is bit-exact IEEE 754:
//   * narrowing rounds to nearest, ties to even, exactly once;
//   * subnormals are produced and consumed (no flush to zero);
//   * values too large for the target become +-infinity;
//   * -0.0 stays -0.0;
//   * a NaN stays a NaN with its sign, the top payload bits that fit, and the
//     quiet bit set (a signalling NaN is quieted, as x86 F16C and CUDA do).
//     Setting the quiet bit also guarantees that a bfloat16 NaN whose payload
//     sat only in the 16 dropped bits does not turn into infinity.
// double -> float16/bfloat16 rounds directly from the double's bits. Going
// through float would round twice: a double just above a float16 tie can
// first round down onto the tie in float and then round to even, which is
// off by one ulp.
//
// Everything is constexpr and marked GENESIS_HOST_DEVICE so that CUDA kernels
// can use the same code; no function here throws.
#pragma once

#include <cstdint>
#include <type_traits>

/// `__host__ __device__` when compiled by nvcc, nothing otherwise.
#ifndef GENESIS_HOST_DEVICE
#if defined(__CUDACC__)
#define GENESIS_HOST_DEVICE __host__ __device__
#else
#define GENESIS_HOST_DEVICE
#endif
#endif

namespace genesis {
namespace detail {

// __builtin_bit_cast rather than std::bit_cast: std::bit_cast is a host-only
// function for nvcc, and the CUDA intrinsics (__float_as_uint, ...) are not
// constexpr. GCC, Clang and nvcc all provide the builtin in constant
// expressions on both sides.
GENESIS_HOST_DEVICE constexpr std::uint32_t float_bits(float f) noexcept {
  return __builtin_bit_cast(std::uint32_t, f);
}

GENESIS_HOST_DEVICE constexpr float bits_float(std::uint32_t b) noexcept {
  return __builtin_bit_cast(float, b);
}

GENESIS_HOST_DEVICE constexpr std::uint64_t double_bits(double d) noexcept {
  return __builtin_bit_cast(std::uint64_t, d);
}

/// Shifts `v` right by `shift` (1..63) rounding to nearest, ties to even.
/// The result may carry into the next bit, which callers rely on: a carry out
/// of the mantissa correctly bumps the exponent (or reaches infinity).
GENESIS_HOST_DEVICE constexpr std::uint64_t shift_right_round_even(std::uint64_t v,
                                                                   int shift) noexcept {
  const std::uint64_t q = v >> shift;
  const std::uint64_t rem = v & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

}  // namespace detail

// ------------------------------------------------------------- float16 ---

/// float -> IEEE binary16 bits, round to nearest even (Note [Half conversions]).
/// Never throws.
GENESIS_HOST_DEVICE constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t x = detail::float_bits(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // infinity or NaN
    if (abs == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 is halfway between 65504 (max half, odd mantissa) and 65536: ties
  // to even round it, and everything above, to infinity.
  if (abs >= 0x477ff000u) return sign | 0x7c00u;
  if (abs >= 0x38800000u) {  // >= 2^-14: a normal half
    // Rebias the exponent (127 -> 15) in place, then drop 13 mantissa bits.
    const std::uint32_t rebiased = abs - (112u << 23);
    return static_cast<std::uint16_t>(sign | detail::shift_right_round_even(rebiased, 13));
  }
  // Subnormal half: the result is round(|f| * 2^24). With the implicit bit,
  // |f| = mant * 2^(exp - 150), so the shift is 126 - exp (>= 14 here).
  const std::uint32_t exp = abs >> 23;
  if (exp < 102) return sign;  // |f| < 2^-25: below half the smallest subnormal
  const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(
      sign | detail::shift_right_round_even(mant, static_cast<int>(126 - exp)));
}

/// IEEE binary16 bits -> float; exact (every half is a float). A NaN is
/// returned quiet with its sign and payload. Never throws.
GENESIS_HOST_DEVICE constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {
    const std::uint32_t quiet = mant != 0 ? 0x400000u : 0u;
    return detail::bits_float(sign | 0x7f800000u | (mant << 13) | quiet);
  }
  if (exp == 0) {
    if (mant == 0) return detail::bits_float(sign);
    // Subnormal half: normalise, since every half subnormal is a normal float.
    exp = 113;  // float exponent field of 2^-14
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    return detail::bits_float(sign | (exp << 23) | ((mant & 0x3ffu) << 13));
  }
  return detail::bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

/// double -> IEEE binary16 bits, rounded once from the double's bits (not via
/// float, which would double-round; Note [Half conversions]). Never throws.
GENESIS_HOST_DEVICE constexpr std::uint16_t double_to_half_bits(double d) noexcept {
  const std::uint64_t x = detail::double_bits(d);
  const auto sign = static_cast<std::uint16_t>((x >> 48) & 0x8000u);
  const std::uint64_t abs = x & 0x7fffffffffffffffull;
  const std::uint64_t exp = abs >> 52;
  if (exp == 0x7ff) {
    if ((abs & 0xfffffffffffffull) == 0) return sign | 0x7c00u;
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 42) & 0x3ffu));
  }
  if (exp >= 1023 + 16) return sign | 0x7c00u;  // >= 65536
  if (exp >= 1023 - 14) {                        // normal half (or rounds to inf)
    const std::uint64_t rebiased = abs - (std::uint64_t{1023 - 15} << 52);
    return static_cast<std::uint16_t>(sign | detail::shift_right_round_even(rebiased, 42));
  }
  // Subnormal half: round(|d| * 2^24) = mant * 2^(exp - 1051).
  const int shift = static_cast<int>(1051 - exp);
  if (shift > 53) return sign;  // |d| < 2^-25 (double subnormals included)
  const std::uint64_t mant = (abs & 0xfffffffffffffull) | (std::uint64_t{1} << 52);
  return static_cast<std::uint16_t>(sign | detail::shift_right_round_even(mant, shift));
}

// ------------------------------------------------------------ bfloat16 ---

/// float -> bfloat16 bits (the top 16 bits of a float), round to nearest
/// even; a NaN stays a NaN (Note [Half conversions]). Never throws.
GENESIS_HOST_DEVICE constexpr std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t x = detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // Truncating alone could leave an all-zero mantissa, i.e. infinity.
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  // Rounding the magnitude bits handles every case at once: a carry out of the
  // mantissa bumps the exponent, and from the largest finite values it
  // reaches 0x7f80, infinity. The sign bit is never touched because the
  // magnitude stays <= 0x7f80.
  return static_cast<std::uint16_t>(detail::shift_right_round_even(x, 16));
}

/// bfloat16 bits -> float; exact. A NaN is returned quiet. Never throws.
GENESIS_HOST_DEVICE constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u;
  return detail::bits_float(x);
}

/// double -> bfloat16 bits, rounded once from the double's bits (not via
/// float, which would double-round; Note [Half conversions]). Never throws.
GENESIS_HOST_DEVICE constexpr std::uint16_t double_to_bfloat16_bits(double d) noexcept {
  const std::uint64_t x = detail::double_bits(d);
  const auto sign = static_cast<std::uint16_t>((x >> 48) & 0x8000u);
  const std::uint64_t abs = x & 0x7fffffffffffffffull;
  const std::uint64_t exp = abs >> 52;
  if (exp == 0x7ff) {
    if ((abs & 0xfffffffffffffull) == 0) return sign | 0x7f80u;
    return static_cast<std::uint16_t>(sign | 0x7fc0u | ((abs >> 45) & 0x7fu));
  }
  if (exp >= 1023 + 128) return sign | 0x7f80u;  // >= 2^128
  if (exp >= 1023 - 126) {                        // normal bfloat16 (or rounds to inf)
    const std::uint64_t rebiased = abs - (std::uint64_t{1023 - 127} << 52);
    return static_cast<std::uint16_t>(sign | detail::shift_right_round_even(rebiased, 45));
  }
  // Subnormal bfloat16: round(|d| * 2^133) = mant * 2^(exp - 942).
  const int shift = static_cast<int>(942 - exp);
  if (shift > 53) return sign;  // |d| < 2^-134
  const std::uint64_t mant = (abs & 0xfffffffffffffull) | (std::uint64_t{1} << 52);
  return static_cast<std::uint16_t>(sign | detail::shift_right_round_even(mant, shift));
}

// --------------------------------------------------------------- types ---

/// A float16 element: 16 bits of IEEE binary16, trivially copyable so that
/// buffers of it can be memcpy'd. Conversions are explicit because they round.
struct Half {
  std::uint16_t bits;

  Half() = default;
  /// Rounds `f` to nearest even. Never throws.
  GENESIS_HOST_DEVICE constexpr explicit Half(float f) noexcept : bits(float_to_half_bits(f)) {}
  /// Rounds `d` once to nearest even (not via float). Never throws.
  GENESIS_HOST_DEVICE constexpr explicit Half(double d) noexcept : bits(double_to_half_bits(d)) {}
  /// Wraps raw bits without conversion. Never throws.
  GENESIS_HOST_DEVICE static constexpr Half from_bits(std::uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
  /// Exact widening. Never throws.
  GENESIS_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return half_bits_to_float(bits);
  }
};

/// A bfloat16 element: the top 16 bits of a float; trivially copyable.
struct BFloat16 {
  std::uint16_t bits;

  BFloat16() = default;
  /// Rounds `f` to nearest even. Never throws.
  GENESIS_HOST_DEVICE constexpr explicit BFloat16(float f) noexcept
      : bits(float_to_bfloat16_bits(f)) {}
  /// Rounds `d` once to nearest even (not via float). Never throws.
  GENESIS_HOST_DEVICE constexpr explicit BFloat16(double d) noexcept
      : bits(double_to_bfloat16_bits(d)) {}
  /// Wraps raw bits without conversion. Never throws.
  GENESIS_HOST_DEVICE static constexpr BFloat16 from_bits(std::uint16_t b) noexcept {
    BFloat16 v;
    v.bits = b;
    return v;
  }
  /// Exact widening. Never throws.
  GENESIS_HOST_DEVICE constexpr explicit operator float() const noexcept {
    return bfloat16_bits_to_float(bits);
  }
};

static_assert(sizeof(Half) == 2 && std::is_trivially_copyable_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<BFloat16>);

}  // namespace genesis
