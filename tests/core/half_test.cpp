// Tests for genesis/core/half.h: exhaustive float16/bfloat16 conversions
// against references written from first principles.
//
// Exhaustiveness: every one of the 65536 16-bit patterns is always checked.
// float -> float16/bfloat16 checks all 2^32 float patterns in optimised
// builds. Under a sanitizer (ASan/TSan: ~10-50x slower), or when the
// environment sets GENESIS_EXHAUSTIVE=0, it checks every 97th pattern
// instead; the boundary tests (every value, every midpoint between
// neighbours, and their float neighbours) run in every build.
// GENESIS_EXHAUSTIVE=1 forces the full sweep.
#include "genesis/core/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GENESIS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GENESIS_TEST_SANITIZED 1
#endif
#endif
#ifndef GENESIS_TEST_SANITIZED
#define GENESIS_TEST_SANITIZED 0
#endif

namespace genesis {
namespace {

// Compile-time spot checks: the conversions are usable in constant expressions.
static_assert(float_to_half_bits(1.0f) == 0x3c00);
static_assert(float_to_half_bits(-2.0f) == 0xc000);
static_assert(float_to_half_bits(65504.0f) == 0x7bff);
static_assert(float_to_half_bits(65520.0f) == 0x7c00);
static_assert(half_bits_to_float(0x3555) == 0.333251953125f);
static_assert(float_to_bfloat16_bits(1.0f) == 0x3f80);
static_assert(bfloat16_bits_to_float(0xc0a0) == -5.0f);
static_assert(double_to_half_bits(0.1) == 0x2e66);
static_assert(double_to_bfloat16_bits(0.1) == 0x3dcd);

bool exhaustive() {
  if (const char* e = std::getenv("GENESIS_EXHAUSTIVE")) return std::strcmp(e, "0") != 0;
  return !GENESIS_TEST_SANITIZED;
}

std::uint32_t fbits(float f) { return std::bit_cast<std::uint32_t>(f); }
float bfloat(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint64_t dbits(double d) { return std::bit_cast<std::uint64_t>(d); }

// 2^k for a normal double exponent, built from bits (faster than ldexp in
// the 2^32 loops).
double pow2(int k) { return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52); }
int exponent_of(double a) { return static_cast<int>((dbits(a) >> 52) & 0x7ff) - 1023; }

// ---- references ----------------------------------------------------------

// 16-bit pattern -> value, from the format's definition:
// (-1)^s * 2^(e - bias) * 1.m, or 2^(1 - bias) * 0.m for e == 0.
float ref_small_to_float(std::uint16_t h, int exp_bits, int mant_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const bool neg = (h >> 15) & 1;
  const int e = (h >> mant_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << mant_bits) - 1);
  double v;
  if (e == (1 << exp_bits) - 1) {
    v = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(m + (1 << mant_bits)), e - bias - mant_bits);
  }
  return static_cast<float>(neg ? -v : v);  // exact: every such value is a float
}

// Rounds a non-negative, non-NaN double to the format with `mant_bits`
// explicit mantissa bits, minimum normal exponent `emin` and maximum
// exponent `emax`, and encodes it. The rounding is done by the FPU: adding
// and subtracting 2^52 * ulp leaves `a` rounded to a multiple of ulp with
// ties to even, because the sum lies in a binade whose double spacing is ulp.
std::uint16_t ref_round(double a, int mant_bits, int emin, int emax) {
  const int bias = -emin + 1;
  const double overflow = pow2(emax + 1);
  const std::uint16_t inf = static_cast<std::uint16_t>((2 * emax + 1) << mant_bits);
  if (a >= overflow) return inf;
  const int e = exponent_of(a);
  const double ulp = e < emin ? pow2(emin - mant_bits) : pow2(e - mant_bits);
  const double big = 0x1p52 * ulp;
  const double r = (a + big) - big;
  if (r >= overflow) return inf;
  if (r < pow2(emin)) return static_cast<std::uint16_t>(r * pow2(mant_bits - emin));
  const int er = exponent_of(r);
  const double m = r * pow2(mant_bits - er) - pow2(mant_bits);
  return static_cast<std::uint16_t>(((er + bias) << mant_bits) | static_cast<int>(m));
}

