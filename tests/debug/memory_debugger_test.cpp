#include "genesis/debug/memory_debugger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <thread>
#include <nlohmann/json.hpp>

#include "debug_test_util.h"
#include "genesis/core/error.h"
#include "genesis/debug/reports.h"

namespace genesis::debug {
namespace {

using nlohmann::json;
using testing::FakeSource;
using testing::kMiB;
using testing::SawtoothJob;

SawtoothJob leaky_job() {
  SawtoothJob job;
  job.leak_per_s = 20.0 * kMiB / 60.0;
  return job;
}

std::vector<SiteStat> leaky_sites(double t) {
  return {{"leaky.py:10 in step\ntrain.py:5 in main", static_cast<std::uint64_t>(leaky_job().leak_per_s * t), 1},
          {"model.py:1 in init", 1000, 1}};
}

TEST(MemoryDebugger, SamplesTheSourceAtItsOwnClockUntilItEnds) {
  const SawtoothJob job = leaky_job();
  FakeSource source([&](double t) { return job.at(t); }, 600, leaky_sites);
  MemoryDebugger debugger(source);  // 0.1 s
  std::atomic<std::uint64_t> seen{0};
  debugger.on_sample([&](const std::string& device, const MemorySample&) {
    EXPECT_EQ(device, "0");
    ++seen;
  });
  debugger.run_for_duration();
  EXPECT_FALSE(debugger.running());
  const SamplerCost cost = debugger.cost();
  EXPECT_EQ(cost.rounds, 6001u);  // 0, 0.1, ..., 600 s
  EXPECT_EQ(seen.load(), cost.rounds);
  EXPECT_NEAR(debugger.elapsed_seconds(), 600, 1e-6);
  // Sampling and analysis at 0.1 s cost far less than 1% of a core.
  EXPECT_LT(cost.percent_of_core(), 1.0);
  EXPECT_GE(cost.thread_cpu_ns, cost.sampling_cpu_ns);

  const LeakReport leak = debugger.leak_detector()->report("0");
  EXPECT_TRUE(leak.leak_detected);
  ASSERT_FALSE(leak.sites.empty());
  EXPECT_EQ(leak.sites.front().frames.front(), "leaky.py:10 in step");
  EXPECT_EQ(debugger.profiler()->history("0").count(), 6001u);

  const json status = json::parse(debugger.status_report());
  for (const char* key : {"timestamp", "source", "sampler", "profile", "oom", "leak", "fragment"}) {
    EXPECT_TRUE(status.contains(key)) << key;
  }
  EXPECT_EQ(status["end_reason"], "script finished");
  EXPECT_TRUE(status["leak"]["devices"]["0"]["leak_detected"].get<bool>());
}

TEST(MemoryDebugger, DurationAndStop) {
  const SawtoothJob job;
  FakeSource endless([&](double t) { return job.at(t); }, 0);
  DebugOptions o;
  o.interval_s = 0.5;
  o.duration_s = 10;
  o.leak = false;
  MemoryDebugger timed(endless, o);
  timed.run_for_duration();
  EXPECT_EQ(timed.cost().rounds, 21u);
  EXPECT_EQ(timed.leak_detector(), nullptr);
  EXPECT_THROW(timed.start(), InvalidArgumentError);

  FakeSource endless2([&](double t) { return job.at(t); }, 0);
  MemoryDebugger forever(endless2);
  forever.start();
  forever.stop_flag() = true;  // what a Ctrl-C handler does
  forever.wait();
  forever.stop();
  EXPECT_GE(forever.cost().rounds, 1u);
}

// A stop that comes while a round samples still gets a round of its own, so
// that the reports end at the stop (with the sites held then), not at a
// sample taken before the program's last changes.
TEST(MemoryDebugger, AStopWhileARoundSamplesEndsWithARoundOfItsOwn) {
  const SawtoothJob job = leaky_job();
  FakeSource endless([&](double t) { return job.at(t); }, 0, leaky_sites);
  MemoryDebugger debugger(endless);
  std::atomic<int> calls{0};
  std::atomic<bool> stopped{false};
  debugger.on_sample([&](const std::string&, const MemorySample&) {
    if (calls.fetch_add(1) == 0)
      while (!stopped.load()) std::this_thread::yield();  // the first round is still running
  });
  debugger.start();
  while (calls.load() == 0) std::this_thread::yield();
  debugger.stop_flag() = true;
  stopped = true;
  debugger.wait();
  debugger.stop();
  EXPECT_EQ(debugger.cost().rounds, 2u);  // the round the stop came in, and a last one
  EXPECT_EQ(calls.load(), 2);
}

TEST(MemoryDebugger, RejectsBadOptions) {
  FakeSource source([](double t) { return SawtoothJob{}.at(t); }, 1);
  DebugOptions o;
  o.interval_s = 0;
  EXPECT_THROW(MemoryDebugger(source, o), InvalidArgumentError);
  o = DebugOptions{};
  o.devices = {"3"};
  EXPECT_THROW(MemoryDebugger(source, o), InvalidArgumentError);
  o = DebugOptions{};
  o.oom_threshold_percent = 0;
  EXPECT_THROW(MemoryDebugger(source, o), InvalidArgumentError);
}

class ReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const SawtoothJob job = leaky_job();
    for (int i = 0; i <= 3000; ++i) {
      const double t = i * 0.1;
      const MemorySample s = job.at(t);
      profiler.add("0", s);
      oom.add("0", s);
      leak.add("0", s);
      frag.add("0", s);
      if (i % 10 == 0) leak.add_sites("0", s.time_ns, leaky_sites(t));
    }
  }
  MemoryProfiler profiler;
  OOMDetector oom;
  LeakDetector leak;
  FragmentationAnalyzer frag;
};

