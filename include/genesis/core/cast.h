// Element casts, host and device: cast<D>(s) is the one definition of Note
// [Cast semantics] (storage/convert.h). convert_dtype and every kernel
// backend call it, so a strided tensor copy converts exactly like the storage
// layer does. Also the compute types: float16 and bfloat16 compute in float.
// (In core, below storage and tensor, because both use it; the namespace
// stays genesis::kernels, where its callers name it.)
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

template <typename S>
GENESIS_HOST_DEVICE constexpr double to_double(S s) noexcept {
  if constexpr (kIsHalfLike<S>) return static_cast<double>(static_cast<float>(s));
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
      return D(s);  // Half(double) / BFloat16(double) round once; float narrows
    } else {
      const float f = static_cast<float>(s);  // exact widening
      if constexpr (std::is_same_v<D, double>) return static_cast<double>(f);
      else return D(f);
    }
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
