// Trace files: the CSV reader (plain and gzip, header variants, every
// malformed-line error with its line number, truncated gzip), the address
// resolution into slots, and write_trace.
#include "genesis/debug/trace.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "debug/trace_test_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {
namespace {

using testing_support::bundled_trace;

class TraceReadTest : public testing_support::TempDirTest {};

constexpr const char* kSmall =
    "time_us,action,addr,size,stream\n"
    "10,segment_alloc,4096,2097152,0\n"
    "11,alloc,4096,1000,0\n"
    "12,alloc,8192,3000,0\n"
    "13,free_requested,4096,1000,0\n"
    "14,free_completed,4096,1000,0\n"
    "15,alloc,12288,500,0\n"
    "16,free_requested,8192,3000,0\n"
    "17,oom,0,99999999,0\n"
    "18,segment_free,4096,2097152,0\n";

// Checks what kSmall holds, however it was written.
void expect_small(const Trace& t) {
  EXPECT_EQ(t.counts.lines, 9u);
  EXPECT_EQ(t.counts.alloc, 3u);
  EXPECT_EQ(t.counts.free_requested, 2u);
  EXPECT_EQ(t.counts.free_completed, 1u);
  EXPECT_EQ(t.counts.segment_alloc, 1u);
  EXPECT_EQ(t.counts.segment_free, 1u);
  EXPECT_EQ(t.counts.oom, 1u);
  EXPECT_EQ(t.counts.unknown_frees, 0u);
  EXPECT_EQ(t.counts.live_at_end, 1u);
  EXPECT_EQ(t.peak_live_bytes, 4000u);
  ASSERT_EQ(t.events.size(), 5u);
  // alloc 4096 -> slot 1, alloc 8192 -> slot 2, free slot 1, alloc 12288
  // reuses slot 1, free slot 2.
  const std::vector<TraceEvent> want = {
      {1000, 1, 0, TraceOp::kAlloc}, {3000, 2, 0, TraceOp::kAlloc}, {1000, 1, 0, TraceOp::kFree},
      {500, 1, 0, TraceOp::kAlloc},  {3000, 2, 0, TraceOp::kFree},
  };
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(t.events[i].size, want[i].size);
    EXPECT_EQ(t.events[i].slot, want[i].slot);
    EXPECT_EQ(t.events[i].stream, want[i].stream);
    EXPECT_EQ(t.events[i].op, want[i].op);
  }
  EXPECT_EQ(t.num_slots, 3u);
  EXPECT_EQ(t.live_at_end_slots, std::vector<std::uint32_t>{1});
  EXPECT_EQ(t.streams, std::vector<StreamId>{0});
}

TEST_F(TraceReadTest, ReadsPlainCsv) { expect_small(read_trace(write_plain("t.csv", kSmall))); }

TEST_F(TraceReadTest, ReadsGzipDetectedByMagicNotName) {
  if (!trace_gzip_supported() || !GENESIS_TEST_HAVE_ZLIB) GTEST_SKIP() << "built without zlib";
  const Trace t = read_trace(write_gzip("t.csv.gz", kSmall));
  expect_small(t);
  // The name does not matter: a gzip named .csv and a plain file named .gz.
  expect_small(read_trace(write_gzip("really_gzip.csv", kSmall)));
  expect_small(read_trace(write_plain("really_plain.gz", kSmall)));
}

