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
  const TraceSidecar sc = parse_trace_sidecar(R"({
    "model": "gpt2", "steps": 4,
    "pytorch": {
      "native": {"peak_reserved_bytes": 1200, "peak_allocated_bytes": 1000},
      "expandable_segments": {"peak_reserved_bytes": 1100, "peak_allocated_bytes": 1000},
      "cudaMallocAsync": {"error": "out of memory"}
    }})",
                                              "s.json");
  const std::vector<TorchPeak>& p = sc.pytorch;
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].setting, "native");
  EXPECT_EQ(p[0].peak_reserved_bytes, 1200u);
  EXPECT_EQ(p[0].peak_allocated_bytes, 1000u);
  EXPECT_EQ(p[1].setting, "expandable_segments");
  ASSERT_NE(best_torch_peak(p), nullptr);
  EXPECT_EQ(best_torch_peak(p)->setting, "expandable_segments");
  EXPECT_EQ(best_torch_peak({}), nullptr);
  EXPECT_FALSE(sc.genesis_torch.has_value());
  const TraceSidecar none = parse_trace_sidecar(R"({"model": "x"})", "s.json");
  EXPECT_TRUE(none.pytorch.empty());
  EXPECT_FALSE(none.genesis_torch.has_value());
}

// A live run under Genesis is read apart from PyTorch's settings: it never
// becomes PyTorch's best, however little it reserved.
TEST(ReplayCorpusSidecar, GenesisUnderPyTorchIsKeptApart) {
  const TraceSidecar sc = parse_trace_sidecar(R"({
    "pytorch": {"native": {"peak_reserved_bytes": 1200, "peak_allocated_bytes": 1000}},
    "genesis_torch": {"peak_reserved_bytes": 1010, "peak_allocated_bytes": 1001, "seconds": 3.5}})",
                                              "s.json");
  ASSERT_EQ(sc.pytorch.size(), 1u);
  EXPECT_EQ(best_torch_peak(sc.pytorch)->setting, "native");
  ASSERT_TRUE(sc.genesis_torch.has_value());
  EXPECT_EQ(sc.genesis_torch->setting, "genesis");
  EXPECT_EQ(sc.genesis_torch->peak_reserved_bytes, 1010u);
  EXPECT_EQ(sc.genesis_torch->peak_allocated_bytes, 1001u);
  EXPECT_FALSE(parse_trace_sidecar(R"({"genesis_torch": {"error": "no GPU"}})", "s.json").genesis_torch.has_value());
  const std::string e = error_of([] { parse_trace_sidecar(R"({"genesis_torch": {"peak_reserved_bytes": 5}})", "s.json"); });
  EXPECT_NE(e.find("s.json: genesis_torch has no peak_allocated_bytes"), std::string::npos) << e;
  EXPECT_NE(error_of([] { parse_trace_sidecar(R"({"genesis_torch": [1]})", "s.json"); })
                .find("genesis_torch must be an object"),
            std::string::npos);
}

TEST(ReplayCorpusSidecar, MalformedSidecarsNameTheFileAndTheRule) {
  auto err = [](const char* text) { return error_of([&] { parse_trace_sidecar(text, "s.json"); }); };
  EXPECT_NE(err("{").find("s.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err("[1]").find("s.json: a trace sidecar is a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"pytorch": 3})").find("\"pytorch\" must be an object"), std::string::npos);
  EXPECT_NE(err(R"({"pytorch": {"native": {"peak_reserved_bytes": -1, "peak_allocated_bytes": 0}}})")
                .find("pytorch.native.peak_reserved_bytes must be an integer >= 0, not -1"),
            std::string::npos);
  EXPECT_NE(err(R"({"pytorch": {"native": {"peak_reserved_bytes": 1}}})")
                .find("pytorch.native has no peak_allocated_bytes"),
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
  EXPECT_EQ(text.find("Genesis under PyTorch"), std::string::npos) << "no sidecar has a live Genesis run";
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

// The live run under Genesis is a column of its own, between the replayed
// configurations and PyTorch's settings, with its own geometric mean; a
// trace without one shows "-" there.
TEST(ReplayCorpusReport, GenesisUnderPyTorchColumn) {
  ReplayResult r;
  r.config = "g1";
  r.reserved_per_live = 1.01;
  r.ns_per_event = 10.0;
  CorpusRow a;
  a.trace.name = "alpha";
  a.peak_live_bytes = 1000;
  a.results = {r};
  a.pytorch = {{"native", 1500, 1000}};
  a.genesis_torch = TorchPeak{"genesis", 1016, 1001};
  CorpusRow b = a;
  b.trace.name = "beta";
  b.genesis_torch.reset();
  const std::string text = format_corpus_report({"g1"}, {a, b}, {}, {});
  const std::size_t head = text.find("Genesis under PyTorch");
  ASSERT_NE(head, std::string::npos) << text;
  EXPECT_LT(head, text.find("PyTorch native")) << text;
  EXPECT_NE(text.find("a live run of the workload with Genesis as PyTorch's allocator"), std::string::npos) << text;
  const std::size_t alpha = text.find("alpha");
  const std::string alpha_line = text.substr(alpha, text.find('\n', alpha) - alpha);
  EXPECT_NE(alpha_line.find("1.016"), std::string::npos) << alpha_line;
  const std::size_t beta = text.find("beta");
  const std::string beta_line = text.substr(beta, text.find('\n', beta) - beta);
  EXPECT_EQ(beta_line.find("1.016"), std::string::npos) << beta_line;
  EXPECT_NE(beta_line.find(" - "), std::string::npos) << beta_line;
  const std::size_t mean = text.find("geometric mean");
  const std::string mean_line = text.substr(mean, text.find('\n', mean) - mean);
  // One trace of two has it: the mean says over how many it was taken.
  EXPECT_NE(mean_line.find("1.016 (1 of 2)"), std::string::npos) << mean_line;
  EXPECT_NE(mean_line.find("1.010 "), std::string::npos) << mean_line;  // g1: both traces, no count
  EXPECT_EQ(mean_line.find("1.010 ("), std::string::npos) << mean_line;
}

}  // namespace
}  // namespace genesis::debug
