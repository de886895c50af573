// PyTorch memory snapshots as replayable traces (genesis/debug/torch_snapshot.h),
// through read_trace() too: a pickled snapshot is read where a CSV trace is.
#include "genesis/debug/torch_snapshot.h"

#include <gtest/gtest.h>

#include <string>

#include "genesis/core/error.h"
#include "genesis/debug/replay.h"
#include "pickle_test_util.h"
#include "trace_test_util.h"

namespace genesis::debug {
namespace {

using testing_support::PickleWriter;
using testing_support::write_entry;

// One device: an alloc of 1024 bytes at 0x7f0000000000 from train.py:42 in
// step, its free_requested 10 us later and the free_completed.
const std::string& kSnapshot5 = testing_support::python5_snapshot_pickle();

Trace from_bytes(const std::string& b, const TorchSnapshotOptions& o = {}) {
  return read_torch_snapshot(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), "snap.pickle", o);
}

std::string snapshot_error_of(const std::string& b, const TorchSnapshotOptions& o = {}) {
  try {
    from_bytes(b, o);
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

// {"segments": [], "device_traces": [dev0, dev1]} with dev0 holding 
// alloc/free pairs and dev1 .
std::string two_devices(int n0, int n1) {
  PickleWriter w(4);
  w.empty_dict().mark().key("segments").empty_list().key("device_traces").empty_list().mark();
  for (int n : {n0, n1}) {
    w.empty_list();
    if (n > 0) {
      w.mark();
      for (int i = 0; i < n; ++i) {
        write_entry(w, "alloc", 4096 * (i + 1), 100 + i, 7, 1000 + 10 * i);
        write_entry(w, "free_requested", 4096 * (i + 1), 100 + i, 7, 1005 + 10 * i);
      }
      w.appends();
    }
  }
  w.appends().setitems().stop();
  return w.bytes();
}

TEST(TorchSnapshot, AllocAndFreeBecomeTraceEventsWithTimesSitesAndStreams) {
  const Trace t = from_bytes(kSnapshot5);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].op, TraceOp::kAlloc);
  EXPECT_EQ(t.events[0].size, 1024u);
  EXPECT_EQ(t.events[1].op, TraceOp::kFree);
  EXPECT_EQ(t.events[1].slot, t.events[0].slot);
  EXPECT_EQ(t.counts.alloc, 1u);
  EXPECT_EQ(t.counts.free_requested, 1u);
  EXPECT_EQ(t.counts.free_completed, 1u);
  EXPECT_EQ(t.counts.lines, 3u);
  EXPECT_EQ(t.counts.live_at_end, 0u);
  ASSERT_EQ(t.time_us.size(), 2u);
  EXPECT_EQ(t.time_us[0], 1700000000000000u);
  EXPECT_EQ(t.time_us[1], 1700000000000010u);
  ASSERT_EQ(t.event_site.size(), 2u);
  EXPECT_EQ(t.sites.at(t.event_site[0]), "train.py:42 in step");
  EXPECT_EQ(t.event_site[1], 0u);  // frees carry no site
  EXPECT_EQ(t.peak_live_bytes, 1024u);
  EXPECT_NE(t.source.find("snap.pickle (device 0)"), std::string::npos) << t.source;
}

TEST(TorchSnapshot, TheBusiestDeviceUnlessOneIsAskedFor) {
  const std::string b = two_devices(2, 5);
  const Trace busiest = from_bytes(b);
  EXPECT_EQ(busiest.counts.alloc, 5u);
  EXPECT_NE(busiest.source.find("device 1 of 0, 1"), std::string::npos) << busiest.source;
  ASSERT_EQ(busiest.streams.size(), 1u);
  EXPECT_EQ(busiest.streams[0], 7u);
  TorchSnapshotOptions zero;
  zero.device = 0;
  EXPECT_EQ(from_bytes(b, zero).counts.alloc, 2u);
  TorchSnapshotOptions missing;
  missing.device = 2;
  EXPECT_NE(snapshot_error_of(b, missing).find("no device 2"), std::string::npos);
  EXPECT_NE(snapshot_error_of(two_devices(0, 0)).find("every device trace is empty"), std::string::npos);
}

TEST(TorchSnapshot, ReplaysLikeTheCsvOfTheSameEvents) {
  const Trace t = from_bytes(two_devices(0, 50));
  ReplayConfig c;
  c.name = "sim";
  c.capacity = std::size_t{1} << 30;
  const ReplayResult r = replay(t, c);
  EXPECT_EQ(r.events, t.events.size());
  EXPECT_EQ(r.ooms, 0u);
}

TEST(TorchSnapshot, OtherShapesAreClearErrors) {
  PickleWriter list(2);
  list.empty_list().stop();
  EXPECT_NE(snapshot_error_of(list.bytes()).find("not a memory snapshot (a pickled list"), std::string::npos);

  PickleWriter no_traces(2);
  no_traces.empty_dict().mark().key("segments").empty_list().setitems().stop();
  EXPECT_NE(snapshot_error_of(no_traces.bytes()).find("no device_traces"), std::string::npos);

  auto one_entry = [](auto&& fill) {
    PickleWriter w(2);
    w.empty_dict().mark().key("device_traces").empty_list().mark().empty_list().mark();
    write_entry(w, "alloc", 4096, 10, 0, 1);
    fill(w);
    w.appends().appends().setitems().stop();
    return w.bytes();
  };
  const std::string no_addr = one_entry([](PickleWriter& w) {
    w.empty_dict().mark().key("action").str("free_requested").key("size").integer(10).setitems();
  });
  const std::string e1 = snapshot_error_of(no_addr);
  EXPECT_NE(e1.find("device_traces[0][1]: no 'addr'"), std::string::npos) << e1;
  const std::string bad_action = one_entry([](PickleWriter& w) { write_entry(w, "teleport", 1, 1, 0, 1); });
  EXPECT_NE(snapshot_error_of(bad_action).find("unknown action 'teleport'"), std::string::npos);
  const std::string negative = one_entry([](PickleWriter& w) { write_entry(w, "alloc", -4096, 1, 0, 1); });
  EXPECT_NE(snapshot_error_of(negative).find("'addr' is negative"), std::string::npos);
  const std::string str_size = one_entry([](PickleWriter& w) {
    w.empty_dict().mark().key("action").str("alloc").key("addr").integer(8192).key("size").str("big").setitems();
  });
  EXPECT_NE(snapshot_error_of(str_size).find("'size' is a str, expected an int"), std::string::npos);
  const std::string not_dict = one_entry([](PickleWriter& w) { w.integer(3); });
  EXPECT_NE(snapshot_error_of(not_dict).find("device_traces[0][1]: is a int"), std::string::npos);
  // Segment events, OOMs and snapshots are counted, not replayed.
  const std::string others = one_entry([](PickleWriter& w) {
    write_entry(w, "segment_alloc", 0, 2 << 20, 0, 2);
    write_entry(w, "segment_map", 0, 2 << 20, 0, 2);
    w.empty_dict().mark().key("action").str("oom").key("device_free").integer(0).key("size").integer(5).setitems();
  });
  const Trace t = from_bytes(others);
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.counts.segment_alloc, 1u);
  EXPECT_EQ(t.counts.other_ignored, 1u);
  EXPECT_EQ(t.counts.oom, 1u);
  // A broken pickle names the file.
  EXPECT_NE(snapshot_error_of(kSnapshot5.substr(0, 100)).find("snap.pickle: pickle: "), std::string::npos);
}

