// Tests for convert_dtype (genesis/storage/convert.h): every dtype pair on
// boundary values against a scalar reference that goes through long double,
// the threaded path against the single-threaded one, and argument errors.
#include "genesis/storage/convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/core/half.h"

namespace genesis {
namespace {

// The reference needs every int64 and every double exactly: x87 extended
// precision (64-bit mantissa) or binary128 both hold them.
static_assert(std::numeric_limits<long double>::digits >= 64,
              "the reference needs a long double with at least 64 mantissa bits");

using LD = long double;

constexpr DType kAll[] = {DType::kBool,    DType::kUInt8,    DType::kInt8,    DType::kInt16,
                          DType::kInt32,   DType::kInt64,    DType::kFloat16, DType::kBFloat16,
                          DType::kFloat32, DType::kFloat64};

// ---- reference ---------------------------------------------------------------

// Element `i` of a buffer as an exact long double. Half-likes use the 16-bit
// decoding from the format's definition (not the library).
LD ref_load(const std::vector<unsigned char>& buf, DType t, std::size_t i) {
  const unsigned char* p = buf.data() + i * dtype_size(t);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  auto small_float = [](std::uint16_t h, int eb, int mb) -> LD {
    const int bias = (1 << (eb - 1)) - 1;
    const int e = (h >> mb) & ((1 << eb) - 1);
    const int m = h & ((1 << mb) - 1);
    LD v;
    if (e == (1 << eb) - 1) v = m ? std::numeric_limits<LD>::quiet_NaN() : std::numeric_limits<LD>::infinity();
    else if (e == 0) v = std::ldexp(static_cast<LD>(m), 1 - bias - mb);
    else v = std::ldexp(static_cast<LD>(m + (1 << mb)), e - bias - mb);
    return (h & 0x8000) ? -v : v;
  };
  switch (t) {
    case DType::kBool: return load(std::uint8_t{}) != 0 ? 1 : 0;
    case DType::kUInt8: return load(std::uint8_t{});
    case DType::kInt8: return load(std::int8_t{});
    case DType::kInt16: return load(std::int16_t{});
    case DType::kInt32: return load(std::int32_t{});
    case DType::kInt64: return static_cast<LD>(load(std::int64_t{}));
    case DType::kFloat16: return small_float(load(std::uint16_t{}), 5, 10);
    case DType::kBFloat16: return small_float(load(std::uint16_t{}), 8, 7);
    case DType::kFloat32: return load(float{});
    case DType::kFloat64: return load(double{});
  }
  return 0;
}

// Round a non-negative finite long double to a 16-bit float format by the
// FPU: adding and subtracting 2^63 * ulp rounds to a multiple of ulp with ties
// to even. Encodes the result.
std::uint16_t ref_round16(LD v, int mb, int emin, int emax) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const LD a = std::fabs(v);
  const std::uint16_t inf = static_cast<std::uint16_t>(sign | ((2 * emax + 1) << mb));
  if (a >= std::ldexp(LD{1}, emax + 1)) return inf;
  const int e = a == 0 ? emin - 1 : std::ilogb(a);
  const LD ulp = std::ldexp(LD{1}, (e < emin ? emin : e) - mb);
  const LD big = std::ldexp(ulp, std::numeric_limits<LD>::digits - 1);
  volatile LD sum = a + big;  // volatile: keep the rounding in long double
  const LD r = sum - big;
  if (r >= std::ldexp(LD{1}, emax + 1)) return inf;
  if (r < std::ldexp(LD{1}, emin)) return sign | static_cast<std::uint16_t>(std::ldexp(r, mb - emin));
  const int er = std::ilogb(r);
  const auto m = static_cast<std::uint16_t>(std::ldexp(r, mb - er) - std::ldexp(LD{1}, mb));
  return sign | static_cast<std::uint16_t>(((er - emin + 1) << mb) | m);
}

// int64 result of a value per Note [Cast semantics]: truncate; NaN, inf and
// out-of-range give INT64_MIN.
std::int64_t ref_int64(LD v) {
  const LD t = std::trunc(v);
  if (t >= -std::ldexp(LD{1}, 63) && t < std::ldexp(LD{1}, 63)) return static_cast<std::int64_t>(t);
  return std::numeric_limits<std::int64_t>::min();
}

// Expected bytes of `v` converted to `dst`; `nan` reports a NaN result
// (compared by NaN-ness and sign only).
std::vector<unsigned char> ref_store(LD v, DType src, DType dst, bool* nan) {
  std::vector<unsigned char> out(dtype_size(dst));
  auto put = [&out](auto x) { std::memcpy(out.data(), &x, sizeof x); };
  *nan = std::isnan(v) && is_floating(dst);
  switch (dst) {
    case DType::kBool: put(static_cast<std::uint8_t>(v != 0)); break;
    case DType::kUInt8: put(static_cast<std::uint8_t>(ref_int64(v))); break;
    case DType::kInt8: put(static_cast<std::int8_t>(ref_int64(v))); break;
    case DType::kInt16: put(static_cast<std::int16_t>(ref_int64(v))); break;
    case DType::kInt32:
      if (is_floating(src)) {
        const LD t = std::trunc(v);
        put(t >= -2147483648.0L && t < 2147483648.0L ? static_cast<std::int32_t>(t)
                                                     : std::numeric_limits<std::int32_t>::min());
      } else {
        put(static_cast<std::int32_t>(ref_int64(v)));  // wraps
      }
      break;
    case DType::kInt64: put(ref_int64(v)); break;
    case DType::kFloat16: put(std::isnan(v) ? std::uint16_t{0x7e00} : ref_round16(v, 10, -14, 15)); break;
    case DType::kBFloat16: put(std::isnan(v) ? std::uint16_t{0x7fc0} : ref_round16(v, 7, -126, 127)); break;
    case DType::kFloat32: put(static_cast<float>(v)); break;
    case DType::kFloat64: put(static_cast<double>(v)); break;
  }
  return out;
}

bool result_is_nan_with_sign(const unsigned char* p, DType t, bool negative) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_size(t));
  switch (t) {
    case DType::kFloat16: return (bits & 0x7fff) > 0x7c00 && ((bits >> 15) & 1) == negative;
    case DType::kBFloat16: return (bits & 0x7fff) > 0x7f80 && ((bits >> 15) & 1) == negative;
    case DType::kFloat32: return (bits & 0x7fffffff) > 0x7f800000 && ((bits >> 31) & 1) == negative;
    case DType::kFloat64:
      return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull && ((bits >> 63) & 1) == negative;
    default: return false;
  }
}