TEST_F(TraceReadTest, HeaderVariants) {
  // No header: the canonical column order.
  {
    std::string body(kSmall);
    body.erase(0, body.find('\n') + 1);
    expect_small(read_trace(write_plain("noheader.csv", body)));
  }
  // BOM, CRLF, spaces, upper case, reordered and extra columns, comments and
  // blank lines, hex addresses.
  {
    const std::string text =
        "\xEF\xBB\xBF# recorded by hand\r\n"
        " Stream , SIZE , extra , Action , Address , time_us \r\n"
        "\r\n"
        "0, 2097152, x, segment_alloc, 0x1000, 10\r\n"
        "0, 1000, x, alloc, 0x1000, 11\r\n"
        "0, 3000, x, alloc, 0x2000, 12\r\n"
        "# a comment\r\n"
        "0, 1000, x, free_requested, 0x1000, 13\r\n"
        "0, 1000, x, free_completed, 0x1000, 14\r\n"
        "0, 500, x, alloc, 12288, 15\r\n"
        "0, 3000, x, free_requested, 8192, 16\r\n"
        "0, 99999999, x, oom, 0, 17\r\n"
        "0, 2097152, x, segment_free, 4096, 18";  // no final newline
    expect_small(read_trace(write_plain("variants.csv", text)));
  }
  // Only the columns a replay needs.
  {
    const Trace t = read_trace(write_plain("min.csv", "action,addr,size\nalloc,1,10\nalloc,2,20\nfree_requested,1,10\n"));
    EXPECT_EQ(t.events.size(), 3u);
    EXPECT_EQ(t.peak_live_bytes, 30u);
    EXPECT_EQ(t.streams, std::vector<StreamId>{0});
  }
}

TEST_F(TraceReadTest, StreamsBecomeDenseIndices) {
  const Trace t = read_trace(write_plain(
      "streams.csv", "time_us,action,addr,size,stream\n1,alloc,1,10,7\n2,alloc,2,10,0\n3,alloc,3,10,0x7\n"));
  EXPECT_EQ(t.streams, (std::vector<StreamId>{7, 0}));
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_EQ(t.events[0].stream, 0);
  EXPECT_EQ(t.events[1].stream, 1);
  EXPECT_EQ(t.events[2].stream, 0);
}

struct BadLine {
  std::string content;
  int line;
  std::string what;
};

// A trace written by hand or by another tool may call a release "free", or
// record only free_completed: both free the block, and the replay sees the
// same events as from PyTorch's free_requested lines.
TEST_F(TraceReadTest, FreeAndLoneFreeCompletedReleaseBlocks) {
  const std::string header = "time_us,action,addr,size,stream\n";
  const std::string body = "1,alloc,4096,1000,0\n2,alloc,8192,3000,0\n3,X,4096,1000,0\n4,alloc,12288,500,0\n";
  for (const std::string action : {"free", "free_completed", "free_requested"}) {
    SCOPED_TRACE(action);
    std::string text = header + body;
    text.replace(text.find(",X,"), 3, "," + action + ",");
    const Trace t = read_trace(write_plain(action + ".csv", text));
    ASSERT_EQ(t.events.size(), 4u);
    EXPECT_EQ(t.events[2].op, TraceOp::kFree);
    EXPECT_EQ(t.events[2].slot, t.events[0].slot);
    EXPECT_EQ(t.events[3].slot, t.events[0].slot);  // the freed slot is reused
    EXPECT_EQ(t.peak_live_bytes, 4000u);
    EXPECT_EQ(t.counts.live_at_end, 2u);
    EXPECT_EQ(t.counts.unknown_frees, 0u);
    EXPECT_EQ(t.counts.completed_frees, action == "free_completed" ? 1u : 0u);
    EXPECT_EQ(t.counts.free_requested, action == "free_completed" ? 0u : 1u);
  }
}

// PyTorch writes free_requested and later free_completed for one block: it
// is freed once; the free_completed lines find no live block at the address
// and change nothing (nor count as unknown frees).
TEST_F(TraceReadTest, FreeCompletedAfterFreeRequestedFreesNothingMore) {
  const Trace t = read_trace(write_plain("both.csv",
                                         "time_us,action,addr,size,stream\n"
                                         "1,alloc,4096,1000,0\n"
                                         "2,free_requested,4096,1000,0\n"
                                         "3,free_completed,4096,1000,0\n"
                                         "4,free_completed,4096,1000,0\n"));
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.counts.completed_frees, 0u);
  EXPECT_EQ(t.counts.free_completed, 2u);
  EXPECT_EQ(t.counts.unknown_frees, 0u);
}

