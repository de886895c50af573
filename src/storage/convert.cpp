// convert_dtype: see include/genesis/storage/convert.h, Note [Cast semantics].
#include "genesis/storage/convert.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/core/half.h"

namespace genesis {
namespace {

// Storage type of a bool element. Reading arbitrary bytes through `bool` is
// undefined, so bool buffers are handled as bytes.
struct BoolByte {
  std::uint8_t v;
};

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T>;

template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point_v<T> || kIsHalfLike<T>;

// int64 -> double with round-to-odd: the dropped low bits are folded into a
// sticky last bit. A double holds 53 bits, far more than the 11 + 2 that a
// second rounding to float16/bfloat16 needs to stay correct, so
// double_to_*_bits of the result equals rounding the int64 once.
double int64_to_double_round_odd(std::int64_t v) {
  const bool negative = v < 0;
  // Negate in unsigned arithmetic: INT64_MIN has no positive int64.
  std::uint64_t mag = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  int shift = 0;
  if (mag >> 53) {
    shift = 64 - std::countl_zero(mag) - 53;
    const bool sticky = (mag & ((std::uint64_t{1} << shift) - 1)) != 0;
    mag = (mag >> shift) | (sticky ? 1u : 0u);
  }
  const double d = std::ldexp(static_cast<double>(mag), shift);  // exact
  return negative ? -d : d;
}

// Widens any floating element exactly to double.
template <typename S>
double to_double(S s) {
  if constexpr (std::is_same_v<S, Half>) {
    return static_cast<double>(half_bits_to_float(s.bits));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return static_cast<double>(bfloat16_bits_to_float(s.bits));
  } else {
    return static_cast<double>(s);
  }
}

// Floating -> integer per Note [Cast semantics]. `d` is the exact source value.
template <typename D>
D float_to_integer(double d) {
  // 2^63 and 2^31 are exact doubles; NaN fails every comparison.
  constexpr double kTwo63 = 9223372036854775808.0;
  const double t = std::trunc(d);
  if constexpr (std::is_same_v<D, std::int32_t>) {
    if (t >= -2147483648.0 && t < 2147483648.0) return static_cast<std::int32_t>(t);
    return std::numeric_limits<std::int32_t>::min();
  } else {
    const std::int64_t wide = (t >= -kTwo63 && t < kTwo63) ? static_cast<std::int64_t>(t)
                                                           : std::numeric_limits<std::int64_t>::min();
    // Integer -> integer conversion wraps modulo 2^bits since C++20.
    return static_cast<D>(wide);
  }
}

// One element, per Note [Cast semantics].
template <typename D, typename S>
D cast_one(S s) {
  if constexpr (std::is_same_v<S, BoolByte>) {
    const bool b = s.v != 0;
    if constexpr (std::is_same_v<D, BoolByte>) return BoolByte{static_cast<std::uint8_t>(b)};
    else if constexpr (std::is_same_v<D, Half>) return Half::from_bits(b ? 0x3c00 : 0);
    else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(b ? 0x3f80 : 0);
    else return static_cast<D>(b ? 1 : 0);
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    if constexpr (kIsHalfLike<S>) {
      // Zero is +-0 only; NaN has a nonzero magnitude and so is true.
      return BoolByte{static_cast<std::uint8_t>((s.bits & 0x7fffu) != 0)};
    } else {
      return BoolByte{static_cast<std::uint8_t>(s != 0)};  // NaN != 0 holds
    }
  } else if constexpr (kIsInteger<S>) {
    if constexpr (kIsInteger<D> || std::is_floating_point_v<D>) {
      return static_cast<D>(s);  // wraps / rounds to nearest once
    } else if constexpr (std::is_same_v<S, std::int64_t>) {
      const double d = int64_to_double_round_odd(s);
      if constexpr (std::is_same_v<D, Half>) return Half::from_bits(double_to_half_bits(d));
      else return BFloat16::from_bits(double_to_bfloat16_bits(d));
    } else {
      const double d = static_cast<double>(s);  // exact for 32 bits and less
      if constexpr (std::is_same_v<D, Half>) return Half::from_bits(double_to_half_bits(d));
      else return BFloat16::from_bits(double_to_bfloat16_bits(d));
    }
  } else {  // floating source
    if constexpr (kIsInteger<D>) {
      return float_to_integer<D>(to_double(s));
    } else if constexpr (std::is_same_v<S, double>) {
      if constexpr (std::is_same_v<D, Half>) return Half::from_bits(double_to_half_bits(s));
      else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(double_to_bfloat16_bits(s));
      else return static_cast<D>(s);  // IEEE narrowing (Annex F): overflow -> inf
    } else {
      // float, float16 and bfloat16 all widen exactly to float.
      float f;
      if constexpr (std::is_same_v<S, Half>) f = half_bits_to_float(s.bits);
      else if constexpr (std::is_same_v<S, BFloat16>) f = bfloat16_bits_to_float(s.bits);
      else f = s;
      if constexpr (std::is_same_v<D, Half>) return Half::from_bits(float_to_half_bits(f));
      else if constexpr (std::is_same_v<D, BFloat16>) return BFloat16::from_bits(float_to_bfloat16_bits(f));
      else return static_cast<D>(f);
    }
  }
}

// Loads and stores go through memcpy: buffers only promise the element's
// natural alignment, and in-place conversions (src == dst, same size) read
// and write the same bytes through different types.
template <typename D, typename S>
void convert_range(const unsigned char* src, unsigned char* dst, std::size_t begin,
                   std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    S s;
    std::memcpy(&s, src + i * sizeof(S), sizeof(S));
    const D d = cast_one<D>(s);
    std::memcpy(dst + i * sizeof(D), &d, sizeof(D));
  }
}

using RangeFn = void (*)(const unsigned char*, unsigned char*, std::size_t, std::size_t);

template <typename S>
RangeFn pick_dst(DType dst) {
  switch (dst) {
    case DType::kBool: return &convert_range<BoolByte, S>;
    case DType::kUInt8: return &convert_range<std::uint8_t, S>;
    case DType::kInt8: return &convert_range<std::int8_t, S>;
    case DType::kInt16: return &convert_range<std::int16_t, S>;
    case DType::kInt32: return &convert_range<std::int32_t, S>;
    case DType::kInt64: return &convert_range<std::int64_t, S>;
    case DType::kFloat16: return &convert_range<Half, S>;
    case DType::kBFloat16: return &convert_range<BFloat16, S>;
    case DType::kFloat32: return &convert_range<float, S>;
    case DType::kFloat64: return &convert_range<double, S>;
  }
  return nullptr;  // unreachable: validated by the caller
}

RangeFn pick(DType src, DType dst) {
  switch (src) {
    case DType::kBool: return pick_dst<BoolByte>(dst);
    case DType::kUInt8: return pick_dst<std::uint8_t>(dst);
    case DType::kInt8: return pick_dst<std::int8_t>(dst);
    case DType::kInt16: return pick_dst<std::int16_t>(dst);
    case DType::kInt32: return pick_dst<std::int32_t>(dst);
    case DType::kInt64: return pick_dst<std::int64_t>(dst);
    case DType::kFloat16: return pick_dst<Half>(dst);
    case DType::kBFloat16: return pick_dst<BFloat16>(dst);
    case DType::kFloat32: return pick_dst<float>(dst);
    case DType::kFloat64: return pick_dst<double>(dst);
  }
  return nullptr;
}

bool valid_dtype(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes); }

}  // namespace