// ---- inputs --------------------------------------------------------------------

std::vector<LD> float_candidates() {
  const LD inf = std::numeric_limits<LD>::infinity();
  const LD nan = std::numeric_limits<LD>::quiet_NaN();
  std::vector<LD> base = {0.0L, 0.5L, 0.1L, 0.9L, 1.0L, 1.5L, 2.5L, 3.5L, 99.99L, 127.0L, 127.5L,
                          128.0L, 128.5L, 129.0L, 255.0L, 255.9L, 256.0L, 300.0L, 32767.0L,
                          32767.5L, 32768.0L, 32769.0L, 65504.0L, 65519.0L, 65520.0L, 65535.0L,
                          65536.0L, 2147483647.0L, 2147483648.0L, 2147483649.0L, 4294967296.0L,
                          1e10L, 9007199254740993.0L, 9223372036854775807.0L,
                          9223372036854775808.0L, 18446744073709551616.0L, 1e20L, 3.4e38L,
                          3.5e38L, 1e300L, 1e-300L, 1e-40L, 6e-8L, 2.98e-8L, 1e-45L,
                          std::ldexp(1.0L, -25), std::ldexp(1.0L, -134), inf, nan};
  std::vector<LD> out;
  for (LD v : base) {
    out.push_back(v);
    out.push_back(-v);
  }
  return out;
}

std::vector<std::int64_t> int_candidates() {
  const std::int64_t mn = std::numeric_limits<std::int64_t>::min();
  const std::int64_t mx = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> base = {0, 1, 2, 3, 100, 127, 128, 129, 255, 256, 257, 300, 32767,
                                    32768, 65504, 65519, 65520, 65535, 65536, 16777217,
                                    2147483647, 2147483648LL, 4294967295LL, 4294967296LL,
                                    (1LL << 53) + 1,
                                    // Just above a bfloat16 tie: via double this would
                                    // round onto the tie and then to even.
                                    (1LL << 60) + (1LL << 52) + 1, (1LL << 62) + (1LL << 54),
                                    mx, mx - 1};
  std::vector<std::int64_t> out = {mn};
  for (std::int64_t v : base) {
    out.push_back(v);
    out.push_back(-v);
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) out.push_back(static_cast<std::int64_t>(rng()) >> (i % 60));
  return out;
}

