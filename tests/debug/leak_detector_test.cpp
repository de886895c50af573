#include "genesis/debug/leak_detector.h"

#include <gtest/gtest.h>

#include "debug_test_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::SawtoothJob;

constexpr const char* kLeakySite = "leaky.py:10 in step\ntrain.py:5 in main";

// Feeds `seconds` of `job` at 0.1 s, with sites every second: a leaking
// site growing at the job's leak rate, a constant one, and the activations
// that follow the sawtooth.
void feed(LeakDetector& d, const SawtoothJob& job, double seconds) {
  for (int i = 0; i <= static_cast<int>(seconds * 10); ++i) {
    const double t = i * 0.1;
    d.add("0", job.at(t));
    if (i % 10 == 0) {
      const auto act = static_cast<std::uint64_t>(job.at(t).allocated - job.trough(t));
      d.add_sites("0", testing::ns(t),
                  {{"model.py:1 in init", static_cast<std::uint64_t>(job.base), 100},
                   {kLeakySite, static_cast<std::uint64_t>(job.leak_per_s * t), static_cast<std::uint64_t>(i / 10)},
                   {"act.py:7 in forward", act, 4}});
    }
  }
}

TEST(LeakDetector, SteadySawtoothIsNotALeak) {
  LeakDetector d;
  feed(d, SawtoothJob{}, 600);
  const LeakReport r = d.report("0");
  EXPECT_FALSE(r.leak_detected);
  EXPECT_NEAR(r.growth_rate_mb_per_min, 0, 0.5);
}

TEST(LeakDetector, FindsAPlantedLeakUnderTheSawtooth) {
  LeakDetector d;  // 10 MB/min, 60 s window
  SawtoothJob job;
  job.leak_per_s = 20.0 * kMiB / 60.0;  // troughs grow 20 MiB/min
  feed(d, job, 600);
  const LeakReport r = d.report("0");
  EXPECT_TRUE(r.leak_detected);
  EXPECT_NEAR(r.growth_rate_mb_per_min, 20, 3);
  EXPECT_GE(r.confidence, 0.5);
  ASSERT_FALSE(r.sites.empty());
  EXPECT_EQ(r.sites.front().site, kLeakySite);
  EXPECT_NEAR(r.sites.front().growth_rate_mb_per_min, 20, 3);
  EXPECT_EQ(r.sites.front().frames, (std::vector<std::string>{"leaky.py:10 in step", "train.py:5 in main"}));
  EXPECT_EQ(r.sites.front().count, 600u);
  for (const LeakSite& s : r.sites) EXPECT_NE(s.site, "model.py:1 in init");
}

TEST(LeakDetector, FastGrowthSeenBrieflyIsAPossibleLeakNotNone) {
  // 100 s of troughs growing 40 MiB/min: four times the threshold, but a
  // 60 s warm-up leaves too little of the run to be sure.
  LeakDetector d;
  SawtoothJob job;
  job.leak_per_s = 40.0 * kMiB / 60.0;
  feed(d, job, 100);
  const LeakReport r = d.report("0");
  EXPECT_FALSE(r.leak_detected);
  EXPECT_LT(r.confidence, 0.5);
  EXPECT_STREQ(r.verdict(), "possible") << r.growth_rate_mb_per_min << " MiB/min";
  // The long run decides; the flat one is no leak.
  LeakDetector long_run;
  feed(long_run, job, 600);
  EXPECT_STREQ(long_run.report("0").verdict(), "leak");
  LeakDetector flat;
  feed(flat, SawtoothJob{}, 100);
  EXPECT_STREQ(flat.report("0").verdict(), "none");
}

TEST(LeakDetector, WarmUpIsNotALeak) {
  LeakDetector d;
  // 90 s of fast growth (10 GiB), then a flat sawtooth for ten minutes.
  for (int i = 0; i <= 6900; ++i) {
    const double t = i * 0.1;
    SawtoothJob job;
    job.base = 10.0 * kGiB + 10.0 * kGiB * std::min(t, 90.0) / 90.0;
    d.add("0", job.at(t));
  }
  const LeakReport r = d.report("0");
  EXPECT_FALSE(r.leak_detected) << r.growth_rate_mb_per_min << " MB/min";
  EXPECT_GE(r.warmup_seconds, 60);
  EXPECT_LT(r.growth_rate_mb_per_min, 1);
}

TEST(LeakDetector, DiffComparesTwoPointsInTime) {
  LeakDetector d;
  SawtoothJob job;
  job.leak_per_s = 1.0 * kMiB;
  feed(d, job, 300);
  const auto delta = d.diff("0", testing::ns(100), testing::ns(200));
  ASSERT_FALSE(delta.empty());
  EXPECT_EQ(delta.front().site, kLeakySite);
  // Snapshots are thinned to 64 spread over the run: the nearest ones before
  // 100 s and 200 s are compared.
  EXPECT_NEAR(static_cast<double>(delta.front().bytes_delta), 100.0 * kMiB, 15.0 * kMiB);
  EXPECT_GT(delta.front().count_delta, 0);
  EXPECT_THROW(d.diff("0", 5, 1), InvalidArgumentError);
  EXPECT_THROW(d.diff("9", 0, 1), InvalidArgumentError);
  EXPECT_THROW(d.report("9"), InvalidArgumentError);
}

TEST(LeakDetector, TrackingOffKeepsNoSites) {
  LeakDetector d(10, 60, false);
  SawtoothJob job;
  job.leak_per_s = 20.0 * kMiB / 60.0;
  feed(d, job, 300);
  const LeakReport r = d.report("0");
  EXPECT_TRUE(r.sites.empty());
  EXPECT_TRUE(d.diff("0", 0, testing::ns(300)).empty());
  EXPECT_THROW(LeakDetector(0, 60), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis::debug