class TorchSnapshotFile : public testing_support::TempDirTest {};

TEST_F(TorchSnapshotFile, ReadTraceReadsPickledSnapshots) {
  const Trace t = read_trace(write_plain("s.pickle", kSnapshot5));
  EXPECT_EQ(t.counts.alloc, 1u);
  EXPECT_EQ(t.counts.free_completed, 1u);
  EXPECT_EQ(t.sites.at(t.event_site.at(0)), "train.py:42 in step");
  // A large snapshot spans several reads of the file.
  const Trace big = read_trace(write_plain("big.pickle", two_devices(0, 20000)));
  EXPECT_EQ(big.counts.alloc, 20000u);
  const std::string gz = write_gzip("s.pickle.gz", kSnapshot5);
  if (!gz.empty()) {
    EXPECT_EQ(read_trace(gz).counts.alloc, 1u);
  }
  // A CSV trace is still a CSV trace.
  EXPECT_EQ(read_trace(write_plain("t.csv", "time_us,action,addr,size,stream\n0,alloc,16,8,0\n")).counts.alloc, 1u);
}

// Protocols 0 and 1 declare no protocol; a pickled dict is told from a CSV
// trace by how it opens, and reads as the same trace as protocol 5.
TEST_F(TorchSnapshotFile, ProtocolsZeroAndOneAreSnapshotsToo) {
  const Trace five = read_trace(write_plain("s5.pickle", kSnapshot5));
  int k = 0;
  for (const std::string* bytes :
       {&testing_support::python0_snapshot_pickle(), &testing_support::python1_snapshot_pickle()}) {
    SCOPED_TRACE(k);
    const std::string name = "s" + std::to_string(k++) + ".pickle";
    const Trace t = read_trace(write_plain(name, *bytes));
    ASSERT_EQ(t.events.size(), five.events.size());
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      EXPECT_EQ(t.events[i].op, five.events[i].op) << i;
      EXPECT_EQ(t.events[i].size, five.events[i].size) << i;
    }
    EXPECT_EQ(t.time_us, five.time_us);
    EXPECT_EQ(t.sites.at(t.event_site.at(0)), "train.py:42 in step");
    EXPECT_EQ(t.counts.free_completed, 1u);
    const std::string gz = write_gzip(name + ".gz", *bytes);
    if (!gz.empty()) {
      EXPECT_EQ(read_trace(gz).counts.alloc, 1u);
    }
  }
  EXPECT_TRUE(looks_like_pickle(reinterpret_cast<const std::uint8_t*>("(dp0\n"), 5));
  EXPECT_TRUE(looks_like_pickle(reinterpret_cast<const std::uint8_t*>("}q\x00("), 4));
  EXPECT_FALSE(looks_like_pickle(reinterpret_cast<const std::uint8_t*>("time_us,"), 8));
  EXPECT_FALSE(looks_like_pickle(reinterpret_cast<const std::uint8_t*>("\x80\x06"), 2));
}

}  // namespace
}  // namespace genesis::debug
