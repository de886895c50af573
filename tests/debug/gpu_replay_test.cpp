// Trace replay on a real GPU (device "cuda"): every named configuration
// replays a small trace with two streams and the bundled GPT-2 trace without
// errors, and ends with nothing allocated. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "debug/trace_test_util.h"
#include "genesis/cuda/runtime.h"
#include "genesis/debug/replay.h"
#include "genesis/debug/replay_report.h"
#include "genesis/debug/trace.h"

namespace genesis::debug {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

TEST(GpuReplayTest, TwoStreamsEveryConfiguration) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  TraceBuilder b("two streams");
  // Stream values of the recorded process (not streams of this one).
  const StreamId other = 0x7f0012345678;
  for (std::uintptr_t i = 1; i <= 200; ++i) {
    b.alloc(i, (i % 7 + 1) * 3 * MiB + i * 512, i % 3 == 0 ? other : 0);
    if (i > 4) b.free(i - 4);
  }
  for (std::uintptr_t i = 197; i <= 200; ++i) b.free(i);
  const Trace t = b.finish();
  ASSERT_EQ(t.streams.size(), 2u);
  for (const auto& c : known_replay_configs()) {
    SCOPED_TRACE(c.name);
    const ReplayResult r = replay(t, make_replay_config(c.name, ReplayDevice::kCuda));
    EXPECT_EQ(r.upstream, "cuda:0");
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_EQ(r.peak_live_bytes, t.peak_live_bytes);
    EXPECT_GE(r.peak_reserved_bytes, r.peak_live_bytes);
    EXPECT_EQ(r.allocated_after_cleanup, 0);
  }
}

TEST(GpuReplayTest, BundledGpt2EveryConfiguration) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  const std::string p = testing_support::bundled_trace("gpt2_train.trace.csv.gz");
  if (p.empty() || !trace_gzip_supported()) GTEST_SKIP() << "bundled trace or zlib missing";
  const Trace t = read_trace(p);
  std::vector<ReplayResult> results;
  for (const auto& c : known_replay_configs()) {
    SCOPED_TRACE(c.name);
    results.push_back(replay(t, make_replay_config(c.name, ReplayDevice::kCuda)));
    const ReplayResult& r = results.back();
    EXPECT_EQ(r.ooms, 0u);
    EXPECT_EQ(r.peak_live_bytes, 14'417'617'608ull);
    EXPECT_GE(r.reserved_per_live, 1.0);
    EXPECT_EQ(r.allocated_after_cleanup, 0);
  }
  std::printf("%s", format_replay_table(results, load_reference_figures(p)).c_str());
}

}  // namespace
}  // namespace genesis::debug
