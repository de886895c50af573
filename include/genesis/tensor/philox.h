// Philox 4x32-10: the counter-based random generator behind rand, randn and
// randint, written once for host and device code.
//
// Note [Random numbers]: a random tensor is a pure function of (seed,
// offset, element index): element i of a call draws the Philox block with
// key = seed and counter = offset + i (64 bits, in the two low words), and
// turns it into a value with the functions below. Nothing depends on how the
// work is split among threads or GPU blocks, so every backend that evaluates
// these same functions produces the same numbers for a seed: CPU and CUDA
// agree bit for bit for uniform and integer draws; normal draws go through
// log/sqrt/cos in double precision before rounding to the dtype, so they agree
// wherever the two math libraries round those functions alike (in practice
// always for float32 and narrower outputs). After a call the generator's
// offset advances by the element count, so consecutive calls never reuse a
// counter.
//
// Philox 4x32-10 is the generator of Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3" (SC'11), with the standard multipliers and Weyl
// constants; the known-answer vectors of the paper's Random123 release are in
// tests/tensor/philox_test.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "genesis/core/half.h"  // GENESIS_HOST_DEVICE

namespace genesis::philox {

struct Block {
  std::uint32_t v[4];
};

namespace detail {
inline constexpr std::uint32_t kM0 = 0xD2511F53u;
inline constexpr std::uint32_t kM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kW0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

GENESIS_HOST_DEVICE constexpr void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                           std::uint32_t& lo) noexcept {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}
}  // namespace detail

/// The Philox 4x32 bijection with 10 rounds of `counter` under `key`.
GENESIS_HOST_DEVICE constexpr Block philox4x32_10(Block counter, std::uint32_t k0,
                                                  std::uint32_t k1) noexcept {
  Block c = counter;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += detail::kW0;
      k1 += detail::kW1;
    }
    std::uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
    detail::mulhilo(detail::kM0, c.v[0], hi0, lo0);
    detail::mulhilo(detail::kM1, c.v[2], hi1, lo1);
    c = Block{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

/// The block of element `index` of a draw at generator `offset` under `seed`
/// (Note [Random numbers]).
GENESIS_HOST_DEVICE constexpr Block element_block(std::uint64_t seed, std::uint64_t offset,
                                                  std::uint64_t index) noexcept {
  const std::uint64_t counter = offset + index;
  return philox4x32_10(Block{{static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32), 0u, 0u}},
                       static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Uniform in [0, 1) with 24 random bits: exact in float32 (used for float32,
/// float16 and bfloat16 outputs, which then round to nearest even; a value
/// that rounds up to 1.0 in a narrow type is clamped by the caller).
GENESIS_HOST_DEVICE constexpr float uniform_float(const Block& b) noexcept {
  return static_cast<float>(b.v[0] >> 8) * (1.0f / 16777216.0f);
}

/// Uniform in [0, 1) with 53 random bits (float64 outputs).
GENESIS_HOST_DEVICE constexpr double uniform_double(const Block& b) noexcept {
  const std::uint64_t bits = (static_cast<std::uint64_t>(b.v[0]) << 32 | b.v[1]) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

/// Standard normal by Box-Muller on words 2 and 3 (the cosine branch), in
/// double precision. u1 lies in (0, 1], so the logarithm is finite.
GENESIS_HOST_DEVICE inline double normal_double(const Block& b) noexcept {
  const double u1 = (static_cast<double>(b.v[2]) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = static_cast<double>(b.v[3]) * (1.0 / 4294967296.0);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

/// Integer in [low, low + range) for range >= 1, from 64 random bits by
/// modulo (bias below range / 2^64, negligible for any tensor size).
GENESIS_HOST_DEVICE constexpr std::int64_t integer(const Block& b, std::int64_t low,
                                                   std::uint64_t range) noexcept {
  const std::uint64_t bits = static_cast<std::uint64_t>(b.v[0]) << 32 | b.v[1];
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + bits % range);
}

}  // namespace genesis::philox