void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                   std::size_t count) {
  GENESIS_CHECK(valid_dtype(src_dtype), "convert_dtype: invalid source dtype value ",
                static_cast<unsigned>(src_dtype));
  GENESIS_CHECK(valid_dtype(dst_dtype), "convert_dtype: invalid destination dtype value ",
                static_cast<unsigned>(dst_dtype));
  if (count == 0) return;
  GENESIS_CHECK(src != nullptr, "convert_dtype: source pointer is null with count ", count);
  GENESIS_CHECK(dst != nullptr, "convert_dtype: destination pointer is null with count ", count);

  const std::size_t src_size = dtype_size(src_dtype);
  const std::size_t dst_size = dtype_size(dst_dtype);
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  // Compare addresses as integers: relational comparison of pointers into
  // different objects is unspecified.
  const auto s_begin = reinterpret_cast<std::uintptr_t>(s);
  const auto d_begin = reinterpret_cast<std::uintptr_t>(d);
  if (s_begin == d_begin && src_size == dst_size) {
    // In place: element i is read before it is written and no other element
    // shares its bytes, so the loop (and any chunking) stays correct.
    if (src_dtype == dst_dtype) return;
  } else {
    GENESIS_CHECK(count <= std::numeric_limits<std::size_t>::max() / 8,
                  "convert_dtype: count ", count, " is too large");
    const bool overlap = s_begin < d_begin + count * dst_size && d_begin < s_begin + count * src_size;
    GENESIS_CHECK(!overlap, "convert_dtype: source and destination buffers overlap (",
                  dtype_name(src_dtype), " -> ", dtype_name(dst_dtype),
                  "); only src == dst with equally sized dtypes is supported");
  }

  const RangeFn fn = pick(src_dtype, dst_dtype);
  if (count < kConvertParallelThreshold) {
    fn(s, d, 0, count);
    return;
  }
  // At least 256 Ki elements per thread so that thread start-up stays small
  // next to the work.
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads = std::min<std::size_t>(hw, count / (std::size_t{1} << 18));
  const std::size_t chunk = (count + threads - 1) / threads;
  std::vector<std::thread> workers;
  workers.reserve(threads);
  std::size_t begin = chunk;  // chunk 0 runs on the calling thread
  for (; begin < count; begin += chunk) {
    const std::size_t end = std::min(count, begin + chunk);
    try {
      workers.emplace_back(fn, s, d, begin, end);
    } catch (...) {
      // Could not start a thread (resource limits): do this chunk here.
      fn(s, d, begin, end);
    }
  }
  fn(s, d, 0, std::min(count, chunk));
  for (auto& w : workers) w.join();
}

}  // namespace genesis
