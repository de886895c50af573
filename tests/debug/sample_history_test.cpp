#include "genesis/debug/sample_history.h"

#include <gtest/gtest.h>

#include "debug_test_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {
namespace {

using testing::kGiB;
using testing::make_sample;

TEST(SampleHistory, KeepsEverySampleWhileUnderTheBound) {
  SampleHistory h;
  for (int i = 0; i < 100; ++i) h.add(make_sample(i * 0.1, i * 1.0 * kGiB / 100, 2.0 * kGiB));
  EXPECT_EQ(h.count(), 100u);
  EXPECT_EQ(h.buckets().size(), 100u);
  EXPECT_EQ(h.merged(), 0u);
  EXPECT_EQ(h.buckets()[42].allocated.min, make_sample(4.2, 42.0 * kGiB / 100, 0).allocated);
}

TEST(SampleHistory, TenHoursAtATenthOfASecondStayBoundedAndExact) {
  SampleHistory h;  // 5 MiB
  const std::uint64_t n = 10ull * 3600 * 10;
  double sum_util = 0, sum_frag = 0, max_util = 0;
  std::uint64_t peak_alloc = 0, peak_reserved = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) * 0.1;
    // A slow wave with a one-sample peak in the middle of the run.
    double alloc = (10.0 + 5.0 * std::sin(t / 600.0)) * kGiB;
    if (i == n / 2) alloc = 70.0 * kGiB;
    const MemorySample s = make_sample(t, alloc, 16.0 * kGiB + static_cast<double>(i % 1000) * 1e6);
    sum_util += s.utilization_percent();
    sum_frag += s.fragmentation();
    max_util = std::max(max_util, s.utilization_percent());
    peak_alloc = std::max(peak_alloc, s.allocated);
    peak_reserved = std::max(peak_reserved, s.reserved);
    h.add(s);
  }
  EXPECT_LT(h.bytes(), SampleHistory::kDefaultMaxBytes);
  EXPECT_EQ(h.count(), n);
  EXPECT_GT(h.merged(), 0u);
  std::uint64_t in_buckets = 0;
  std::uint64_t bucket_peak = 0;
  for (const SampleBucket& b : h.buckets()) {
    in_buckets += b.count;
    bucket_peak = std::max(bucket_peak, b.allocated.max);
  }
  EXPECT_EQ(in_buckets, n);                // nothing dropped
  EXPECT_EQ(bucket_peak, peak_alloc);      // the one-sample peak survives merging
  EXPECT_EQ(h.peak_allocated(), peak_alloc);
  EXPECT_EQ(h.peak_reserved(), peak_reserved);
  EXPECT_DOUBLE_EQ(h.max_utilization_percent(), max_util);
  EXPECT_NEAR(h.avg_utilization_percent(), sum_util / static_cast<double>(n), 1e-9);
  EXPECT_NEAR(h.avg_fragmentation(), sum_frag / static_cast<double>(n), 1e-12);
  // Recent history keeps full resolution.
  EXPECT_EQ(h.buckets().back().count, 1u);
  EXPECT_EQ(h.last().time_ns, testing::ns(static_cast<double>(n - 1) * 0.1));
}

TEST(SampleHistory, RejectsABoundTooSmall) {
  EXPECT_THROW(SampleHistory(64), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis::debug
