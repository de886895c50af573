// Trace corpora (genesis/debug/replay_corpus.h): which files of a folder
// are traces, one trace per name, sidecars with PyTorch's figures, and the
// report's geometric means.
#include "genesis/debug/replay_corpus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "genesis/core/error.h"
#include "trace_test_util.h"

namespace genesis::debug {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

class ReplayCorpus : public testing_support::TempDirTest {};

TEST_F(ReplayCorpus, ListsTracesByNameOnePerNameWithTheirSidecars) {
  const std::string csv = "time_us,action,addr,size,stream\n0,alloc,16,8,0\n";
  write_plain("b.trace.csv", csv);
  write_plain("a.trace.csv.gz", csv);  // the name is what counts, not the content
  write_plain("a.pickle", "x");
  write_plain("a.trace.csv", csv);
  write_plain("c.pickle", "x");
  write_plain("a.json", "{}");
  write_plain("notes.txt", "not a trace");
  write_plain("b.trace.csv.gz.reference.json", "{}");
  std::filesystem::create_directories(path("sub.trace.csv"));  // a folder is never a trace
  const Corpus c = list_corpus(path(""));
  ASSERT_EQ(c.traces.size(), 3u);
  EXPECT_EQ(c.traces[0].name, "a");
  EXPECT_EQ(std::filesystem::path(c.traces[0].path).filename(), "a.trace.csv.gz");
  EXPECT_EQ(std::filesystem::path(c.traces[0].sidecar).filename(), "a.json");
  EXPECT_EQ(c.traces[1].name, "b");
  EXPECT_TRUE(c.traces[1].sidecar.empty());
  EXPECT_EQ(c.traces[2].name, "c");
  EXPECT_EQ(std::filesystem::path(c.traces[2].path).filename(), "c.pickle");
  ASSERT_EQ(c.duplicates.size(), 2u);
  EXPECT_EQ(std::filesystem::path(c.duplicates[0]).filename(), "a.trace.csv");
  EXPECT_EQ(std::filesystem::path(c.duplicates[1]).filename(), "a.pickle");
}

TEST_F(ReplayCorpus, MissingEmptyOrNotAFolderIsAClearError) {
  EXPECT_NE(error_of([&] { list_corpus(path("nope")); }).find("does not exist"), std::string::npos);
  const std::string file = write_plain("x.trace.csv", "");
  EXPECT_NE(error_of([&] { list_corpus(file); }).find("is not a folder"), std::string::npos);
  std::filesystem::create_directories(path("empty"));
  write_plain("empty/readme.md", "#");
  const std::string e = error_of([&] { list_corpus(path("empty")); });
  EXPECT_NE(e.find("holds no traces"), std::string::npos) << e;
  EXPECT_NE(e.find("NAME.trace.csv.gz"), std::string::npos) << e;
}

TEST(ReplayCorpusSidecar, ReadsPyTorchFiguresAndSkipsFailedRuns) {
  const std::vector<TorchPeak> p = parse_trace_sidecar(R"({
    "model": "gpt2", "steps": 4,
    "pytorch": {
      "native": {"peak_reserved_bytes": 1200, "peak_allocated_bytes": 1000},
      "expandable_segments": {"peak_reserved_bytes": 1100, "peak_allocated_bytes": 1000},
      "cudaMallocAsync": {"error": "out of memory"}
    }})",
                                                       "s.json");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].setting, "native");
  EXPECT_EQ(p[0].peak_reserved_bytes, 1200u);
  EXPECT_EQ(p[0].peak_allocated_bytes, 1000u);
  EXPECT_EQ(p[1].setting, "expandable_segments");
  ASSERT_NE(best_torch_peak(p), nullptr);
  EXPECT_EQ(best_torch_peak(p)->setting, "expandable_segments");
  EXPECT_EQ(best_torch_peak({}), nullptr);
  EXPECT_TRUE(parse_trace_sidecar(R"({"model": "x"})", "s.json").empty());
}