std::uint16_t ref_half(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  return sign | ref_round(std::fabs(x), 10, -14, 15);
}
std::uint16_t ref_bf16(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  return sign | ref_round(std::fabs(x), 7, -126, 127);
}

// NaN results are specified bit for bit: sign, the payload bits that fit,
// quiet bit set.
std::uint16_t nan_half_from_float(std::uint32_t b) {
  return static_cast<std::uint16_t>(((b >> 16) & 0x8000) | 0x7e00 | ((b >> 13) & 0x3ff));
}
std::uint16_t nan_bf16_from_float(std::uint32_t b) {
  return static_cast<std::uint16_t>((b >> 16) | 0x40);
}

// ---- parallel sweep --------------------------------------------------------

struct Mismatch {
  std::uint64_t count = 0;
  std::uint32_t first = 0;
};

// Calls check(bits) for every `stride`-th non-negative float pattern (the
// check covers the negated pattern too), spread over the machine's cores.
template <typename Check>
Mismatch sweep_floats(std::uint32_t stride, Check check) {
  const unsigned n = std::max(2u, std::thread::hardware_concurrency());
  std::vector<Mismatch> per(n);
  std::vector<std::thread> threads;
  const std::uint64_t total = (std::uint64_t{1} << 31);
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      Mismatch& m = per[t];
      for (std::uint64_t b = std::uint64_t{t} * stride; b < total; b += std::uint64_t{n} * stride) {
        if (!check(static_cast<std::uint32_t>(b))) {
          if (m.count++ == 0) m.first = static_cast<std::uint32_t>(b);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  Mismatch all;
  for (const auto& m : per) {
    if (m.count && !all.count) all.first = m.first;
    all.count += m.count;
  }
  return all;
}

bool check_half_pattern(std::uint32_t b) {
  const float f = bfloat(b);
  const float nf = bfloat(b | 0x80000000u);
  if (std::isnan(f)) {
    return float_to_half_bits(f) == nan_half_from_float(b) &&
           float_to_half_bits(nf) == nan_half_from_float(b | 0x80000000u);
  }
  const std::uint16_t want = ref_half(f);
  return float_to_half_bits(f) == want && float_to_half_bits(nf) == (want | 0x8000);
}

bool check_bf16_pattern(std::uint32_t b) {
  const float f = bfloat(b);
  const float nf = bfloat(b | 0x80000000u);
  if (std::isnan(f)) {
    return float_to_bfloat16_bits(f) == nan_bf16_from_float(b) &&
           float_to_bfloat16_bits(nf) == nan_bf16_from_float(b | 0x80000000u);
  }
  const std::uint16_t want = ref_bf16(f);
  return float_to_bfloat16_bits(f) == want && float_to_bfloat16_bits(nf) == (want | 0x8000);
}

// Boundary float patterns of a 16-bit format: each value, each midpoint to
// the next larger value, and up to two float ulps either side of both.
std::vector<std::uint32_t> boundary_patterns(float (*to_float)(std::uint16_t), std::uint16_t inf) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t h = 0; h < inf; ++h) {
    const double v = to_float(static_cast<std::uint16_t>(h));
    const double next = h + 1 < inf ? static_cast<double>(to_float(static_cast<std::uint16_t>(h + 1)))
                                    : 2.0 * v - to_float(static_cast<std::uint16_t>(h - 1));
    // The midpoint needs one more bit than the format: exact in float.
    const float mid = static_cast<float>((v + next) / 2);
    for (float c : {static_cast<float>(v), mid}) {
      const std::uint32_t b = fbits(c);
      for (std::uint32_t d = 0; d <= 4; ++d) {
        if (b + d >= 2) out.push_back(b + d - 2);
      }
    }
  }
  return out;
}

// ---- float16 ---------------------------------------------------------------

TEST(HalfTest, AllPatternsToFloatExact) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto hb = static_cast<std::uint16_t>(h);
    const float got = half_bits_to_float(hb);
    const float want = ref_small_to_float(hb, 5, 10);
    if (std::isnan(want)) {
      // Quiet NaN with the same sign and payload.
      const std::uint32_t expect = ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13);
      ASSERT_EQ(fbits(got), expect) << std::hex << h;
    } else {
      ASSERT_EQ(fbits(got), fbits(want)) << std::hex << h;  // also checks -0
      // Round trip: every half is a float, so it comes back unchanged.
      ASSERT_EQ(float_to_half_bits(got), hb) << std::hex << h;
      ASSERT_EQ(Half(got).bits, hb);
      ASSERT_EQ(fbits(static_cast<float>(Half::from_bits(hb))), fbits(want));
    }
  }
}