TEST_F(TraceReadTest, MalformedLinesNameFileLineAndProblem) {
  const std::string header = "time_us,action,addr,size,stream\n";
  const std::string ok = "1,alloc,4096,100,0\n";
  const std::vector<BadLine> cases = {
      {header + ok + "2,alloc,8192\n", 3, "missing column"},
      {header + ok + ok.substr(0, 2) + "alloc,0x10000,abc,0\n", 3, "column 'size' is not a number: 'abc'"},
      {header + "1,alloc,12x,100,0\n", 2, "column 'addr' is not a number"},
      {header + ok + "# c\n\n" + "5,alloc,8192,-5,0\n", 5, "negative size -5"},
      {header + "1,malloc,4096,100,0\n", 2, "unknown action 'malloc'"},
      {header + "soon,alloc,4096,100,0\n", 2, "column 'time_us' is not a number"},
      {header + "99999999999999999999999,alloc,4096,100,0\n", 2, "column 'time_us' is out of range"},
      {header + "1,alloc,4096,,0\n", 2, "column 'size' is empty"},
      {header + "1,alloc,4096,100,-1\n", 2, "column 'stream' is negative"},
      {header + "1,alloc,4096,99999999999999999999999,0\n", 2, "out of range"},
      {"time_us,action,addr,stream\n" + ok, 1, "no 'size' column"},
      {"ok,1,2\n", 1, "no 'action' column"},
      {ok + "2,alloc,8192,1\n", 2, "missing column"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const BadLine& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.content);
    const std::string p = write_plain("bad" + std::to_string(i) + ".csv", c.content);
    try {
      (void)read_trace(p);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgumentError& e) {
      const std::string msg = e.message();
      EXPECT_NE(msg.find(p + ":" + std::to_string(c.line) + ": "), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
    }
  }
}

TEST_F(TraceReadTest, MalformedLineInGzipHasItsLineNumber) {
  if (!trace_gzip_supported() || !GENESIS_TEST_HAVE_ZLIB) GTEST_SKIP() << "built without zlib";
  std::string text = "time_us,action,addr,size,stream\n";
  for (int i = 0; i < 50000; ++i) text += std::to_string(i) + ",alloc," + std::to_string(4096 * (i + 1)) + ",512,0\n";
  text += "9,alloc,1,oops,0\n";  // line 50002: past the first 1 MiB chunk
  const std::string p = write_gzip("bad.csv.gz", text);
  try {
    (void)read_trace(p);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find(p + ":50002: column 'size' is not a number"), std::string::npos) << e.message();
  }
}

// A gzip file cut short (a download that stopped, a disk that filled up)
// must be an error, not a shorter trace, and never a crash or a hang.
TEST_F(TraceReadTest, TruncatedOrCorruptGzipIsAnError) {
  if (!trace_gzip_supported() || !GENESIS_TEST_HAVE_ZLIB) GTEST_SKIP() << "built without zlib";
  std::string text = "time_us,action,addr,size,stream\n";
  std::uint64_t x = 12345;
  for (int i = 0; i < 40000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;  // poorly compressible
    text += std::to_string(i) + ",alloc," + std::to_string(x >> 20) + "," + std::to_string(x % 100000) + ",0\n";
  }
  const std::string full = read_bytes(write_gzip("full.csv.gz", text));
  ASSERT_GT(full.size(), 100u * 1024);
  EXPECT_EQ(read_trace(path("full.csv.gz")).events.size(), 40000u);

  for (const std::size_t cut : {full.size() / 2, full.size() - 4, full.size() - 8, std::size_t{20}}) {
    SCOPED_TRACE("kept " + std::to_string(cut) + " of " + std::to_string(full.size()) + " bytes");
    const std::string p = write_plain("cut.csv.gz", full.substr(0, cut));
    try {
      (void)read_trace(p);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find(p), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("truncated"), std::string::npos) << e.message();
    }
  }
  std::string corrupt = full;
  for (std::size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 64; ++i) corrupt[i] = static_cast<char>(~corrupt[i]);
  const std::string p = write_plain("corrupt.csv.gz", corrupt);
  try {
    (void)read_trace(p);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    // zlib may decode some garbage before it notices (then a line is
    // malformed) or fail the check sum: either way a message naming the file.
    EXPECT_NE(e.message().find(p), std::string::npos) << e.message();
  }
}