TEST(ReplayCorpusSidecar, MalformedSidecarsNameTheFileAndTheRule) {
  auto err = [](const char* text) { return error_of([&] { parse_trace_sidecar(text, "s.json"); }); };
  EXPECT_NE(err("{").find("s.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err("[1]").find("s.json: a trace sidecar is a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"pytorch": 3})").find("\"pytorch\" must be an object"), std::string::npos);
  EXPECT_NE(err(R"({"pytorch": {"native": {"peak_reserved_bytes": -1, "peak_allocated_bytes": 0}}})")
                .find("pytorch.native.peak_reserved_bytes must be an integer >= 0"),
            std::string::npos);
  EXPECT_NE(err(R"({"pytorch": {"native": {"peak_reserved_bytes": 1}}})")
                .find("pytorch.native.peak_allocated_bytes"),
            std::string::npos);
  EXPECT_NE(err(R"({"pytorch": {"native": {"peak_reserved_bytes": 1.5, "peak_allocated_bytes": 1}}})")
                .find("peak_reserved_bytes must be an integer"),
            std::string::npos);
}

TEST(ReplayCorpusReport, GeometricMeansAndPyTorchColumns) {
  EXPECT_DOUBLE_EQ(geometric_mean({}), 0.0);
  EXPECT_NEAR(geometric_mean({1.0, 4.0}), 2.0, 1e-12);
  EXPECT_NEAR(geometric_mean({2.0, 0.0, 8.0}), 4.0, 1e-12);  // missing figures (0) are left out

  auto result = [](const char* config, double ratio, double ns) {
    ReplayResult r;
    r.config = config;
    r.reserved_per_live = ratio;
    r.ns_per_event = ns;
    return r;
  };
  CorpusRow a;
  a.trace.name = "alpha";
  a.events = 10;
  a.peak_live_bytes = 1000;
  a.results = {result("g1", 1.0, 10.0), result("g2", 2.0, 40.0)};
  a.pytorch = {{"native", 1500, 1000}, {"cudaMallocAsync", 1200, 1000}};
  CorpusRow b;
  b.trace.name = "beta";
  b.events = 20;
  b.peak_live_bytes = 2000;
  b.results = {result("g1", 4.0, 1000.0), result("g2", 2.0, 10.0)};
  const std::string text = format_corpus_report({"g1", "g2"}, {a, b}, {"dup.pickle"}, {{"bad.trace.csv", "line 3"}});
  // Columns: configurations, then PyTorch's settings (in order of appearance) and the best.
  EXPECT_NE(text.find("PyTorch native"), std::string::npos) << text;
  EXPECT_NE(text.find("PyTorch cudaMallocAsync"), std::string::npos) << text;
  EXPECT_NE(text.find("PyTorch best"), std::string::npos) << text;
  EXPECT_NE(text.find("1.200 cudaMallocAsync"), std::string::npos) << text;  // 1200 / 1000 live
  // Reserved/live geometric means: g1 sqrt(1*4) = 2, g2 2; ns: g1 sqrt(10*1000) = 100, g2 20.
  const std::size_t first_mean = text.find("geometric mean");
  ASSERT_NE(first_mean, std::string::npos);
  const std::string mean_line = text.substr(first_mean, text.find('\n', first_mean) - first_mean);
  EXPECT_NE(mean_line.find("2.000  2.000"), std::string::npos) << mean_line;
  EXPECT_NE(mean_line.find("1.500"), std::string::npos) << mean_line;  // native: one trace has it
  const std::size_t second_mean = text.find("geometric mean", first_mean + 1);
  ASSERT_NE(second_mean, std::string::npos);
  const std::string ns_line = text.substr(second_mean, text.find('\n', second_mean) - second_mean);
  EXPECT_NE(ns_line.find("100.0"), std::string::npos) << ns_line;
  EXPECT_NE(ns_line.find("20.0"), std::string::npos) << ns_line;
  EXPECT_NE(text.find("dup.pickle"), std::string::npos);
  EXPECT_NE(text.find("bad.trace.csv: line 3"), std::string::npos);
}

}  // namespace
}  // namespace genesis::debug
