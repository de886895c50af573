// Element casts, host and device: cast<D>(s) is the one definition of Note
// [Cast semantics] (storage/convert.h). convert_dtype, convert_dtype_cuda and
// every kernel backend call it, so a strided tensor copy converts exactly like
// the storage layer does, on the CPU and on the GPU, bit for bit. Also the
// compute types: float16 and bfloat16 compute in float. (In core, below
// storage and tensor, because both use it; the namespace stays
// genesis::kernels, where its callers name it.)
//
// Note [GPU cast = CPU cast]: the same code runs on both sides, so only the
// places where the hardware differs need care. The 16-bit floats convert by
// the portable bit routines of core/half.h everywhere. float <-> double is a
// plain conversion on the CPU, where x86 SSE and AArch64 FCVT keep a NaN's
// sign and payload and set its quiet bit; the GPU's cvt returns a canonical
// NaN instead, so device code builds NaNs from their bits
// (cast_detail::widen_nan, narrow_nan) and leaves every other value to cvt.rn
// (round to nearest even, subnormals kept: Genesis never builds with
// -ftz=true or --use_fast_math).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "genesis/core/half.h"

namespace genesis::kernels {

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// The type arithmetic on T happens in: float for the 16-bit floats, T
/// otherwise.
template <typename T>
using compute_t = std::conditional_t<kIsHalfLike<T>, float, T>;

namespace cast_detail {

/// int64 -> double with the dropped low bits folded into a sticky bit
/// (round to odd), so that one more rounding to float16/bfloat16 equals a
/// single correct rounding of the int64.
GENESIS_HOST_DEVICE inline double int64_to_double_round_odd(std::int64_t v) noexcept {
  const bool negative = v < 0;
  std::uint64_t mag = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int shift = 0;
  while ((mag >> 53) != 0) {
    mag = (mag >> 1) | (mag & 1u);
    ++shift;
  }
  const double d = std::ldexp(static_cast<double>(mag), shift);
  return negative ? -d : d;
}

/// float -> double for a NaN as the CPU converts it: sign and payload kept,
/// quiet bit set. `f` must be a NaN.
GENESIS_HOST_DEVICE constexpr double widen_nan(float f) noexcept {
  const std::uint32_t x = detail::float_bits(f);
  const std::uint64_t sign = static_cast<std::uint64_t>(x & 0x80000000u) << 32;
  const std::uint64_t mant = static_cast<std::uint64_t>(x & 0x7fffffu) << 29;
  return __builtin_bit_cast(double, sign | 0x7ff8000000000000ull | mant);
}

/// double -> float for a NaN as the CPU converts it: sign and the top payload
/// bits kept, quiet bit set. `d` must be a NaN.
GENESIS_HOST_DEVICE constexpr float narrow_nan(double d) noexcept {
  const std::uint64_t x = detail::double_bits(d);
  const auto sign = static_cast<std::uint32_t>(x >> 32) & 0x80000000u;
  const auto mant = static_cast<std::uint32_t>((x & 0xfffffffffffffull) >> 29);
  return detail::bits_float(sign | 0x7fc00000u | mant);
}

GENESIS_HOST_DEVICE constexpr bool is_nan_bits(float f) noexcept {
  return (detail::float_bits(f) & 0x7fffffffu) > 0x7f800000u;
}
GENESIS_HOST_DEVICE constexpr bool is_nan_bits(double d) noexcept {
  return (detail::double_bits(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/// float -> double, exact; NaNs as the CPU converts them on either side.
GENESIS_HOST_DEVICE inline double float_to_double(float f) noexcept {
#if defined(__CUDA_ARCH__)
  if (is_nan_bits(f)) return widen_nan(f);
#endif
  return static_cast<double>(f);
}

/// double -> float, rounded to nearest even; NaNs as the CPU converts them.
GENESIS_HOST_DEVICE inline float double_to_float(double d) noexcept {
#if defined(__CUDA_ARCH__)
  if (is_nan_bits(d)) return narrow_nan(d);
#endif
  return static_cast<float>(d);
}

template <typename S>
GENESIS_HOST_DEVICE constexpr double to_double(S s) noexcept {
  if constexpr (kIsHalfLike<S>) return static_cast<double>(static_cast<float>(s));  // no NaN reaches integers
  else return static_cast<double>(s);
}

/// Floating -> integer: truncate; out of range / inf / NaN give the minimum
/// for int64 and int32; narrower types wrap the int64 result.
template <typename D>
GENESIS_HOST_DEVICE inline D float_to_integer(double d) noexcept {
  constexpr double kTwo63 = 9223372036854775808.0;
  const double t = std::trunc(d);
  if constexpr (std::is_same_v<D, std::int32_t>) {
    if (t >= -2147483648.0 && t < 2147483648.0) return static_cast<std::int32_t>(t);
    return static_cast<std::int32_t>(-2147483647 - 1);
  } else {
    const std::int64_t wide = (t >= -kTwo63 && t < kTwo63) ? static_cast<std::int64_t>(t)
                                                           : static_cast<std::int64_t>(0x8000000000000000ull);
    return static_cast<D>(wide);
  }
}

}  // namespace cast_detail

/// One element from S to D (Note [Cast semantics]). bool elements are read
/// as C++ bool (Genesis only ever stores 0 or 1 in them).
template <typename D, typename S>
GENESIS_HOST_DEVICE inline D cast(S s) noexcept {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<S, bool>) {
    if constexpr (std::is_same_v<D, Half>) return Half::from_bits(s ? 0x3c00 : 0);
    else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(s ? 0x3f80 : 0);
    else return static_cast<D>(s ? 1 : 0);
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (kIsHalfLike<S>) return (s.bits & 0x7fffu) != 0;  // NaN is true
    else return s != 0;
  } else if constexpr (std::is_integral_v<S>) {
    if constexpr (!kIsHalfLike<D>) {
      return static_cast<D>(s);  // integers wrap; floats round once
    } else {
      const double d = std::is_same_v<S, std::int64_t> ? cast_detail::int64_to_double_round_odd(s)
                                                       : static_cast<double>(s);
      return D(d);
    }
  } else {  // floating source
    if constexpr (std::is_integral_v<D>) {
      return cast_detail::float_to_integer<D>(cast_detail::to_double(s));
    } else if constexpr (std::is_same_v<S, double>) {
      if constexpr (std::is_same_v<D, float>) return cast_detail::double_to_float(s);
      else return D(s);  // Half(double) / BFloat16(double) round once
    } else {
      const float f = static_cast<float>(s);  // exact widening
      if constexpr (std::is_same_v<D, double>) return cast_detail::float_to_double(f);
      else return D(f);
    }
  }
}

/// A bool element of a raw buffer, read as a byte: any nonzero byte is true.
/// Reading arbitrary bytes through C++ bool is undefined, and storages may
/// hold bytes other than 0 and 1 (from_blob, files, other libraries).
struct BoolByte {
  std::uint8_t v;
};

/// One element of a buffer conversion (convert_dtype, convert_dtype_cuda):
/// cast<D>(s) with bool elements as BoolByte, and the 16-bit floats passed
/// through float even to their own type, so that a signalling NaN comes out
/// quiet (cast<> itself keeps an identity copy bit for bit).
template <typename D, typename S>
GENESIS_HOST_DEVICE inline D convert_element(S s) noexcept {
  if constexpr (std::is_same_v<S, BoolByte> && std::is_same_v<D, BoolByte>) {
    return BoolByte{static_cast<std::uint8_t>(s.v != 0)};
  } else if constexpr (std::is_same_v<S, BoolByte>) {
    return cast<D>(s.v != 0);
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    return BoolByte{static_cast<std::uint8_t>(cast<bool>(s))};
  } else if constexpr (std::is_same_v<D, S> && kIsHalfLike<S>) {
    return cast<D>(cast<float>(s));
  } else {
    return cast<D>(s);
  }
}

/// A Scalar's value as element type T (the same rules).
template <typename T, typename ScalarT>
GENESIS_HOST_DEVICE inline T scalar_to(const ScalarT& s) noexcept {
  if (s.is_floating()) return cast<T>(s.to_double());
  if (s.is_bool()) return cast<T>(s.to_bool());
  return cast<T>(s.to_int64());
}

}  // namespace genesis::kernels