void expect_keys(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) EXPECT_TRUE(j.contains(k)) << "missing \"" << k << "\" in " << j.dump().substr(0, 300);
}

TEST_F(ReportsTest, JsonHasEveryRequiredKey) {
  const json p = json::parse(profile_report_json(profiler, "fake"));
  expect_keys(p, {"timestamp", "source", "devices", "summary"});
  const json& d = p["devices"]["0"];
  expect_keys(d, {"name", "current_memory", "peak_memory", "statistics", "history"});
  expect_keys(d["current_memory"], {"allocated", "free", "total", "utilization", "reserved", "cached"});
  expect_keys(d["statistics"], {"avg_utilization", "max_utilization", "avg_fragmentation", "num_snapshots"});
  ASSERT_EQ(d["history"].size(), 3001u);
  expect_keys(d["history"][0], {"t", "allocated", "reserved", "used"});
  expect_keys(p["summary"], {"total_devices", "total_memory_gb", "overall_utilization", "duration_seconds"});
  EXPECT_EQ(p["summary"]["total_devices"], 1);
  EXPECT_NEAR(p["summary"]["duration_seconds"].get<double>(), 300, 1e-6);
  EXPECT_EQ(json::parse(profile_report_json(profiler, "fake", 100))["devices"]["0"]["history"].size(), 100u);

  const json o = json::parse(oom_report_json(oom));
  expect_keys(o["devices"]["0"], {"risk_assessment", "warnings"});
  expect_keys(o["devices"]["0"]["risk_assessment"],
              {"risk_level", "confidence", "current_usage_percent", "growth_rate_mb_per_sec",
               "predicted_oom_time_seconds", "recommendation", "recommendations"});

  const json l = json::parse(leak_report_json(leak));
  expect_keys(l["devices"]["0"], {"leak_detected", "growth_rate_mb_per_min", "confidence", "sites"});
  ASSERT_FALSE(l["devices"]["0"]["sites"].empty());
  expect_keys(l["devices"]["0"]["sites"][0], {"site", "frames", "growth_bytes", "growth_rate_mb_per_min", "bytes", "count"});

  const json f = json::parse(fragment_report_json(frag));
  expect_keys(f["devices"]["0"], {"samples", "avg_fragmentation", "max_fragmentation"});
  // Percent, not a fraction: 256 MiB + up to 2 GiB cached of ~22 GiB reserved.
  EXPECT_GT(f["devices"]["0"]["avg_fragmentation"].get<double>(), 1.0);
  EXPECT_LT(f["devices"]["0"]["max_fragmentation"].get<double>(), 100.0);
}

TEST_F(ReportsTest, WriteReportFailsLoudly) {
  EXPECT_THROW(write_report("/dev/full", "{}"), InvalidArgumentError);
  try {
    write_report("/nonexistent-dir/report.json", "{}");
    FAIL() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("/nonexistent-dir/report.json"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("No such file"), std::string::npos) << e.message();
  }
  const std::string path = ::testing::TempDir() + "genesis_report_test.json";
  write_report(path, "{\"a\": 1}");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  ASSERT_NE(file, nullptr);
  char buf[16] = {};
  EXPECT_EQ(std::fread(buf, 1, sizeof buf, file), 8u);
  std::fclose(file);
  std::remove(path.c_str());
}

