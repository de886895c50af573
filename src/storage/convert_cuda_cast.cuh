// Element conversions of convert_dtype_cuda, one value at a time, following
// the CPU's cast_one step by step: see Note [GPU cast = CPU cast] in
// convert_cuda.cu. Included by convert_cuda.cu only (device code); kept apart
// so that the rules can be read, and checked, without the kernel machinery.
// Expects <cuda_fp16.h> and <cuda_bf16.h> included (for the cvt intrinsics).
#pragma once

#include <cstdint>
#include <type_traits>

#include "genesis/core/half.h"

namespace genesis::detail::convert_cuda {

// A bool element as a byte: any nonzero byte reads as true.
struct BoolByte {
  std::uint8_t v;
};

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// --- element conversions (Note [GPU cast = CPU cast]) -------------------------

__device__ __forceinline__ float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  if (em >= 0x7c00u) {  // inf, or NaN made quiet with its payload
    const std::uint32_t mant = em & 0x3ffu;
    return __uint_as_float(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u));
  }
  if (em >= 0x400u) return __uint_as_float(sign | ((em << 13) + (112u << 23)));  // normal: rebias
  // Subnormal or zero: em * 2^-24, exact in float (em < 2^10, result normal).
  return __uint_as_float(sign | __float_as_uint(static_cast<float>(em) * 0x1p-24f));
}

__device__ __forceinline__ float bfloat16_to_float(std::uint16_t b) {
  std::uint32_t x = static_cast<std::uint32_t>(b) << 16;
  if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u;
  return __uint_as_float(x);
}

__device__ __forceinline__ std::uint16_t float_to_half(float f) {
  const std::uint32_t x = __float_as_uint(f);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u | ((abs >> 13) & 0x3ffu));
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

__device__ __forceinline__ double float_to_double(float f) {
  const std::uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    const std::uint64_t sign = static_cast<std::uint64_t>(x & 0x80000000u) << 32;
    const std::uint64_t mant = static_cast<std::uint64_t>(x & 0x7fffffu) << 29;
    return __longlong_as_double(static_cast<long long>(sign | 0x7ff8000000000000ull | mant));
  }
  return static_cast<double>(f);
}

__device__ __forceinline__ float double_to_float(double d) {
  const auto x = static_cast<std::uint64_t>(__double_as_longlong(d));
  if ((x & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
    const auto sign = static_cast<std::uint32_t>(x >> 32) & 0x80000000u;
    const auto mant = static_cast<std::uint32_t>((x & 0xfffffffffffffull) >> 29);
    return __uint_as_float(sign | 0x7fc00000u | mant);
  }
  return __double2float_rn(d);
}

// int64 -> double rounding to odd: the dropped bits fold into a sticky last
// bit, so one more rounding to float16/bfloat16 equals rounding the int64
// once (same as the CPU's int64_to_double_round_odd).
__device__ __forceinline__ double int64_to_double_round_odd(std::int64_t v) {
  const bool negative = v < 0;
  std::uint64_t mag = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int shift = 0;
  if (mag >> 53) {
    shift = 64 - __clzll(static_cast<long long>(mag)) - 53;
    const bool sticky = (mag & ((std::uint64_t{1} << shift) - 1)) != 0;
    mag = (mag >> shift) | (sticky ? 1u : 0u);
  }
  // mag < 2^53 is exact; times 2^shift (shift <= 11) is exact too.
  const double d = static_cast<double>(mag) * static_cast<double>(std::uint64_t{1} << shift);
  return negative ? -d : d;
}

template <typename S>
__device__ __forceinline__ float widen_to_float(S s) {
  if constexpr (std::is_same_v<S, Half>) return half_to_float(s.bits);
  else if constexpr (std::is_same_v<S, BFloat16>) return bfloat16_to_float(s.bits);
  else return s;  // float
}

template <typename D>
__device__ __forceinline__ D float_to_integer(double d) {
  constexpr double kTwo63 = 9223372036854775808.0;
  const double t = trunc(d);
  if constexpr (std::is_same_v<D, std::int32_t>) {
    if (t >= -2147483648.0 && t < 2147483648.0) return static_cast<std::int32_t>(t);
    return static_cast<std::int32_t>(0x80000000u);  // INT32_MIN, as on the CPU
  } else {
    const std::int64_t wide = (t >= -kTwo63 && t < kTwo63) ? static_cast<std::int64_t>(t)
                                                           : static_cast<std::int64_t>(0x8000000000000000ull);
    return static_cast<D>(wide);  // wraps modulo 2^bits for the narrow types
  }
}

template <typename D>
__device__ __forceinline__ D from_exact_double(double d) {  // d exact: round once
  if constexpr (std::is_same_v<D, Half>) return Half::from_bits(double_to_half_bits(d));
  else return BFloat16::from_bits(double_to_bfloat16_bits(d));
}

template <typename D>
__device__ __forceinline__ D from_float(float f) {  // f exact: round once
  if constexpr (std::is_same_v<D, Half>) return Half::from_bits(float_to_half(f));
  else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(float_to_bfloat16(f));
  else if constexpr (std::is_same_v<D, double>) return float_to_double(f);
  else return f;  // float
}

template <typename D, typename S>
__device__ __forceinline__ D cast_one(S s) {
  if constexpr (std::is_same_v<S, BoolByte>) {
    const bool b = s.v != 0;
    if constexpr (std::is_same_v<D, BoolByte>) return BoolByte{static_cast<std::uint8_t>(b)};
    else if constexpr (std::is_same_v<D, Half>) return Half::from_bits(b ? 0x3c00 : 0);
    else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(b ? 0x3f80 : 0);
    else return static_cast<D>(b ? 1 : 0);
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    if constexpr (kIsHalfLike<S>) return BoolByte{static_cast<std::uint8_t>((s.bits & 0x7fffu) != 0)};
    else return BoolByte{static_cast<std::uint8_t>(s != 0)};  // NaN != 0 holds
  } else if constexpr (std::is_integral_v<S>) {
    if constexpr (std::is_integral_v<D> || std::is_floating_point_v<D>) {
      return static_cast<D>(s);  // wraps; cvt.rn rounds to nearest even once
    } else if constexpr (std::is_same_v<S, std::int64_t>) {
      return from_exact_double<D>(int64_to_double_round_odd(s));
    } else if constexpr (std::is_same_v<S, std::int32_t>) {
      return from_exact_double<D>(static_cast<double>(s));  // a float would round first
    } else {
      return from_float<D>(static_cast<float>(s));  // 16 bits or less: exact in float
    }
  } else if constexpr (std::is_same_v<S, double>) {
    if constexpr (std::is_integral_v<D>) return float_to_integer<D>(s);
    else if constexpr (kIsHalfLike<D>) return from_exact_double<D>(s);
    else if constexpr (std::is_same_v<D, double>) return s;  // (the launcher copies instead)
    else return double_to_float(s);
  } else {  // float, float16, bfloat16: widen exactly to float first
    const float f = widen_to_float(s);
    if constexpr (std::is_integral_v<D>) return float_to_integer<D>(static_cast<double>(f));
    else return from_float<D>(f);
  }
}

}  // namespace genesis::detail::convert_cuda