TEST(HalfTest, FloatToHalfBoundaries) {
  const auto pats = boundary_patterns(&half_bits_to_float, 0x7c00);
  for (std::uint32_t b : pats) ASSERT_TRUE(check_half_pattern(b)) << std::hex << b;
  // Specials.
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-INFINITY), 0xfc00);
  EXPECT_EQ(float_to_half_bits(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);              // tie -> even (0)
  EXPECT_EQ(float_to_half_bits(bfloat(0x33000001)), 0x0001);    // just above the tie
  EXPECT_EQ(float_to_half_bits(0x1.8p-24f), 0x0002);            // tie 1.5 -> 2
  EXPECT_EQ(float_to_half_bits(0x1p-149f), 0x0000);             // float subnormal
  EXPECT_EQ(float_to_half_bits(bfloat(0xff800001)), 0xfe00);    // sNaN: quiet, signed
  EXPECT_EQ(float_to_half_bits(bfloat(0x7fc02000)), 0x7e01);    // payload kept
}

TEST(HalfTest, FloatToHalfAllFloatPatterns) {
  const bool full = exhaustive();
  const Mismatch m = sweep_floats(full ? 1 : 97, check_half_pattern);
  EXPECT_EQ(m.count, 0u) << "first mismatching float pattern 0x" << std::hex << m.first
                         << (full ? " (all 2^32 patterns)" : " (every 97th pattern)");
}

// ---- bfloat16 --------------------------------------------------------------

TEST(BFloat16Test, AllPatternsToFloatExact) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto hb = static_cast<std::uint16_t>(h);
    const float got = bfloat16_bits_to_float(hb);
    const float want = ref_small_to_float(hb, 8, 7);
    if (std::isnan(want)) {
      ASSERT_EQ(fbits(got), (h << 16) | 0x400000u) << std::hex << h;
    } else {
      ASSERT_EQ(fbits(got), fbits(want)) << std::hex << h;
      ASSERT_EQ(float_to_bfloat16_bits(got), hb) << std::hex << h;
      ASSERT_EQ(BFloat16(got).bits, hb);
      ASSERT_EQ(fbits(static_cast<float>(BFloat16::from_bits(hb))), fbits(want));
    }
  }
}

TEST(BFloat16Test, FloatToBFloat16Boundaries) {
  const auto pats = boundary_patterns(&bfloat16_bits_to_float, 0x7f80);
  for (std::uint32_t b : pats) ASSERT_TRUE(check_bf16_pattern(b)) << std::hex << b;
  EXPECT_EQ(float_to_bfloat16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16_bits(INFINITY), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits(-INFINITY), 0xff80);
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x7f7fffff)), 0x7f80);  // max float -> inf
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x7f7f7fff)), 0x7f7f);  // below the tie
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x7f7f8000)), 0x7f80);  // tie, odd -> up
  // NaNs whose payload is only in the dropped bits must stay NaN.
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x7f800001)), 0x7fc0);
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0xff80ffff)), 0xffc0);
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x00008000)), 0x0000);  // subnormal tie -> even
  EXPECT_EQ(float_to_bfloat16_bits(bfloat(0x00018000)), 0x0002);
}

TEST(BFloat16Test, FloatToBFloat16AllFloatPatterns) {
  const bool full = exhaustive();
  const Mismatch m = sweep_floats(full ? 1 : 97, check_bf16_pattern);
  EXPECT_EQ(m.count, 0u) << "first mismatching float pattern 0x" << std::hex << m.first
                         << (full ? " (all 2^32 patterns)" : " (every 97th pattern)");
}

// ---- double -> 16 bits -----------------------------------------------------

