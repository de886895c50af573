// The one element cast (core/cast.h) and the one dtype dispatch
// (core/dtype_dispatch.h) that the CPU and GPU conversions share.
//
// The GPU runs the same cast<> as the CPU except for the NaN branches of
// float <-> double (Note [GPU cast = CPU cast]): those are checked here on the
// host against the CPU's own conversion, over many NaN payloads, so a wrong
// bit in them fails without a GPU. tests/storage/gpu_convert_test.cpp checks
// the kernels themselves on a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>

#include "genesis/core/cast.h"
#include "genesis/core/dtype_dispatch.h"

namespace genesis {
namespace {

using kernels::BoolByte;
using kernels::convert_element;

TEST(CastTest, WidenNanMatchesTheCpuConversion) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    // Random sign and nonzero mantissa under an all-ones exponent: a NaN,
    // quiet or signalling.
    std::uint32_t mant = rng() & 0x7fffffu;
    if (mant == 0) mant = 1;
    const std::uint32_t bits = (rng() & 0x80000000u) | 0x7f800000u | mant;
    const float f = std::bit_cast<float>(bits);
    ASSERT_TRUE(std::isnan(f));
    const double expected = static_cast<double>(f);  // x86 SSE / AArch64: payload kept, quiet bit set
    EXPECT_EQ(std::bit_cast<std::uint64_t>(kernels::cast_detail::widen_nan(f)), std::bit_cast<std::uint64_t>(expected))
        << std::hex << bits;
  }
}

TEST(CastTest, NarrowNanMatchesTheCpuConversion) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::uint64_t mant = rng() & 0xfffffffffffffull;
    if (mant == 0) mant = 1;
    const std::uint64_t bits = (rng() & 0x8000000000000000ull) | 0x7ff0000000000000ull | mant;
    const double d = std::bit_cast<double>(bits);
    ASSERT_TRUE(std::isnan(d));
    const float expected = static_cast<float>(d);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(kernels::cast_detail::narrow_nan(d)), std::bit_cast<std::uint32_t>(expected))
        << std::hex << bits;
  }
}

TEST(CastTest, NanTestsByBits) {
  EXPECT_TRUE(kernels::cast_detail::is_nan_bits(std::bit_cast<float>(0x7f800001u)));
  EXPECT_TRUE(kernels::cast_detail::is_nan_bits(std::bit_cast<float>(0xffc00000u)));
  EXPECT_FALSE(kernels::cast_detail::is_nan_bits(std::bit_cast<float>(0x7f800000u)));  // inf
  EXPECT_FALSE(kernels::cast_detail::is_nan_bits(1.5f));
  EXPECT_TRUE(kernels::cast_detail::is_nan_bits(std::bit_cast<double>(0x7ff0000000000001ull)));
  EXPECT_FALSE(kernels::cast_detail::is_nan_bits(std::bit_cast<double>(0xfff0000000000000ull)));  // -inf
}

TEST(CastTest, FloatDoubleCastsKeepNanPayloads) {
  // Values NumPy's astype gives on x86 (payload kept, quiet bit set).
  const float snan = std::bit_cast<float>(0xff800123u);  // negative signalling NaN
  EXPECT_EQ(std::bit_cast<std::uint64_t>(kernels::cast<double>(snan)), 0xfff8002460000000ull);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(kernels::cast_detail::widen_nan(snan)), 0xfff8002460000000ull);
  const double dnan = std::bit_cast<double>(0x7ff0000123456789ull);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kernels::cast<float>(dnan)), 0x7fc00009u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kernels::cast_detail::narrow_nan(dnan)), 0x7fc00009u);
}

TEST(CastTest, BoolBytesReadAnyNonzeroByteAsTrue) {
  for (int b = 0; b < 256; ++b) {
    const BoolByte in{static_cast<std::uint8_t>(b)};
    EXPECT_EQ(convert_element<BoolByte>(in).v, b != 0 ? 1 : 0) << b;
    EXPECT_EQ(convert_element<std::int32_t>(in), b != 0 ? 1 : 0) << b;
    EXPECT_EQ(convert_element<float>(in), b != 0 ? 1.0f : 0.0f) << b;
    EXPECT_EQ(convert_element<Half>(in).bits, b != 0 ? 0x3c00 : 0) << b;
  }
  EXPECT_EQ(convert_element<BoolByte>(std::bit_cast<float>(0x7fc00000u)).v, 1);  // NaN is true
  EXPECT_EQ(convert_element<BoolByte>(-0.0).v, 0);
  EXPECT_EQ(convert_element<BoolByte>(Half::from_bits(0x8000)).v, 0);  // -0 half
}

TEST(CastTest, SixteenBitFloatsToThemselvesQuietSignallingNans) {
  // A signalling half NaN comes out quiet with its payload, as on the GPU.
  EXPECT_EQ(convert_element<Half>(Half::from_bits(0x7c01)).bits, 0x7e01);
  EXPECT_EQ(convert_element<BFloat16>(BFloat16::from_bits(0xff81)).bits, 0xffc1);
  // Everything else is unchanged.
  EXPECT_EQ(convert_element<Half>(Half::from_bits(0x3c00)).bits, 0x3c00);
  EXPECT_EQ(convert_element<Half>(Half::from_bits(0x0001)).bits, 0x0001);  // smallest subnormal
  // The plain cast keeps an identity copy bit for bit.
  EXPECT_EQ(kernels::cast<Half>(Half::from_bits(0x7c01)).bits, 0x7c01);
}

TEST(CastTest, ConvertElementFollowsCastOtherwise) {
  EXPECT_EQ(convert_element<std::int32_t>(3.9), 3);
  EXPECT_EQ(convert_element<std::int32_t>(-3.9f), -3);
  EXPECT_EQ(convert_element<std::int32_t>(1e300), std::int32_t{-2147483647 - 1});
  EXPECT_EQ(convert_element<std::uint8_t>(std::int64_t{257}), 1);
  // int64 -> float16 rounds once (round to odd first, then to nearest even).
  EXPECT_EQ(convert_element<Half>(std::int64_t{2049}).bits, kernels::cast<Half>(std::int64_t{2049}).bits);
  EXPECT_EQ(static_cast<float>(convert_element<Half>(std::int64_t{2049})), 2048.0f);
}

template <typename T>
DType dtype_of_tag() {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, BoolByte>) return DType::kBool;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::kUInt8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DType::kInt8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return DType::kInt16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, Half>) return DType::kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else return DType::kFloat64;
}

TEST(DtypeDispatchTest, EveryDtypeMapsToItsElementType) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    kernels::dispatch(t, [t](auto tag) {
      using T = typename decltype(tag)::type;
      EXPECT_EQ(dtype_of_tag<T>(), t) << dtype_name(t);
      EXPECT_EQ(sizeof(T), dtype_size(t)) << dtype_name(t);
    });
    kernels::dispatch_element(t, [t](auto tag) {
      using T = typename decltype(tag)::type;
      EXPECT_EQ(dtype_of_tag<T>(), t) << dtype_name(t);
      EXPECT_EQ(sizeof(T), dtype_size(t)) << dtype_name(t);
      // Raw buffers never read bool elements through C++ bool.
      EXPECT_FALSE((std::is_same_v<T, bool>)) << dtype_name(t);
    });
  }
}

}  // namespace
}  // namespace genesis