// A source buffer of boundary values for dtype `t`.
std::vector<unsigned char> make_source(DType t, std::size_t* count) {
  std::vector<unsigned char> buf;
  auto push = [&buf](auto x) {
    const std::size_t at = buf.size();
    buf.resize(at + sizeof x);
    std::memcpy(buf.data() + at, &x, sizeof x);
  };
  switch (t) {
    case DType::kBool:
      for (std::uint8_t b : {0, 1, 2, 255}) push(b);  // any nonzero byte is true
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (std::uint32_t h = 0; h < 65536; ++h) push(static_cast<std::uint16_t>(h));
      break;
    case DType::kFloat32:
      for (LD v : float_candidates()) push(static_cast<float>(v));
      for (std::uint32_t b : {0x7f800001u, 0xff800001u, 0x7f7fffffu, 0x00000001u, 0x477ff000u,
                              0x477fefffu, 0x4f000000u, 0xcf000000u, 0xcf000001u, 0x5f000000u})
        push(std::bit_cast<float>(b));
      break;
    case DType::kFloat64:
      for (LD v : float_candidates()) push(static_cast<double>(v));
      push(1.0 + 0x1p-11 + 0x1p-40);  // double-rounding trap for float16
      push(1.0 + 0x1p-8 + 0x1p-40);   // and for bfloat16
      push(std::bit_cast<double>(0x7ff0000000000001ull));
      push(-2147483648.9);
      push(2147483647.9);
      push(-9223372036854775808.0);
      break;
    default:
      for (std::int64_t v : int_candidates()) {
        switch (t) {
          case DType::kUInt8: push(static_cast<std::uint8_t>(v)); break;
          case DType::kInt8: push(static_cast<std::int8_t>(v)); break;
          case DType::kInt16: push(static_cast<std::int16_t>(v)); break;
          case DType::kInt32: push(static_cast<std::int32_t>(v)); break;
          default: push(v); break;
        }
      }
  }
  *count = buf.size() / dtype_size(t);
  return buf;
}

// ---- tests -------------------------------------------------------------------

TEST(ConvertDtypeTest, EveryPairMatchesReferenceOnBoundaryValues) {
  for (DType src : kAll) {
    std::size_t n = 0;
    const auto in = make_source(src, &n);
    for (DType dst : kAll) {
      std::vector<unsigned char> out(n * dtype_size(dst), 0xcd);
      convert_dtype(in.data(), src, out.data(), dst, n);
      std::size_t failures = 0;
      for (std::size_t i = 0; i < n && failures < 5; ++i) {
        const LD v = ref_load(in, src, i);
        bool nan = false;
        const auto want = ref_store(v, src, dst, &nan);
        const unsigned char* got = out.data() + i * dtype_size(dst);
        const bool ok = nan ? result_is_nan_with_sign(got, dst, std::signbit(v))
                            : std::memcmp(got, want.data(), want.size()) == 0;
        if (!ok) {
          ++failures;
          std::uint64_t g = 0, w = 0;
          std::memcpy(&g, got, want.size());
          std::memcpy(&w, want.data(), want.size());
          ADD_FAILURE() << dtype_name(src) << " -> " << dtype_name(dst) << " element " << i
                        << " value " << static_cast<double>(v) << ": got 0x" << std::hex << g
                        << " want 0x" << w;
        }
      }
    }
  }
}

TEST(ConvertDtypeTest, DocumentedExamples) {
  auto to = [](auto x, DType sd, DType dd, auto out) {
    // Guards the test itself: the C++ types must match the dtypes.
    if (sizeof x != dtype_size(sd) || sizeof out != dtype_size(dd)) {
      ADD_FAILURE() << "test bug: element size mismatch";
      return out;
    }
    convert_dtype(&x, sd, &out, dd, 1);
    return out;
  };
  EXPECT_EQ(to(-1.0f, DType::kFloat32, DType::kUInt8, std::uint8_t{}), 255);
  EXPECT_EQ(to(300.0f, DType::kFloat32, DType::kUInt8, std::uint8_t{}), 44);
  EXPECT_EQ(to(200.0, DType::kFloat64, DType::kInt8, std::int8_t{}), -56);
  EXPECT_EQ(to(-2.9, DType::kFloat64, DType::kInt32, std::int32_t{}), -2);
  EXPECT_EQ(to(NAN, DType::kFloat32, DType::kInt32, std::int32_t{}), INT32_MIN);
  EXPECT_EQ(to(3e9, DType::kFloat64, DType::kInt32, std::int32_t{}), INT32_MIN);
  EXPECT_EQ(to(INFINITY, DType::kFloat32, DType::kInt64, std::int64_t{}), INT64_MIN);
  EXPECT_EQ(to(NAN, DType::kFloat32, DType::kUInt8, std::uint8_t{}), 0);
  EXPECT_EQ(to(std::nan(""), DType::kFloat64, DType::kBool, std::uint8_t{}), 1);
  EXPECT_EQ(to(-0.0f, DType::kFloat32, DType::kBool, std::uint8_t{}), 0);
  EXPECT_EQ(to(std::int32_t{300}, DType::kInt32, DType::kUInt8, std::uint8_t{}), 44);
  EXPECT_EQ(to(std::int64_t{(1LL << 60) + (1LL << 52) + 1}, DType::kInt64, DType::kBFloat16,
               std::uint16_t{}),
            0x5d81);  // 2^60 * (1 + 2^-7): rounded once, not onto the tie
}

