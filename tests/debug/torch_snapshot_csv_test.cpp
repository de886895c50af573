// PyTorch memory snapshots written as CSV traces
// (genesis/debug/torch_snapshot_csv.h): every allocator entry becomes one
// line with its real address, the CSV replays exactly as the snapshot does,
// and input that is not a snapshot is refused by name.
#include "genesis/debug/torch_snapshot_csv.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/debug/torch_snapshot.h"
#include "genesis/debug/trace.h"
#include "pickle_test_util.h"
#include "trace_test_util.h"

namespace genesis::debug {
namespace {

using testing_support::PickleWriter;
using testing_support::write_entry;

constexpr std::int64_t kBase = 0x7f1200000000;
constexpr std::int64_t kSide = 94000000000;  // a side stream's handle

// One device: a segment, allocations on two streams with frames, frees (some
// never), every action PyTorch records, an annotation and an OOM (which
// carries device_free, not addr).
std::string snapshot_bytes(const char* allocator = nullptr) {
  PickleWriter w(4);
  w.empty_dict().mark().key("segments").empty_list().key("device_traces").empty_list().mark();
  w.empty_list().mark();
  write_entry(w, "segment_alloc", kBase, 20 << 20, 0, 1000);
  for (int i = 0; i < 6; ++i) {
    const std::int64_t stream = i % 2 == 0 ? 0 : kSide;
    write_entry(w, "alloc", kBase + i * 4096, 1000 + i, stream, 1001 + i, "/job/train.py", 10 + i, "step");
  }
  for (int i = 0; i < 4; ++i) {
    const std::int64_t stream = i % 2 == 0 ? 0 : kSide;
    write_entry(w, "free_requested", kBase + i * 4096, 1000 + i, stream, 1100 + i);
    write_entry(w, "free_completed", kBase + i * 4096, 1000 + i, stream, 1100 + i);
  }
  write_entry(w, "segment_map", kBase + (20 << 20), 2 << 20, 0, 1200);
  write_entry(w, "segment_unmap", kBase + (20 << 20), 2 << 20, 0, 1201);
  w.empty_dict().mark().key("action").str("annotate").key("addr").integer(0).key("size").integer(0);
  w.key("stream").integer(0).key("time_us").integer(1202).setitems();
  w.empty_dict().mark().key("action").str("oom").key("device_free").integer(12345).key("size").integer(1 << 30);
  w.key("stream").integer(0).key("time_us").integer(1203).setitems();
  write_entry(w, "segment_free", kBase, 20 << 20, 0, 1300);
  w.appends();
  w.appends();
  // Genesis's snapshots name their allocator in allocator_settings.
  if (allocator != nullptr)
    w.key("allocator_settings").empty_dict().mark().key("allocator").str(allocator).setitems();
  w.setitems().stop();
  return w.bytes();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class SnapshotCsv : public testing_support::TempDirTest {};

TEST_F(SnapshotCsv, EveryAllocatorEntryBecomesALineWithItsRealAddress) {
  const std::string in = write_plain("s.pickle", snapshot_bytes());
  const SnapshotCsvResult r = convert_torch_snapshot_file(in, path("s.trace.csv"));
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.entries, 20u);
  EXPECT_EQ(r.annotations, 1u);
  EXPECT_EQ(r.rows, 20u);  // 19 entries and the empty_cache before the run of releases
  const std::vector<std::string> lines = lines_of(read_bytes(path("s.trace.csv")));
  ASSERT_EQ(lines.size(), 21u);  // the header and 20 rows
  EXPECT_EQ(lines[0], "time_us,action,addr,size,stream");
  EXPECT_EQ(lines[1], "1000,segment_alloc," + std::to_string(kBase) + ",20971520,0");
  EXPECT_EQ(lines[3], "1002,alloc," + std::to_string(kBase + 4096) + ",1001," + std::to_string(kSide));
  EXPECT_EQ(lines[8], "1100,free_requested," + std::to_string(kBase) + ",1000,0");
  EXPECT_EQ(lines[9], "1100,free_completed," + std::to_string(kBase) + ",1000,0");
  // The segment_unmap and the segment_free after it (no alloc or free
  // between) are one release of the cache: one empty_cache line before them.
  EXPECT_EQ(lines[17], "1201,empty_cache,0,0,0");
  EXPECT_EQ(lines[18], "1201,segment_unmap," + std::to_string(kBase + (20 << 20)) + ",2097152,0");
  EXPECT_EQ(lines[19], "1203,oom,0,1073741824,0");
  EXPECT_EQ(lines[20], "1300,segment_free," + std::to_string(kBase) + ",20971520,0");
}

// A snapshot Genesis wrote records its own unmaps of free pages; they are
// not the program emptying its cache, so neither reading nor converting it
// adds an empty_cache. Any other allocator's are the program's.
TEST_F(SnapshotCsv, AGenesisSnapshotsUnmapsAreNotTheProgramsReleases) {
  const std::string genesis = write_plain("g.pickle", snapshot_bytes("genesis"));
  const SnapshotCsvResult r = convert_torch_snapshot_file(genesis, path("g.trace.csv"));
  EXPECT_EQ(r.rows, 19u);  // the entries alone
  const std::string text = read_bytes(path("g.trace.csv"));
  EXPECT_EQ(text.find("empty_cache"), std::string::npos) << text;
  EXPECT_NE(text.find("segment_unmap"), std::string::npos);
  const Trace from_pickle = read_trace(genesis);
  EXPECT_EQ(from_pickle.counts.empty_cache, 0u);
  EXPECT_EQ(from_pickle.counts.segment_free, 1u);
  EXPECT_EQ(from_pickle.events.size(), 10u);  // 6 allocations and 4 frees
  const Trace from_csv = read_trace(path("g.trace.csv"));
  EXPECT_EQ(from_csv.events.size(), from_pickle.events.size());
  EXPECT_EQ(from_csv.peak_live_bytes, from_pickle.peak_live_bytes);

  const std::string other = write_plain("o.pickle", snapshot_bytes("native"));
  EXPECT_EQ(read_trace(other).counts.empty_cache, 1u);
  EXPECT_EQ(convert_torch_snapshot_file(other, path("o.trace.csv")).rows, 20u);
}

TEST_F(SnapshotCsv, TheCsvReplaysExactlyAsTheSnapshot) {
  const std::string bytes = snapshot_bytes();
  const std::string in = write_plain("s.pickle", bytes);
  SnapshotCsvOptions with_sites;
  with_sites.sites = true;
  convert_torch_snapshot_file(in, path("s.trace.csv"), with_sites);
  const Trace from_csv = read_trace(path("s.trace.csv"));
  const Trace from_pickle = read_trace(in);
  ASSERT_EQ(from_csv.events.size(), from_pickle.events.size());
  EXPECT_EQ(from_csv.events.size(), 11u);
  EXPECT_EQ(from_csv.events.back().op, TraceOp::kEmptyCache);
  EXPECT_EQ(from_csv.counts.empty_cache, 1u);
  for (std::size_t i = 0; i < from_csv.events.size(); ++i) {
    EXPECT_EQ(from_csv.events[i].op, from_pickle.events[i].op) << i;
    EXPECT_EQ(from_csv.events[i].size, from_pickle.events[i].size) << i;
    EXPECT_EQ(from_csv.events[i].slot, from_pickle.events[i].slot) << i;
    EXPECT_EQ(from_csv.streams.at(from_csv.events[i].stream), from_pickle.streams.at(from_pickle.events[i].stream));
    EXPECT_EQ(from_csv.sites.at(from_csv.event_site.at(i)), from_pickle.sites.at(from_pickle.event_site.at(i)));
  }
  EXPECT_EQ(from_csv.time_us, from_pickle.time_us);
  EXPECT_EQ(from_csv.peak_live_bytes, from_pickle.peak_live_bytes);
  EXPECT_EQ(from_csv.peak_live_bytes, 1000u + 1001 + 1002 + 1003 + 1004 + 1005);
  EXPECT_EQ(from_csv.counts.live_at_end, 2u);
  EXPECT_EQ(from_csv.counts.free_completed, 4u);
  EXPECT_EQ(from_csv.counts.segment_alloc, 1u);
  EXPECT_EQ(from_csv.counts.segment_free, 1u);
  EXPECT_EQ(from_csv.counts.oom, 1u);
  EXPECT_EQ(from_csv.counts.other_ignored, 2u);  // segment_map, segment_unmap
  EXPECT_EQ(from_csv.sites.at(from_csv.event_site.at(2)), "/job/train.py:12 in step");
}

TEST_F(SnapshotCsv, GzipWhenTheNameSaysSo) {
  if (!trace_gzip_supported()) GTEST_SKIP() << "Genesis built without zlib";
  const std::string in = write_plain("s.pickle", snapshot_bytes());
  convert_torch_snapshot_file(in, path("s.trace.csv.gz"));
  const std::string raw = read_bytes(path("s.trace.csv.gz"));
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8b);
  EXPECT_EQ(read_trace(path("s.trace.csv.gz")).events.size(), read_trace(in).events.size());
}

TEST_F(SnapshotCsv, InputThatIsNotASnapshotIsRefusedByName) {
  auto error_of = [&](const std::string& in) -> std::string {
    try {
      convert_torch_snapshot_file(in, path("out.csv"));
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "";
  };
  const std::string csv = write_plain("t.trace.csv", "time_us,action,addr,size,stream\n0,alloc,16,8,0\n");
  EXPECT_NE(error_of(csv).find("t.trace.csv: not a PyTorch memory snapshot"), std::string::npos) << error_of(csv);
  EXPECT_NE(error_of(csv).find("a CSV trace needs no conversion"), std::string::npos);
  EXPECT_NE(error_of(path("missing.pickle")).find("cannot open snapshot"), std::string::npos);
  const std::string truncated = snapshot_bytes().substr(0, 60);
  EXPECT_NE(error_of(write_plain("cut.pickle", truncated)).find("cut.pickle: pickle: "), std::string::npos)
      << error_of(path("cut.pickle"));
  // The same entries the snapshot reader refuses.
  PickleWriter w(2);
  w.empty_dict().mark().key("device_traces").empty_list().mark().empty_list().mark();
  w.empty_dict().mark().key("action").str("alloc").key("size").integer(4).setitems();
  w.appends().appends().setitems().stop();
  EXPECT_NE(error_of(write_plain("noaddr.pickle", w.bytes())).find("device_traces[0][0]: no 'addr'"),
            std::string::npos);
}

// A snapshot pickled with protocol 0 or 1 (text opcodes, no PROTO) converts
// to the same lines as with protocol 5.
TEST_F(SnapshotCsv, ProtocolsZeroAndOneConvertLikeProtocolFive) {
  convert_torch_snapshot_file(write_plain("s5.pickle", testing_support::python5_snapshot_pickle()), path("s5.csv"));
  const std::string want = read_bytes(path("s5.csv"));
  EXPECT_EQ(lines_of(want).size(), 4u);  // the header, the alloc and its two frees
  convert_torch_snapshot_file(write_plain("s0.pickle", testing_support::python0_snapshot_pickle()), path("s0.csv"));
  EXPECT_EQ(read_bytes(path("s0.csv")), want);
  convert_torch_snapshot_file(write_plain("s1.pickle", testing_support::python1_snapshot_pickle()), path("s1.csv"));
  EXPECT_EQ(read_bytes(path("s1.csv")), want);
}

}  // namespace
}  // namespace genesis::debug
