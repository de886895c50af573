// The clock, sizes and deterministic sequences of the allocator benchmark
// patterns (bench/bench_common.h describes the patterns). No Genesis or CUDA
// includes: alloc_bench and torch_alloc_bench measure the same loops.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace genesis_bench {

using Clock = std::chrono::steady_clock;

inline double elapsed_ns(Clock::time_point t0, Clock::time_point t1) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

/// Keeps the compiler from dropping an allocation whose pointer is unused.
template <class T>
inline void keep(const T& value) {
#if defined(__GNUC__) || defined(__clang__)
  asm volatile("" : : "r,m"(value));
#else
  static volatile const void* sink;
  sink = &value;
#endif
}

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;

inline const std::vector<std::size_t>& hot_sizes() {
  static const std::vector<std::size_t> sizes = {512, 64 * KiB, 1 * MiB, 8 * MiB, 256 * MiB};
  return sizes;
}
inline constexpr int kMixedLive = 64;
inline constexpr int kMixedOctaves = 16;              // 512 B << 0..15, up to 32 MiB - 1
inline constexpr std::size_t kMixedSteps = 1 << 16;   // sequence length (cycled)
inline constexpr std::uint64_t kMixedSeed = 0x6e6573697347ULL;  // fixed: same sequence every run
inline constexpr std::size_t kThreadHotSize = 1 * MiB;

/// "512 B", "64 KiB", "1 MiB", ... for the tables.
inline std::string size_label(std::size_t bytes) {
  char buf[64];
  if (bytes >= MiB && bytes % MiB == 0) {
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes / MiB);
  } else if (bytes >= KiB && bytes % KiB == 0) {
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes / KiB);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  }
  return buf;
}

// ------------------------------------------------------------ sequences ---

/// SplitMix64: tiny, fast, and identical on every platform (unlike the
/// standard library's distributions).
struct SplitMix64 {
  std::uint64_t state;
  explicit SplitMix64(std::uint64_t seed) : state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

/// The deterministic free/alloc sequence of the mixed pattern.
struct MixedSequence {
  std::array<std::uint32_t, kMixedLive> initial{};  // sizes of the first 64 live blocks
  std::vector<std::uint32_t> size;                   // step i: allocate size[i] ...
  std::vector<std::uint8_t> slot;                    // ... into slot[i] (after freeing it)

  static std::uint32_t draw_size(SplitMix64& rng) {
    const std::uint64_t r = rng.next();
    const std::uint32_t base = 512u << (r % kMixedOctaves);
    return base + static_cast<std::uint32_t>((r >> 8) % base);  // [base, 2 base)
  }

  /// distinct == 0: every size drawn afresh (continuous, rarely repeating);
  /// distinct > 0: sizes drawn from a fixed table of that many sizes, the way
  /// a model's tensors repeat the same shapes every step (pattern mixed_set).
  static MixedSequence make(std::uint64_t seed, std::size_t steps = kMixedSteps, std::size_t distinct = 0) {
    MixedSequence s;
    SplitMix64 rng(seed);
    std::vector<std::uint32_t> table(distinct);
    for (auto& v : table) v = draw_size(rng);
    auto draw = [&]() { return distinct == 0 ? draw_size(rng) : table[rng.next() % distinct]; };
    for (auto& v : s.initial) v = draw();
    s.size.resize(steps);
    s.slot.resize(steps);
    for (std::size_t i = 0; i < steps; ++i) {
      s.slot[i] = static_cast<std::uint8_t>(rng.next() % kMixedLive);
      s.size[i] = draw();
    }
    return s;
  }

  /// Mean size of the steps (for the report).
  double mean_size() const {
    double sum = 0;
    for (auto v : size) sum += v;
    return size.empty() ? 0.0 : sum / static_cast<double>(size.size());
  }
};

}  // namespace genesis_bench