TEST_F(ReportsTest, HtmlIsSelfContained) {
  HtmlReportInput in;
  in.source = "fake <source>";
  in.profiler = &profiler;
  in.fragmentation = &frag;
  in.oom = &oom;
  in.leak = &leak;
  const std::string html = html_report(in);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_NE(html.find("leaky.py:10 in step"), std::string::npos);
  EXPECT_NE(html.find("fake &lt;source&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  const std::string ns = "http://www.w3.org/2000/svg";
  for (std::size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1)) {
    EXPECT_EQ(html.compare(at, ns.size(), ns), 0) << html.substr(at, 60);
  }
}

// The axis labels of the SVG chart, in order: the text of each
// <text ... class="ax" ...> element.
std::vector<std::string> axis_labels(const std::string& html) {
  std::vector<std::string> out;
  for (std::size_t at = html.find("class=\"ax\""); at != std::string::npos; at = html.find("class=\"ax\"", at + 1)) {
    const std::size_t open = html.find('>', at), close = html.find("</text>", at);
    if (open != std::string::npos && close != std::string::npos && open < close)
      out.push_back(html.substr(open + 1, close - open - 1));
  }
  return out;
}

TEST(HtmlReport, ShortSmallJobsGetReadableAxes) {
  // 40 MiB on a 64 MiB device over a fifth of a second: labels in MiB and
  // ms, all different, where GiB and seconds would print "0.00" and "0 s".
  MemoryProfiler profiler;
  for (int i = 0; i <= 20; ++i) {
    MemorySample s;
    s.time_ns = static_cast<std::uint64_t>(i) * 10'000'000;  // 10 ms apart
    s.total = 64ull << 20;
    s.allocated = static_cast<std::uint64_t>(2 * i) << 20;
    s.reserved = s.used = s.allocated + (1ull << 20);
    s.free = s.total - s.used;
    profiler.add("0", s);
  }
  HtmlReportInput in;
  in.source = "short";
  in.profiler = &profiler;
  const std::vector<std::string> labels = axis_labels(html_report(in));
  std::vector<std::string> y, x;
  bool unit_seen = false;
  for (const std::string& l : labels) {
    if (l.size() > 3 && l.compare(l.size() - 3, 3, " ms") == 0) x.push_back(l);
    else if (l == "MiB") unit_seen = true;
    else if (!l.empty() && (std::isdigit(static_cast<unsigned char>(l[0])) != 0)) y.push_back(l);
  }
  EXPECT_TRUE(unit_seen) << ::testing::PrintToString(labels);
  ASSERT_EQ(x.size(), 5u) << ::testing::PrintToString(labels);
  EXPECT_EQ(x.front(), "0 ms");
  for (std::size_t i = 1; i < x.size(); ++i) EXPECT_NE(x[i], x[i - 1]) << ::testing::PrintToString(x);
  ASSERT_EQ(y.size(), 5u) << ::testing::PrintToString(labels);
  for (std::size_t i = 1; i < y.size(); ++i) EXPECT_NE(y[i], y[i - 1]) << ::testing::PrintToString(y);
  EXPECT_EQ(y.front(), "0");  // 64 MiB * 1.05 / 4 per step: whole MiB
}

TEST_F(ReportsTest, SourceNamesThatAreNotUtf8StillGiveReports) {
  // A trace's path is any bytes on Linux, and it names the source in every
  // report: a byte that is not UTF-8 becomes U+FFFD, the report is written.
  const std::string name = "trace bad\xff.csv";
  const json p = json::parse(profile_report_json(profiler, name));
  EXPECT_EQ(p["source"].get<std::string>(), "trace bad\xef\xbf\xbd.csv");
  std::vector<memory::MemoryEvent> events(1);
  events[0] = {2000, 0x100, 1000, 1024, 0, 50, 1, memory::EventAction::kAlloc, false};
  const json t = json::parse(chrome_trace_json(events, name));
  EXPECT_EQ(t["traceEvents"][0]["args"]["name"].get<std::string>(), "trace bad\xef\xbf\xbd.csv");
}

TEST_F(ReportsTest, ChromeTraces) {
  using memory::EventAction;
  std::vector<memory::MemoryEvent> events(5);
  events[0] = {1000, 0, 4 << 20, 0, 0, 0, 1, EventAction::kSegmentAlloc, false};
  events[1] = {2000, 0x100, 1000, 1024, 0, 50, 1, EventAction::kAlloc, false};
  events[2] = {3000, 0x900, 2000, 2048, 0, 50, 1, EventAction::kAlloc, true};
  events[3] = {9000, 0x100, 1000, 1024, 0, 7000, 1, EventAction::kFree, false};
  events[4] = {9500, 0, 1 << 30, 0, 0, 0, 1, EventAction::kOOM, false};
  const json t = json::parse(chrome_trace_json(events));
  ASSERT_TRUE(t.contains("traceEvents"));
  int counters = 0, complete = 0, instants = 0;
  for (const json& e : t["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "C") {
      ++counters;
      expect_keys(e["args"], {"allocated", "reserved"});
    } else if (ph == "X") {
      ++complete;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.0);   // microseconds from the first event
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 7.0);
    } else if (ph == "i") {
      ++instants;
    }
  }
  EXPECT_EQ(counters, 4);
  EXPECT_EQ(complete, 1);
  EXPECT_EQ(instants, 2);  // the OOM and the block still live

  const json s = json::parse(chrome_trace_json(profiler));
  std::size_t samples = 0;
  for (const json& e : s["traceEvents"]) samples += e["ph"] == "C" ? 1 : 0;
  EXPECT_EQ(samples, 3001u);
}

}  // namespace
}  // namespace genesis::debug
