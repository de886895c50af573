// A program that gives its allocator's cache back (torch.cuda.empty_cache())
// and the replay that must do the same (Note [Released caches] in
// genesis/debug/trace.h): the CSV action empty_cache, a PyTorch snapshot's
// runs of segment releases, and the replay's peaks with and without them.
#include <gtest/gtest.h>

#include <string>

#include "genesis/debug/replay.h"
#include "genesis/debug/torch_snapshot.h"
#include "genesis/debug/trace.h"
#include "pickle_test_util.h"
#include "support/allocator_test_util.h"
#include "trace_test_util.h"

namespace genesis::debug {
namespace {

using memory::testing_support::MiB;
using testing_support::PickleWriter;
using testing_support::write_entry;

class ReleasedCaches : public testing_support::TempDirTest {};

TEST_F(ReleasedCaches, CsvEmptyCacheLinesAreOneEventPerRun) {
  const Trace t = read_trace(write_plain("t.csv",
                                         "time_us,action,addr,size,stream\n"
                                         "10,alloc,4096,1000,0\n"
                                         "11,free_requested,4096,1000,0\n"
                                         "12,empty_cache,0,0,0\n"
                                         "13,segment_free,0,2097152,0\n"
                                         "14,empty_cache,0,0,0\n"
                                         "15,alloc,8192,2000,0\n"
                                         "16,empty_cache,0,0,0\n"));
  // Lines 12 and 14 have no alloc or free between them: one release.
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].op, TraceOp::kAlloc);
  EXPECT_EQ(t.events[1].op, TraceOp::kFree);
  EXPECT_EQ(t.events[2].op, TraceOp::kEmptyCache);
  EXPECT_EQ(t.events[2].slot, kNullSlot);
  EXPECT_EQ(t.events[3].op, TraceOp::kAlloc);
  EXPECT_EQ(t.events[4].op, TraceOp::kEmptyCache);
  EXPECT_EQ(t.counts.empty_cache, 2u);
  EXPECT_EQ(t.counts.segment_free, 1u);
  ASSERT_EQ(t.time_us.size(), t.events.size());
  EXPECT_EQ(t.time_us[2], 12u);
  EXPECT_EQ(t.time_us[3], 15u);
  EXPECT_EQ(t.peak_live_bytes, 2000u);
}

TEST_F(ReleasedCaches, ASnapshotsRunsOfSegmentReleasesAreOneEmptyCacheEach) {
  PickleWriter w(4);
  w.empty_dict().mark().key("segments").empty_list().key("device_traces").empty_list().mark();
  w.empty_list().mark();
  write_entry(w, "alloc", 0x7f0000000000, 4096, 0, 100);
  write_entry(w, "free_requested", 0x7f0000000000, 4096, 0, 101);
  write_entry(w, "segment_free", 0x7f0000000000, 2 << 20, 0, 102);
  write_entry(w, "segment_unmap", 0x7f0000200000, 2 << 20, 0, 103);
  write_entry(w, "segment_free", 0x7f0000400000, 20 << 20, 0, 104);
  write_entry(w, "alloc", 0x7f0000000000, 8192, 0, 105);
  write_entry(w, "segment_free", 0x7f0000600000, 2 << 20, 0, 106);
  w.appends();
  w.appends().setitems().stop();
  const std::string bytes = w.bytes();
  const Trace t = read_torch_snapshot(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "s.pickle");
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[2].op, TraceOp::kEmptyCache);
  EXPECT_EQ(t.events[3].op, TraceOp::kAlloc);
  EXPECT_EQ(t.events[4].op, TraceOp::kEmptyCache);
  EXPECT_EQ(t.counts.empty_cache, 2u);
  EXPECT_EQ(t.counts.segment_free, 3u);
  EXPECT_EQ(t.counts.other_ignored, 1u);  // the segment_unmap
  ASSERT_EQ(t.time_us.size(), 5u);
  EXPECT_EQ(t.time_us[2], 102u);  // the run's first entry
}

// Classic segments, as PyTorch's native allocator: 100 MiB freed and kept
// cached, then 300 MiB asked for. Kept, the cache adds to the peak; given
// back where the program called empty_cache, it does not.
TEST_F(ReleasedCaches, TheReplayGivesTheCacheBackWhereTheProgramDid) {
  auto trace = [](bool release) {
    TraceBuilder b("t");
    b.alloc(1, 100 * MiB);
    b.free(1);
    if (release) b.empty_cache();
    b.alloc(2, 300 * MiB);
    b.free(2);
    return b.finish();
  };
  const ReplayConfig c = make_replay_config("genesis-classic", ReplayDevice::kSimulated, 0);
  const ReplayResult kept = replay(trace(false), c);
  const ReplayResult released = replay(trace(true), c);
  EXPECT_EQ(kept.peak_live_bytes, 300 * MiB);
  EXPECT_EQ(released.peak_live_bytes, 300 * MiB);
  EXPECT_EQ(kept.peak_reserved_bytes, 400 * MiB);
  EXPECT_EQ(released.peak_reserved_bytes, 300 * MiB);
  EXPECT_EQ(released.ooms, 0u);
  EXPECT_EQ(released.events, 5u);
}

}  // namespace
}  // namespace genesis::debug