TEST_F(TraceReadTest, MissingFileIsAnError) {
  try {
    (void)read_trace(path("nope.csv"));
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    // A FileError, so that Python raises FileNotFoundError for it.
    EXPECT_EQ(e.error_number(), ENOENT);
    EXPECT_EQ(e.path(), path("nope.csv"));
    EXPECT_NE(e.message().find("cannot open trace"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("nope.csv': No such file or directory"), std::string::npos) << e.message();
  }
}

TEST_F(TraceReadTest, AFileNamedLikeASnapshotThatIsNoPickleSaysSo) {
  for (const char* name : {"np.pickle", "np.pkl", "np.pickle.gz"}) {
    try {
      (void)read_trace(write_plain(name, "notapickle\n"));
      ADD_FAILURE() << name << ": no error";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find("not a PyTorch memory snapshot"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("starts with 'notapickle'"), std::string::npos) << e.message();
    }
  }
  // Any other name is read as CSV, whatever it is called.
  EXPECT_EQ(read_trace(write_plain("trace.data", "time_us,action,addr,size,stream\n1,alloc,1,10,0\n")).events.size(),
            1u);
}

TEST_F(TraceReadTest, EmptyFileIsAnEmptyTrace) {
  const Trace t = read_trace(write_plain("empty.csv", ""));
  EXPECT_TRUE(t.events.empty());
  EXPECT_EQ(t.counts.lines, 0u);
}

TEST(TraceBuilderTest, UnknownFreeIsCountedAndKeptAsNoOp) {
  TraceBuilder b("test");
  b.free(0x5000);
  b.alloc(0x1000, 64);
  b.free(0x1000);
  b.free(0x1000);  // double free in the trace: unknown by then
  const Trace t = b.finish();
  EXPECT_EQ(t.counts.unknown_frees, 2u);
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[0].op, TraceOp::kFree);
  EXPECT_EQ(t.events[0].slot, kNullSlot);
  EXPECT_EQ(t.events[3].slot, kNullSlot);
  EXPECT_EQ(t.events[2].slot, t.events[1].slot);
  EXPECT_NE(t.events[1].slot, kNullSlot);
  EXPECT_EQ(t.counts.live_at_end, 0u);
}

TEST(TraceBuilderTest, AllocAtLiveAddressLeaksTheEarlierOne) {
  TraceBuilder b("test");
  b.alloc(0x1000, 100);
  b.alloc(0x1000, 200);  // the trace lost a free
  b.free(0x1000);        // frees the second
  const Trace t = b.finish();
  EXPECT_EQ(t.counts.realloc_of_live, 1u);
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_NE(t.events[0].slot, t.events[1].slot);
  EXPECT_EQ(t.events[2].slot, t.events[1].slot);
  EXPECT_EQ(t.events[2].size, 200u);
  EXPECT_EQ(t.counts.live_at_end, 1u);
  EXPECT_EQ(t.live_at_end_slots, std::vector<std::uint32_t>{t.events[0].slot});
  EXPECT_EQ(t.peak_live_bytes, 300u);
}