TEST(ConvertDtypeTest, ThreadedPathEqualsScalarPath) {
  const std::size_t n = 3 * kConvertParallelThreshold + 12345;
  std::mt19937_64 rng(99);
  std::vector<float> f32(n);
  std::vector<double> f64(n);
  for (std::size_t i = 0; i < n; ++i) {
    f32[i] = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    f64[i] = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng())), -50);
  }
  for (DType src : {DType::kFloat32, DType::kFloat64}) {
    const void* in = src == DType::kFloat32 ? static_cast<const void*>(f32.data()) : f64.data();
    for (DType dst : kAll) {
      const std::size_t es = dtype_size(dst);
      std::vector<unsigned char> threaded(n * es), scalar(n * es);
      convert_dtype(in, src, threaded.data(), dst, n);
      constexpr std::size_t kChunk = 4096;  // below the threshold: one thread
      for (std::size_t i = 0; i < n; i += kChunk) {
        const std::size_t c = std::min(kChunk, n - i);
        convert_dtype(static_cast<const unsigned char*>(in) + i * dtype_size(src), src,
                      scalar.data() + i * es, dst, c);
      }
      ASSERT_EQ(std::memcmp(threaded.data(), scalar.data(), threaded.size()), 0)
          << dtype_name(src) << " -> " << dtype_name(dst);
    }
  }
}

TEST(ConvertDtypeTest, InPlaceSameSize) {
  std::vector<std::int32_t> v = {1, -2, 16777217, 0};
  convert_dtype(v.data(), DType::kInt32, v.data(), DType::kFloat32, v.size());
  std::vector<float> f(v.size());
  std::memcpy(f.data(), v.data(), v.size() * sizeof(float));
  EXPECT_EQ(f, (std::vector<float>{1.0f, -2.0f, 16777216.0f, 0.0f}));
  // Same dtype, same buffer: a no-op.
  convert_dtype(f.data(), DType::kFloat32, f.data(), DType::kFloat32, f.size());
  EXPECT_EQ(f[2], 16777216.0f);
}

TEST(ConvertDtypeTest, RejectsBadArguments) {
  float x = 1.0f;
  double y = 0.0;
  EXPECT_THROW(convert_dtype(nullptr, DType::kFloat32, &y, DType::kFloat64, 1), InvalidArgumentError);
  EXPECT_THROW(convert_dtype(&x, DType::kFloat32, nullptr, DType::kFloat64, 1), InvalidArgumentError);
  EXPECT_NO_THROW(convert_dtype(nullptr, DType::kFloat32, nullptr, DType::kFloat64, 0));
  EXPECT_THROW(convert_dtype(&x, static_cast<DType>(10), &y, DType::kFloat64, 1), InvalidArgumentError);
  EXPECT_THROW(convert_dtype(&x, DType::kFloat32, &y, static_cast<DType>(255), 1), InvalidArgumentError);
  // Overlap with different element sizes is not supported.
  std::vector<float> buf(8);
  EXPECT_THROW(convert_dtype(buf.data(), DType::kFloat32, buf.data(), DType::kFloat64, 4),
               InvalidArgumentError);
  EXPECT_THROW(convert_dtype(buf.data(), DType::kFloat32, buf.data() + 1, DType::kFloat32, 4),
               InvalidArgumentError);
  EXPECT_NO_THROW(convert_dtype(buf.data(), DType::kFloat32, buf.data() + 4, DType::kInt32, 4));
}

}  // namespace
}  // namespace genesis
