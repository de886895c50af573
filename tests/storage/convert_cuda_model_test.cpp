// A CPU check of the GPU conversion rules (src/storage/convert_cuda_cast.cuh)
// that runs without a GPU: the device element casts are compiled for the host
// with the few CUDA intrinsics they use emulated, and compared with the CPU
// convert_dtype on every pair. It catches mistakes in the rules themselves
// (NaN payloads, the int64 round-to-odd step, which path a pair takes); it
// cannot catch a hardware conversion that differs from IEEE, which is what
// the GPU tests (tests/storage/gpu_convert_test.cpp) are for.
//
// The emulated cvt intrinsics return a canonical NaN for NaN inputs, as the
// hardware does, so a missing NaN branch in the rules shows up here.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/storage/convert.h"

// --- host stand-ins for the CUDA built-ins the rules use ----------------------
#define __device__
#define __forceinline__ inline

namespace {

struct FakeHalf {
  std::uint16_t bits;
};
struct FakeBFloat16 {
  std::uint16_t bits;
};

inline std::uint32_t __float_as_uint(float f) { return std::bit_cast<std::uint32_t>(f); }
inline float __uint_as_float(std::uint32_t u) { return std::bit_cast<float>(u); }
inline long long __double_as_longlong(double d) { return std::bit_cast<long long>(d); }
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }
inline int __clzll(long long v) { return std::countl_zero(static_cast<unsigned long long>(v)); }
// cvt.rn.*: IEEE round to nearest even; NaN in, canonical NaN out.
inline FakeHalf __float2half_rn(float f) {
  return FakeHalf{std::isnan(f) ? std::uint16_t{0x7fff} : genesis::float_to_half_bits(f)};
}
inline std::uint16_t __half_as_ushort(FakeHalf h) { return h.bits; }
inline FakeBFloat16 __float2bfloat16_rn(float f) {
  return FakeBFloat16{std::isnan(f) ? std::uint16_t{0x7fff} : genesis::float_to_bfloat16_bits(f)};
}
inline std::uint16_t __bfloat16_as_ushort(FakeBFloat16 h) { return h.bits; }
inline float __double2float_rn(double d) {
  return std::isnan(d) ? std::bit_cast<float>(0x7fffffffu) : static_cast<float>(d);
}
using std::trunc;

}  // namespace

#include "../../src/storage/convert_cuda_cast.cuh"

#undef __device__
#undef __forceinline__

