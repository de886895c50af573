// Kernels of convert_dtype_cuda (include/genesis/storage/convert_cuda.h).
// Arguments are validated in convert_cuda.cpp; this file only converts.
//
// Note [GPU cast = CPU cast]: each element is converted by the same rule as
// the CPU's cast_one (src/storage/convert.cpp, Note [Cast semantics]), step by
// step, so the results agree bit for bit:
//   * float -> float16 / bfloat16 / double and double -> float use the
//     hardware conversion (cvt.rn: IEEE round to nearest even, subnormals
//     kept, overflow to inf; nvcc does not flush subnormals unless built with
//     -ftz=true / --use_fast_math, which Genesis does not use). NaNs are
//     handled separately because cvt returns a canonical NaN while the CPU
//     (x86 SSE, AArch64 FCVT) keeps the sign and payload and sets the quiet
//     bit; the code below writes exactly that.
//   * 16-bit floats widen to float exactly by bit manipulation.
//   * double, int32 and int64 -> float16 / bfloat16 go through the same
//     portable bit routines as the CPU (genesis/core/half.h), int64 after the
//     same round-to-odd step, so there is no double rounding anywhere.
//   * floating -> integer truncates in double with the CPU's range rules.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "convert_cuda_launch.h"
#include "genesis/core/half.h"
#include "genesis/cuda/check.h"

namespace genesis::detail {
namespace {

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
    else return double_to_float(s);  // D == float (double -> double is a copy)
  } else {  // float, float16, bfloat16: widen exactly to float first
    const float f = widen_to_float(s);
    if constexpr (std::is_integral_v<D>) return float_to_integer<D>(static_cast<double>(f));
    else return from_float<D>(f);
  }
}

// --- kernel --------------------------------------------------------------------

/// N elements per vector step: the smaller element type moves 16 bytes, the
/// larger one a multiple of 16, so both sides use whole 128-bit accesses.
template <typename S, typename D>
inline constexpr int kVec = 16 / (sizeof(S) < sizeof(D) ? sizeof(S) : sizeof(D));

template <typename T, int N>
struct alignas(16) Pack {
  T v[N];
};

constexpr int kThreads = 256;

// Elements [head, head + nvec * N) are converted N at a time through aligned
// 16-byte accesses; the `head` elements before and the tail after, one by one.
// An unaligned pair of buffers has head = count, nvec = 0.
//
// No __restrict__: in-place conversions (src == dst, equal sizes) are
// allowed, and each thread reads its elements before writing them.
template <typename S, typename D>
__global__ void __launch_bounds__(kThreads) convert_kernel(const S* src, D* dst, std::size_t count,
                                                           std::size_t head, std::size_t nvec) {
  constexpr int N = kVec<S, D>;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  const auto* in = reinterpret_cast<const Pack<S, N>*>(src + head);
  auto* out = reinterpret_cast<Pack<D, N>*>(dst + head);
  for (std::size_t v = tid; v < nvec; v += stride) {
    const Pack<S, N> a = in[v];
    Pack<D, N> b;
#pragma unroll
    for (int k = 0; k < N; ++k) b.v[k] = cast_one<D>(a.v[k]);
    out[v] = b;
  }

  const std::size_t body_end = head + nvec * N;
  const std::size_t nscalar = head + (count - body_end);
  for (std::size_t j = tid; j < nscalar; j += stride) {
    const std::size_t i = j < head ? j : body_end + (j - head);
    dst[i] = cast_one<D>(src[i]);
  }
}

template <typename S, typename D>
void launch(const void* src, void* dst, std::size_t count, cudaStream_t stream, int max_blocks) {
  constexpr int N = kVec<S, D>;
  const auto s_addr = reinterpret_cast<std::uintptr_t>(src);
  const auto d_addr = reinterpret_cast<std::uintptr_t>(dst);
  // Leading elements until src is 16-byte aligned (src is element aligned,
  // so this is a whole number); the vector path needs dst aligned there too.
  std::size_t head = ((16 - s_addr % 16) % 16) / sizeof(S);
  std::size_t nvec = 0;
  if (head < count && (d_addr + head * sizeof(D)) % 16 == 0) {
    nvec = (count - head) / N;
  } else {
    head = count;
  }
  const std::size_t nscalar = count - nvec * N;
  const std::size_t work = nvec > nscalar ? nvec : nscalar;
  std::size_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > static_cast<std::size_t>(max_blocks)) blocks = static_cast<std::size_t>(max_blocks);
  if (blocks == 0) blocks = 1;
  convert_kernel<S, D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const S*>(src), static_cast<D*>(dst), count, head, nvec);
  // A bad configuration or a missing kernel image shows here; faults inside
  // the kernel show at the next synchronisation.
  GENESIS_CUDA_CHECK(cudaGetLastError());
}

using LaunchFn = void (*)(const void*, void*, std::size_t, cudaStream_t, int);

template <typename S>
LaunchFn pick_dst(DType dst) {
  switch (dst) {
    case DType::kBool: return &launch<S, BoolByte>;
    case DType::kUInt8: return &launch<S, std::uint8_t>;
    case DType::kInt8: return &launch<S, std::int8_t>;
    case DType::kInt16: return &launch<S, std::int16_t>;
    case DType::kInt32: return &launch<S, std::int32_t>;
    case DType::kInt64: return &launch<S, std::int64_t>;
    case DType::kFloat16: return &launch<S, Half>;
    case DType::kBFloat16: return &launch<S, BFloat16>;
    case DType::kFloat32: return &launch<S, float>;
    case DType::kFloat64: return &launch<S, double>;
  }
  return nullptr;
}

LaunchFn pick(DType src, DType dst) {
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

}  // namespace

void launch_convert_kernel(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t count,
                           std::uintptr_t stream, int max_blocks) {
  const LaunchFn fn = pick(src_dtype, dst_dtype);
  GENESIS_CHECK(fn != nullptr, "convert_dtype_cuda: no kernel for ", dtype_name(src_dtype), " -> ",
                dtype_name(dst_dtype));
  fn(src, dst, count, reinterpret_cast<cudaStream_t>(stream), max_blocks);
}

}  // namespace genesis::detail
