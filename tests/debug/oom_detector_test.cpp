#include "genesis/debug/oom_detector.h"

#include <gtest/gtest.h>

#include "debug_test_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::kTotal;
using testing::make_sample;
using testing::SawtoothJob;

TEST(OOMPredictor, SteadySawtoothIsLowRisk) {
  OOMPredictor p;
  const SawtoothJob job;  // 20-22 GiB of 80
  for (int i = 0; i <= 3000; ++i) p.add(job.at(i * 0.1));
  const OOMPrediction r = p.predict();
  EXPECT_EQ(r.risk_level, RiskLevel::low);
  EXPECT_LT(r.predicted_oom_seconds, 0);
  EXPECT_NEAR(r.growth_rate_bytes_per_sec, 0, 1e3);
  ASSERT_FALSE(r.recommendations.empty());
  EXPECT_NE(r.recommendations.front().find("No action"), std::string::npos) << r.recommendations.front();
}

TEST(OOMPredictor, LinearGrowthReachesOOMWhenExpected) {
  OOMPredictor p;
  const double slope = 100.0 * kMiB;  // bytes per second
  const double start = 20.0 * kGiB;
  const double end_t = 200;
  for (int i = 0; i <= 2000; ++i) {
    const double t = i * 0.1;
    p.add(make_sample(t, start + slope * t, start + slope * t));
  }
  const OOMPrediction r = p.predict();
  const double truth = (static_cast<double>(kTotal) - (start + slope * end_t)) / slope;
  ASSERT_GT(r.predicted_oom_seconds, 0);
  EXPECT_NEAR(r.predicted_oom_seconds, truth, 0.15 * truth);
  EXPECT_NEAR(r.growth_rate_bytes_per_sec, slope, 0.01 * slope);
  EXPECT_GT(r.confidence, 0.8);
  EXPECT_EQ(r.risk_level, RiskLevel::medium);  // 396 s left: under 600 s
}

// A job that is quiet for a while (start-up) and then grows: the prediction
// follows the growth within seconds instead of averaging it with the quiet
// part of the horizon.
TEST(OOMPredictor, GrowthAfterAQuietStartIsPredictedWithoutLag) {
  OOMPredictor p;
  const double slope = 4.0 * kGiB;  // bytes per second
  const double quiet = 10;           // seconds before the growth starts
  const double base = 1.0 * kGiB;
  const double now = 20;
  for (int i = 0; i <= static_cast<int>(now * 10); ++i) {
    const double t = i * 0.1;
    const double used = base + (t > quiet ? slope * (t - quiet) : 0.0);
    p.add(make_sample(t, used, used));
  }
  const OOMPrediction r = p.predict();
  const double truth = (static_cast<double>(kTotal) - (base + slope * (now - quiet))) / slope;
  ASSERT_GT(r.predicted_oom_seconds, 0);
  EXPECT_NEAR(r.predicted_oom_seconds, truth, 0.2 * truth);
  EXPECT_NEAR(r.growth_rate_bytes_per_sec, slope, 0.1 * slope);
}

// Growth fast enough to fill the device in a minute, seen for a few seconds
// at low usage: the risk is the estimate's, and the advice says so instead
// of calling usage over a threshold it is far below.
TEST(OOMPredictor, AFastButBriefGrowthIsNotCalledUsageOverTheThreshold) {
  // 12 s of a 1 GiB device whose peaks grow 8 MiB/s under a 100 MiB
  // sawtooth: full in about 90 s, with a fifth of the horizon seen.
  OOMPredictor p;
  const auto total = static_cast<std::uint64_t>(kGiB);
  for (int i = 0; i <= 120; ++i) {
    const double t = i * 0.1;
    const double base = 100.0 * kMiB + 8.0 * kMiB * t;
    p.add(make_sample(t, base + (i % 10 < 5 ? 100.0 * kMiB : 0.0), base + 100.0 * kMiB, total));
  }
  const OOMPrediction r = p.predict();
  ASSERT_GE(r.risk_level, RiskLevel::high);
  ASSERT_LT(r.confidence, 0.5);
  ASSERT_GT(r.predicted_oom_seconds, 0);
  EXPECT_LT(r.current_usage_percent, 50);
  std::string all;
  for (const std::string& line : r.recommendations) all += line + "\n";
  EXPECT_EQ(all.find("(threshold"), std::string::npos) << all;
  EXPECT_NE(all.find("too short or uneven a stretch to be sure"), std::string::npos) << all;
}

// A job that fills its device in about 20 s is predicted within the first
// seconds, while the prediction is still of use, not only after a quarter
// of the two-minute horizon.
TEST(OOMPredictor, AJobThatFillsTheDeviceFastIsPredictedEarly) {
  OOMPredictor p;
  const auto total = static_cast<std::uint64_t>(kGiB);
  const double slope = 50.0 * kMiB;
  for (int i = 0; i <= 700; ++i) {  // 7 s, every 10 ms
    const double t = i * 0.01;
    p.add(make_sample(t, slope * t, slope * t, total));
  }
  const OOMPrediction r = p.predict();
  const double truth = (static_cast<double>(total) - slope * 7.0) / slope;
  ASSERT_GT(r.predicted_oom_seconds, 0) << "confidence " << r.confidence;
  EXPECT_NEAR(r.predicted_oom_seconds, truth, 0.2 * truth);
  EXPECT_GE(r.risk_level, RiskLevel::critical);  // under 30 s left
}