namespace genesis {
namespace {

using detail::convert_cuda::BoolByte;
using detail::convert_cuda::cast_one;
using Bytes = std::vector<unsigned char>;

template <typename D, typename S>
void model_range(const Bytes& in, Bytes& out, std::size_t n) {
  out.resize(n * sizeof(D));
  for (std::size_t i = 0; i < n; ++i) {
    S s;
    std::memcpy(&s, in.data() + i * sizeof(S), sizeof(S));
    const D d = cast_one<D>(s);
    std::memcpy(out.data() + i * sizeof(D), &d, sizeof(D));
  }
}

template <typename S>
void model_dst(DType dd, const Bytes& in, Bytes& out, std::size_t n) {
  switch (dd) {
    case DType::kBool: return model_range<BoolByte, S>(in, out, n);
    case DType::kUInt8: return model_range<std::uint8_t, S>(in, out, n);
    case DType::kInt8: return model_range<std::int8_t, S>(in, out, n);
    case DType::kInt16: return model_range<std::int16_t, S>(in, out, n);
    case DType::kInt32: return model_range<std::int32_t, S>(in, out, n);
    case DType::kInt64: return model_range<std::int64_t, S>(in, out, n);
    case DType::kFloat16: return model_range<Half, S>(in, out, n);
    case DType::kBFloat16: return model_range<BFloat16, S>(in, out, n);
    case DType::kFloat32: return model_range<float, S>(in, out, n);
    case DType::kFloat64: return model_range<double, S>(in, out, n);
  }
}

void model(DType sd, DType dd, const Bytes& in, Bytes& out, std::size_t n) {
  switch (sd) {
    case DType::kBool: return model_dst<BoolByte>(dd, in, out, n);
    case DType::kUInt8: return model_dst<std::uint8_t>(dd, in, out, n);
    case DType::kInt8: return model_dst<std::int8_t>(dd, in, out, n);
    case DType::kInt16: return model_dst<std::int16_t>(dd, in, out, n);
    case DType::kInt32: return model_dst<std::int32_t>(dd, in, out, n);
    case DType::kInt64: return model_dst<std::int64_t>(dd, in, out, n);
    case DType::kFloat16: return model_dst<Half>(dd, in, out, n);
    case DType::kBFloat16: return model_dst<BFloat16>(dd, in, out, n);
    case DType::kFloat32: return model_dst<float>(dd, in, out, n);
    case DType::kFloat64: return model_dst<double>(dd, in, out, n);
  }
}

// Random inputs: raw bits, NaNs with random payloads, ordinary magnitudes;
// every 16-bit pattern for 16-bit sources.
Bytes inputs(DType t, std::size_t* n) {
  const std::size_t size = dtype_size(t);
  if (size == 2) {
    *n = 65536;
    Bytes in(2 * 65536);
    for (std::uint32_t i = 0; i < 65536; ++i) {
      const auto v = static_cast<std::uint16_t>(i);
      std::memcpy(in.data() + 2 * i, &v, 2);
    }
    return in;
  }
  *n = 100000;
  Bytes in(*n * size);
  std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
  for (std::size_t i = 0; i < *n; ++i) {
    std::uint64_t b = rng();
    const int kind = static_cast<int>(rng() % 4);
    unsigned char* p = in.data() + i * size;
    if (t == DType::kFloat64 && kind == 1) {
      const double v = std::ldexp(static_cast<double>(static_cast<std::int64_t>(b)), -static_cast<int>(rng() % 80));
      std::memcpy(p, &v, 8);
    } else if (t == DType::kFloat64 && kind == 2) {
      b |= 0x7ff0000000000000ull;
      if ((b & 0xfffffffffffffull) == 0) b |= 1;
      std::memcpy(p, &b, 8);
    } else if (t == DType::kFloat32 && kind == 1) {
      const auto v = static_cast<float>(std::ldexp(static_cast<double>(static_cast<std::int32_t>(b)), -static_cast<int>(rng() % 40)));
      std::memcpy(p, &v, 4);
    } else if (t == DType::kFloat32 && kind == 2) {
      auto x = static_cast<std::uint32_t>(b) | 0x7f800000u;
      if ((x & 0x7fffffu) == 0) x |= 1;
      std::memcpy(p, &x, 4);
    } else if (t == DType::kInt64 && kind == 1) {
      const auto x = static_cast<std::int64_t>(b >> (rng() % 64));
      std::memcpy(p, &x, 8);
    } else {
      std::memcpy(p, &b, size);
    }
  }
  return in;
}

TEST(ConvertCudaModel, DeviceRulesMatchCpuOnEveryPair) {
  for (int s = 0; s < kNumDTypes; ++s) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const auto sd = static_cast<DType>(s);
      const auto dd = static_cast<DType>(d);
      std::size_t n = 0;
      const Bytes in = inputs(sd, &n);
      const std::size_t ss = dtype_size(sd), ds = dtype_size(dd);
      Bytes expected(n * ds), actual;
      convert_dtype(in.data(), sd, expected.data(), dd, n);
      model(sd, dd, in, actual, n);
      if (expected == actual) continue;
      std::ostringstream os;
      int shown = 0;
      for (std::size_t i = 0; i < n && shown < 5; ++i) {
        if (std::memcmp(&expected[i * ds], &actual[i * ds], ds) == 0) continue;
        std::uint64_t a = 0, e = 0, g = 0;
        std::memcpy(&a, &in[i * ss], ss);
        std::memcpy(&e, &expected[i * ds], ds);
        std::memcpy(&g, &actual[i * ds], ds);
        os << std::hex << "\n  input 0x" << a << "  CPU 0x" << e << "  GPU rules 0x" << g;
        ++shown;
      }
      ADD_FAILURE() << dtype_name(sd) << " -> " << dtype_name(dd) << ": the GPU rules differ from convert_dtype:"
                    << os.str();
    }
  }
}

}  // namespace
}  // namespace genesis
