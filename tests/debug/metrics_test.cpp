// The Prometheus writer and the memory families: format, escaping, naming
// rules, and promtool's verdict on a full exposition.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "debug_test_util.h"
#include "genesis/core/error.h"
#include "genesis/debug/distributed_master.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/metrics.h"

namespace genesis::debug {
namespace {

NodeFigures sample_node(const std::string& name, const std::string& rank, std::uint64_t used) {
  NodeFigures n;
  n.identity.node = name;
  n.identity.rank = rank;
  n.identity.world_size = rank.empty() ? "" : "2";
  DeviceFigures d;
  d.device = "0";
  d.sample = testing::make_sample(1, static_cast<double>(used) / 2, static_cast<double>(used), 4 * testing::kGiB);
  d.sample.num_allocs = 42;
  d.sample.num_ooms = 1;
  d.usage_percent = d.sample.utilization_percent();
  d.risk_level = RiskLevel::high;
  d.predicted_oom_seconds = rank == "1" ? 45.5 : -1;
  n.devices.push_back(d);
  n.host_rss = 1000;
  return n;
}

TEST(MetricsWriter, WritesHelpTypeAndSamples) {
  MetricsWriter w;
  w.family("genesis_x_bytes", "Some bytes.\nTwo lines \\ here.", MetricType::gauge);
  w.sample({{"node", "a\"b\\c\nd"}, {"device", "0"}}, 1024);
  w.sample({}, 0.5);
  w.family("genesis_y_total", "A counter.", MetricType::counter);
  w.sample({}, 3);
  EXPECT_EQ(w.text(),
            "# HELP genesis_x_bytes Some bytes.\\nTwo lines \\\\ here.\n"
            "# TYPE genesis_x_bytes gauge\n"
            "genesis_x_bytes{node=\"a\\\"b\\\\c\\nd\",device=\"0\"} 1024\n"
            "genesis_x_bytes 0.5\n"
            "# HELP genesis_y_total A counter.\n"
            "# TYPE genesis_y_total counter\n"
            "genesis_y_total 3\n");
}

TEST(MetricsWriter, ValuesReadBackExactly) {
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
  EXPECT_EQ(format_metric_value(85899345920.0), "85899345920");
  EXPECT_EQ(std::stod(format_metric_value(0.1)), 0.1);
  EXPECT_EQ(std::stod(format_metric_value(1e300)), 1e300);
}

TEST(MetricsWriter, RejectsWhatPrometheusWould) {
  MetricsWriter w;
  EXPECT_THROW(w.sample({}, 1), InvalidArgumentError);  // no family
  EXPECT_THROW(w.family("9bad", "", MetricType::gauge), InvalidArgumentError);
  EXPECT_THROW(w.family("has-dash", "", MetricType::gauge), InvalidArgumentError);
  EXPECT_THROW(w.family("genesis_count", "", MetricType::counter), InvalidArgumentError);
  w.family("genesis_ok", "", MetricType::gauge);
  EXPECT_THROW(w.family("genesis_ok", "", MetricType::gauge), InvalidArgumentError);
  EXPECT_THROW(w.sample({{"__reserved", "x"}}, 1), InvalidArgumentError);
  EXPECT_THROW(w.sample({{"a:b", "x"}}, 1), InvalidArgumentError);
  w.family("genesis_c_total", "", MetricType::counter);
  EXPECT_THROW(w.sample({}, -1), InvalidArgumentError);
  EXPECT_TRUE(valid_metric_name("genesis:rule_ratio"));
  EXPECT_FALSE(valid_label_name("a:b"));
}

TEST(MemoryMetrics, EveryFamilyOncePerNodeAndDevice) {
  const NodeFigures a = sample_node("host-a", "0", testing::kGiB);
  const NodeFigures b = sample_node("host-b", "1", 3 * testing::kGiB);
  MetricsWriter w;
  write_memory_metrics(w, {&a, &b});
  const std::string text = w.take();
  EXPECT_NE(text.find("genesis_memory_used_bytes{node=\"host-a\",rank=\"0\",world_size=\"2\",device=\"0\"} 1073741824"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("genesis_memory_predicted_oom_seconds{node=\"host-a\",rank=\"0\",world_size=\"2\",device=\"0\"} +Inf"),
            std::string::npos);
  EXPECT_NE(text.find("genesis_memory_predicted_oom_seconds{node=\"host-b\",rank=\"1\",world_size=\"2\",device=\"0\"} 45.5"),
            std::string::npos);
  EXPECT_NE(text.find("genesis_memory_oom_risk{node=\"host-b\",rank=\"1\",world_size=\"2\",device=\"0\",level=\"high\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("genesis_memory_oom_risk_level{node=\"host-b\",rank=\"1\",world_size=\"2\",device=\"0\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("genesis_memory_host_resident_bytes{node=\"host-a\",rank=\"0\",world_size=\"2\"} 1000"),
            std::string::npos);
  EXPECT_NE(text.find("genesis_memory_ooms_total{"), std::string::npos);
}

TEST(MemoryMetrics, IdentityFromTheLaunchersEnvironment) {
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("WORLD_SIZE", "oops", 1);  // not an index: ignored
  const NodeIdentity id = NodeIdentity::from_environment();
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_FALSE(id.node.empty());
  EXPECT_EQ(id.rank, "3");
  EXPECT_EQ(id.local_rank, "1");
  EXPECT_EQ(id.world_size, "");
  const MetricLabels labels = id.labels();
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(labels[1].first, "rank");
}

// promtool (Debian package prometheus) is the reference parser and linter.
TEST(MemoryMetrics, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  MasterState state;
  state.accept(sample_node("host-a", "0", testing::kGiB), 0);
  state.accept(sample_node("host \"b\"\nx", "1", 3 * testing::kGiB), 0);
  state.reject("unauthorized");
  const std::string text = state.metrics_text(1);
  char path[] = "/tmp/genesis_metrics_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  const std::string cmd = std::string("promtool check metrics < ") + path + " > " + path + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(std::string(path) + ".out");
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  std::remove((std::string(path) + ".out").c_str());
  EXPECT_EQ(rc, 0) << out << "\n" << text;
}

}  // namespace
}  // namespace genesis::debug