// Ties and near-ties between every pair of neighbouring values, plus random
// doubles around the format's range and fully random bit patterns.
template <typename Conv, typename Ref, typename ViaFloat>
void check_double_conversion(Conv conv, Ref ref, ViaFloat via_float,
                             float (*to_float)(std::uint16_t), std::uint16_t inf, int emin,
                             int emax) {
  std::uint64_t double_rounding_cases = 0;
  for (std::uint32_t h = 0; h < inf; ++h) {
    const double v = to_float(static_cast<std::uint16_t>(h));
    const double next = h + 1 < inf ? static_cast<double>(to_float(static_cast<std::uint16_t>(h + 1)))
                                    : 2.0 * v - to_float(static_cast<std::uint16_t>(h - 1));
    const double mid = (v + next) / 2;
    for (double base : {v, mid}) {
      for (double c : {base, std::nextafter(base, 0.0), std::nextafter(base, INFINITY),
                       base * (1 + 0x1p-40), base * (1 - 0x1p-40)}) {
        for (double s : {c, -c}) {
          ASSERT_EQ(conv(s), ref(s)) << std::hexfloat << s;
          if (conv(s) != via_float(s)) ++double_rounding_cases;
        }
      }
    }
  }
  // Just above a tie, float rounds down onto the tie first: via float would be
  // wrong there. Make sure the test indeed exercised such inputs.
  EXPECT_GT(double_rounding_cases, 0u);

  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int> exp_dist(emin - 15 + 1023, emax + 2 + 1023);
  for (int i = 0; i < 400000; ++i) {
    const std::uint64_t mant = rng() & 0xfffffffffffffull;
    const std::uint64_t sign = rng() & 1;
    const double d = std::bit_cast<double>((sign << 63) |
                                           (static_cast<std::uint64_t>(exp_dist(rng)) << 52) | mant);
    ASSERT_EQ(conv(d), ref(d)) << std::hexfloat << d;
    const double r = std::bit_cast<double>(rng());
    if (!std::isnan(r)) {
      ASSERT_EQ(conv(r), ref(r)) << std::hexfloat << r;
    }
  }
}

TEST(HalfTest, DoubleToHalfRoundsOnce) {
  check_double_conversion(
      [](double d) { return double_to_half_bits(d); }, [](double d) { return ref_half(d); },
      [](double d) { return float_to_half_bits(static_cast<float>(d)); }, &half_bits_to_float,
      0x7c00, -14, 15);
  // A concrete double-rounding case: 1 + 2^-11 + 2^-40 is just above the tie
  // between 1 and 1 + 2^-10; float rounds it to the tie, which goes to even.
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(double_to_half_bits(d), 0x3c01);
  EXPECT_EQ(float_to_half_bits(static_cast<float>(d)), 0x3c00);
  EXPECT_EQ(Half(d).bits, 0x3c01);
  EXPECT_EQ(double_to_half_bits(-0.0), 0x8000);
  EXPECT_EQ(double_to_half_bits(1e300), 0x7c00);
  EXPECT_EQ(double_to_half_bits(-1e-300), 0x8000);
  EXPECT_EQ(double_to_half_bits(0x1p-1074), 0x0000);
  EXPECT_EQ(double_to_half_bits(std::bit_cast<double>(0xfff0000000000001ull)), 0xfe00);
  EXPECT_EQ(double_to_half_bits(std::bit_cast<double>(0x7ff8040000000000ull)), 0x7e01);
}

TEST(BFloat16Test, DoubleToBFloat16RoundsOnce) {
  check_double_conversion(
      [](double d) { return double_to_bfloat16_bits(d); }, [](double d) { return ref_bf16(d); },
      [](double d) { return float_to_bfloat16_bits(static_cast<float>(d)); },
      &bfloat16_bits_to_float, 0x7f80, -126, 127);
  const double d = 1.0 + 0x1p-8 + 0x1p-40;
  EXPECT_EQ(double_to_bfloat16_bits(d), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(static_cast<float>(d)), 0x3f80);
  EXPECT_EQ(BFloat16(d).bits, 0x3f81);
  EXPECT_EQ(double_to_bfloat16_bits(1e300), 0x7f80);
  EXPECT_EQ(double_to_bfloat16_bits(-0x1p-134), 0x8000);                 // tie -> 0
  EXPECT_EQ(double_to_bfloat16_bits(0x1p-134 * (1 + 0x1p-50)), 0x0001);  // above it
  EXPECT_EQ(double_to_bfloat16_bits(std::bit_cast<double>(0x7ff0000000000001ull)), 0x7fc0);
}

}  // namespace
}  // namespace genesis