TEST(TraceBuilderTest, SlotTableIsAsSmallAsPeakLiveCount) {
  TraceBuilder b("test");
  for (int round = 0; round < 100; ++round) {
    for (std::uintptr_t a = 1; a <= 5; ++a) b.alloc(a * 4096 + static_cast<std::uintptr_t>(round) * 65536, 10);
    for (std::uintptr_t a = 1; a <= 5; ++a) b.free(a * 4096 + static_cast<std::uintptr_t>(round) * 65536);
  }
  const Trace t = b.finish();
  EXPECT_EQ(t.num_slots, 6u);  // 5 live at most + the null slot
  EXPECT_EQ(t.peak_live_bytes, 50u);
}

class TraceWriteTest : public testing_support::TempDirTest {};

TEST_F(TraceWriteTest, WritesAllocatorHistoryFormat) {
  using memory::EventAction;
  std::vector<memory::MemoryEvent> ev(5);
  ev[0] = {1'000'000, 0x200000, 2 << 20, 2 << 20, 0, 0, 1, EventAction::kSegmentAlloc, false};
  ev[1] = {1'001'999, 0x200000, 1000, 1024, 0, 0, 1, EventAction::kAlloc, false};
  ev[2] = {1'003'000, 0x200000, 1000, 1024, 0, 0, 1, EventAction::kFree, false};
  ev[3] = {1'004'000, 0, 1ull << 40, 1ull << 40, 0, 0, 1, EventAction::kOOM, false};
  ev[4] = {1'005'000, 0x200000, 2 << 20, 2 << 20, 0, 0, 1, EventAction::kSegmentFree, false};
  const std::string p = path("h.csv");
  write_trace(p, ev);
  EXPECT_EQ(read_bytes(p),
            "time_us,action,addr,size,stream\n"
            "1000,segment_alloc,2097152,2097152,0\n"
            "1001,alloc,2097152,1000,0\n"
            "1003,free_requested,2097152,1000,0\n"
            "1004,oom,0,1099511627776,0\n"
            "1005,segment_free,2097152,2097152,0\n");
  const Trace t = read_trace(p);
  EXPECT_EQ(t.counts.alloc, 1u);
  EXPECT_EQ(t.counts.segment_alloc, 1u);
  EXPECT_EQ(t.counts.oom, 1u);
  EXPECT_EQ(t.peak_live_bytes, 1000u);

  if (trace_gzip_supported()) {
    const std::string gz = path("h.csv.gz");
    write_trace(gz, ev);
    const std::string bytes = read_bytes(gz);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
    EXPECT_EQ(read_trace(gz).events.size(), t.events.size());
  }
}

TEST_F(TraceWriteTest, UnwritablePathIsAnError) {
  EXPECT_THROW(write_trace(path("no/such/dir/h.csv"), {}), InvalidArgumentError);
}

// The bundled PyTorch trace: its documented peak live bytes (README).
TEST(BundledTraceTest, Gpt2TraceMatchesItsReadme) {
  const std::string p = bundled_trace("gpt2_train.trace.csv.gz");
  if (p.empty()) GTEST_SKIP() << "data/traces/gpt2_train.trace.csv.gz not found";
  if (!trace_gzip_supported()) GTEST_SKIP() << "built without zlib";
  const Trace t = read_trace(p);
  EXPECT_EQ(t.peak_live_bytes, 14'417'617'608ull);
  EXPECT_EQ(t.counts.alloc, 6179u);
  EXPECT_EQ(t.counts.free_requested, 6176u);
  EXPECT_EQ(t.counts.free_completed, 6176u);
  EXPECT_EQ(t.counts.segment_alloc, 155u);
  EXPECT_EQ(t.counts.unknown_frees, 0u);
  EXPECT_EQ(t.counts.realloc_of_live, 0u);
  EXPECT_EQ(t.counts.live_at_end, 3u);
  EXPECT_EQ(t.events.size(), 6179u + 6176u);
}

}  // namespace
}  // namespace genesis::debug
