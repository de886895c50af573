// Helpers shared by the caching-allocator test suites (CPU and GPU binaries).
//
// Nothing here includes CUDA headers: the GPU test file adds its CUDA-specific
// pieces itself.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/stats.h"

namespace genesis::memory::testing_support {

// Runs f on a new thread and waits for it (the thread exits afterwards).
inline void on_thread(const std::function<void()>& f) {
  std::thread t(f);
  t.join();
}

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * KiB;
inline constexpr std::size_t GiB = 1024 * MiB;

inline std::uintptr_t addr_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

/// The allocator's size rules, restated independently of its sources
/// so that a change in either shows up as a test failure.
inline constexpr std::size_t round512(std::size_t n) { return (n + 511) / 512 * 512; }
inline constexpr std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }
/// Segment size the allocator requests from its upstream for a request of
/// `n` bytes when no cached block fits.
inline constexpr std::size_t expected_segment_size(std::size_t n) {
  const std::size_t r = round512(n);
  if (r <= 1 * MiB) return 2 * MiB;
  if (r < 10 * MiB) return 20 * MiB;
  return round_up(r, 2 * MiB);
}
/// Block size handed out for `n` bytes from a fresh segment: the rounded size,
/// unless the remainder is too small to split (large pool: <= 1 MiB left), in
/// which case the whole segment.
inline constexpr std::size_t expected_fresh_block_size(std::size_t n) {
  const std::size_t r = round512(n);
  if (r <= 1 * MiB) return r;
  const std::size_t seg = expected_segment_size(n);
  return seg - r > 1 * MiB ? r : seg;
}

/// Options for tests that assert the classic segment layout
/// (2 MiB small segments, 20 MiB / rounded large segments): expandable
/// segments off. Tests of expandable segments say so explicitly.
inline AllocatorOptions classic(AllocatorOptions o = {}) {
  o.expandable_segments = AllocatorOptions::Expandable::kOff;
  return o;
}
inline AllocatorOptions classic_no_thread_cache() {
  AllocatorOptions o = classic();
  o.thread_cache = false;
  return o;
}

/// Field-by-field comparison of two MemoryStats; the failure message names
/// every field that differs.
::testing::AssertionResult StatsEqual(const MemoryStats& a, const MemoryStats& b);

/// Checks the structural invariants of a snapshot: blocks tile their segment
/// exactly (contiguous, sizes sum to the segment size), every block is
/// 512-aligned, states are known, allocated_bytes matches the allocated
/// blocks, no two free blocks are neighbours (coalescing), and segments do not
/// overlap each other.
::testing::AssertionResult SnapshotConsistent(const std::vector<SegmentInfo>& snap);

/// Counts blocks with the given state over a snapshot.
std::size_t count_blocks(const std::vector<SegmentInfo>& snap, const std::string& state);

/// The rows of memory_summary() that must be there.
::testing::AssertionResult SummaryHasRows(const std::string& summary);

/// Thread-safe registry of live [begin, end) ranges. insert() fails (returns
/// a message) when the new range overlaps a live one; erase() fails when the
/// range is unknown. Used by the stress tests to catch overlapping
/// allocations at the moment they are handed out.
class LiveRanges {
 public:
  /// Empty string on success, else a description of the conflict.
  std::string insert(std::uintptr_t begin, std::size_t size);
  std::string erase(std::uintptr_t begin);
  std::size_t size() const;
  std::size_t total_bytes() const;

 private:
  mutable std::mutex mu_;
  std::map<std::uintptr_t, std::size_t> ranges_;  // begin -> size
  std::size_t bytes_ = 0;
};

/// Scale factor for stress-test iteration counts: GENESIS_STRESS_SCALE if set
/// (a positive number), else 1.0 in optimised builds and less under
/// sanitizers / without optimisation (see the .cpp).
double stress_scale();
/// max(1, base * stress_scale()).
int scaled(int base);
/// True when the binary is instrumented by ThreadSanitizer / AddressSanitizer.
bool under_tsan();
bool under_asan();

/// Runs this test binary again (/proc/self/exe) with `--gtest_filter=filter`
/// and the extra environment variables (NAME=VALUE), captures its output and
/// returns the exit status (-1 if it could not be started, 128+signal when it
/// died of a signal).
int run_self(const std::string& filter, const std::vector<std::string>& extra_env, std::string* output);

}  // namespace genesis::memory::testing_support
