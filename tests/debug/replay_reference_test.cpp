// Reference figures of a trace (Note [Reference figures]): read from
// `<trace>.reference.json` next to the trace whatever the trace is called,
// absent without that file whatever the trace is called (a file merely named
// gpt2_train gets none), and a malformed file is an error that names the file
// and what was wrong.
#include "genesis/debug/replay_reference.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "debug/trace_test_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {
namespace {

using testing_support::TempDirTest;

constexpr const char* kGood = R"({
  "label": "measured elsewhere",
  "source": "ignored: a note on how the figures were taken",
  "results": [
    {"allocator": "A", "peak_reserved_bytes": 16521363456, "reserved_per_live": 1.146, "ns_per_event": 1099},
    {"allocator": "B", "peak_reserved_bytes": 0, "reserved_per_live": 1}
  ]
})";

class ReplayReferenceTest : public TempDirTest {};

using testing_support::error_of;

TEST_F(ReplayReferenceTest, PathIsTheTracePathPlusSuffix) {
  EXPECT_EQ(reference_path_for("data/traces/x.trace.csv.gz"), "data/traces/x.trace.csv.gz.reference.json");
  EXPECT_EQ(reference_path_for("t.csv"), "t.csv.reference.json");
}

TEST_F(ReplayReferenceTest, ParsesEveryField) {
  const ReferenceFigures f = parse_reference_figures(kGood, "ref.json");
  EXPECT_EQ(f.label, "measured elsewhere");
  ASSERT_EQ(f.results.size(), 2u);
  EXPECT_EQ(f.results[0].allocator, "A");
  EXPECT_EQ(f.results[0].peak_reserved_bytes, 16'521'363'456ull);
  EXPECT_DOUBLE_EQ(f.results[0].reserved_per_live, 1.146);
  EXPECT_DOUBLE_EQ(f.results[0].ns_per_event, 1099);
  EXPECT_EQ(f.results[1].allocator, "B");
  EXPECT_EQ(f.results[1].peak_reserved_bytes, 0u);
  EXPECT_DOUBLE_EQ(f.results[1].reserved_per_live, 1.0);
  EXPECT_DOUBLE_EQ(f.results[1].ns_per_event, 0);  // not measured
}

TEST_F(ReplayReferenceTest, LabelDefaultsWhenMissing) {
  const ReferenceFigures f =
      parse_reference_figures(R"({"results": [{"allocator": "A", "peak_reserved_bytes": 1, "reserved_per_live": 2}]})",
                              "ref.json");
  EXPECT_EQ(f.label, kDefaultReferenceLabel);
}

TEST_F(ReplayReferenceTest, AnyTraceNameCarriesItsFile) {
  const std::string trace = write_plain("my_job.csv", "time_us,action,addr,size,stream\n");
  write_plain("my_job.csv.reference.json", kGood);
  const auto f = load_reference_figures(trace);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->label, "measured elsewhere");
  EXPECT_EQ(f->results.size(), 2u);
}

TEST_F(ReplayReferenceTest, NoFileNoFiguresWhateverTheName) {
  // A trace named like the bundled one but without a reference file of its own.
  const std::string trace = write_plain("gpt2_train.trace.csv", "time_us,action,addr,size,stream\n");
  EXPECT_FALSE(load_reference_figures(trace).has_value());
  // A reference file elsewhere in the folder is not this trace's.
  write_plain("gpt2_train.reference.json", kGood);
  write_plain("references.json", kGood);
  EXPECT_FALSE(load_reference_figures(trace).has_value());
  EXPECT_FALSE(load_reference_figures("-").has_value());
  EXPECT_FALSE(load_reference_figures(path("missing_dir/t.csv")).has_value());
}

TEST_F(ReplayReferenceTest, BundledTraceCarriesPyTorchFigures) {
  const std::string trace = testing_support::bundled_trace("gpt2_train.trace.csv.gz");
  if (trace.empty()) GTEST_SKIP() << "data/traces/gpt2_train.trace.csv.gz is not in this tree";
  const auto f = load_reference_figures(trace);
  ASSERT_TRUE(f.has_value());
  ASSERT_EQ(f->results.size(), 3u);
  EXPECT_EQ(f->results[0].allocator, "PyTorch native");
  EXPECT_EQ(f->results[0].peak_reserved_bytes, 16'521'363'456ull);
  EXPECT_DOUBLE_EQ(f->results[0].reserved_per_live, 1.146);
}

TEST_F(ReplayReferenceTest, MalformedFilesAreClearErrors) {
  struct Case {
    const char* text;
    const char* expected;  // part of the message
  };
  const Case cases[] = {
      {"", "is not valid JSON"},
      {"{\"results\": [", "is not valid JSON"},
      {"[1, 2]", "holds an array; expected an object"},
      {"{}", "has no \"results\""},
      {"{\"results\": []}", "\"results\" is an empty array"},
      {"{\"results\": {\"allocator\": \"A\"}}", "\"results\" is an object (expected a non-empty array)"},
      {"{\"results\": [3]}", "results[0] is a number"},
      {"{\"label\": 7, \"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": 1, \"reserved_per_live\": 1}]}",
       "\"label\" is a number (expected a string)"},
      {"{\"results\": [{\"peak_reserved_bytes\": 1, \"reserved_per_live\": 1}]}", "results[0] needs \"allocator\""},
      {"{\"results\": [{\"allocator\": \"\", \"peak_reserved_bytes\": 1, \"reserved_per_live\": 1}]}",
       "results[0] needs \"allocator\""},
      {"{\"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": -1, \"reserved_per_live\": 1}]}",
       "needs \"peak_reserved_bytes\", an integer >= 0"},
      {"{\"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": 1.5, \"reserved_per_live\": 1}]}",
       "needs \"peak_reserved_bytes\", an integer >= 0"},
      {"{\"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": 1}]}", "has no \"reserved_per_live\""},
      {"{\"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": 1, \"reserved_per_live\": \"1.1\"}]}",
       "reserved_per_live is a string (expected a number >= 0)"},
      {"{\"results\": [{\"allocator\": \"A\", \"peak_reserved_bytes\": 1, \"reserved_per_live\": 1, "
       "\"ns_per_event\": -3}]}",
       "ns_per_event is -3 (expected a number >= 0)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string trace = write_plain("t.csv", "time_us,action,addr,size,stream\n");
    write_plain("t.csv.reference.json", c.text);
    const std::string msg = error_of([&] { load_reference_figures(trace); });
    EXPECT_NE(msg.find("reference file '" + trace + ".reference.json'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

TEST_F(ReplayReferenceTest, ADirectoryInPlaceOfTheFileIsAnError) {
  const std::string trace = write_plain("t.csv", "time_us,action,addr,size,stream\n");
  std::filesystem::create_directories(trace + ".reference.json");
  const std::string msg = error_of([&] { load_reference_figures(trace); });
  EXPECT_NE(msg.find("is not a regular file"), std::string::npos) << msg;
}

}  // namespace
}  // namespace genesis::debug