TEST(OOMPredictor, SawtoothWithGrowingPeaksIsJudgedByItsPeaks) {
  OOMPredictor p;
  SawtoothJob job;
  job.leak_per_s = 50.0 * kMiB;
  for (int i = 0; i <= 3000; ++i) p.add(job.at(i * 0.1));
  const OOMPrediction r = p.predict();
  const double peak = job.trough(300) + job.step + 256.0 * kMiB;
  const double truth = (static_cast<double>(kTotal) - peak) / job.leak_per_s;
  ASSERT_GT(r.predicted_oom_seconds, 0);
  EXPECT_NEAR(r.predicted_oom_seconds, truth, 0.15 * truth);
}

TEST(OOMPredictor, OneSpikeIsNotATrend) {
  OOMPredictor plain;
  OOMPredictor spiky;
  const double slope = 10.0 * kMiB;
  for (int i = 0; i <= 1200; ++i) {
    const double t = i * 0.1;
    const MemorySample s = make_sample(t, 20.0 * kGiB + slope * t, 20.0 * kGiB + slope * t);
    plain.add(s);
    spiky.add(i == 700 ? make_sample(t, 60.0 * kGiB, 60.0 * kGiB) : s);
  }
  const OOMPrediction a = plain.predict();
  const OOMPrediction b = spiky.predict();
  EXPECT_NEAR(b.growth_rate_bytes_per_sec, a.growth_rate_bytes_per_sec, 1e-6 * a.growth_rate_bytes_per_sec);
  EXPECT_NEAR(b.predicted_oom_seconds, a.predicted_oom_seconds, 1e-6 * a.predicted_oom_seconds);
}

TEST(OOMPredictor, LevelsFollowUsageAndRecommendationsUseTheFigures) {
  OOMPredictor p(85);
  // 92% used, flat, 6 GiB of it cached in crumbs.
  MemorySample s = make_sample(0, 68.0 * kGiB, 0.92 * kTotal);
  s.largest_free_block = 256 * kMiB;
  s.free_blocks = 40;
  for (int i = 0; i < 600; ++i) {
    s.time_ns = testing::ns(i * 0.1);
    p.add(s);
  }
  const OOMPrediction r = p.predict();
  EXPECT_EQ(r.risk_level, RiskLevel::high);
  EXPECT_NEAR(r.current_usage_percent, 92, 0.01);
  std::string all;
  for (const auto& line : r.recommendations) all += line + "\n";
  EXPECT_NE(all.find("cached but unused: empty_cache()"), std::string::npos) << all;
  EXPECT_NE(all.find("largest free block is 256.00 MiB"), std::string::npos) << all;
  EXPECT_EQ(risk_level_name(RiskLevel::critical), "critical");
}

TEST(OOMPredictor, NamesTheGrowingSites) {
  OOMPredictor p;
  for (int i = 0; i <= 600; ++i) {
    const double t = i * 0.1;
    p.add(make_sample(t, 20.0 * kGiB + 50.0 * kMiB * t, 20.0 * kGiB + 50.0 * kMiB * t));
    if (i % 10 == 0) {
      p.add_sites(testing::ns(t), {{"cache.py:12 in remember\nmain.py:3 in run",
                                    static_cast<std::uint64_t>(50.0 * kMiB * t), 1},
                                   {"model.py:1 in init", 20 * kGiB, 10}});
    }
  }
  const OOMPrediction r = p.predict();
  std::string all;
  for (const auto& line : r.recommendations) all += line + "\n";
  EXPECT_NE(all.find("Growing site cache.py:12 in remember"), std::string::npos) << all;
  EXPECT_EQ(all.find("model.py"), std::string::npos) << all;
  EXPECT_NE(all.find("reduce the batch size"), std::string::npos) << all;
}

TEST(OOMDetector, WarnsOnRiseAndThenRateLimits) {
  OOMDetectorOptions o;
  o.min_warning_interval_s = 30;
  OOMDetector d(o);
  int calls = 0;
  d.on_warning([&](const std::string&, const OOMPrediction& p) {
    EXPECT_GE(p.risk_level, RiskLevel::high);
    ++calls;
  });
  for (int i = 0; i < 600; ++i) d.add("1", make_sample(i * 0.1, 40.0 * kGiB, 0.5 * kTotal));  // low: no warning
  EXPECT_EQ(calls, 0);
  for (int i = 0; i < 3000; ++i) d.add("0", make_sample(i * 0.1, 70.0 * kGiB, 0.9 * kTotal));  // high for 300 s
  EXPECT_GE(calls, 5);
  EXPECT_LE(calls, 12);  // not one per sample
  EXPECT_EQ(d.warnings("0").size(), static_cast<std::size_t>(calls));
  EXPECT_TRUE(d.warnings("1").empty());
  const int before = calls;
  d.add("0", make_sample(300.05, 78.0 * kGiB, 0.99 * kTotal));  // critical: a rise warns at once
  d.add("0", make_sample(301.1, 78.0 * kGiB, 0.99 * kTotal));
  EXPECT_EQ(calls, before + 1);
  EXPECT_EQ(d.warnings("0").back().level, RiskLevel::critical);
  EXPECT_THROW(d.predict("7"), InvalidArgumentError);
  EXPECT_THROW(OOMDetector(OOMDetectorOptions{150}), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis::debug
