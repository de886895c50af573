// Stream-ordered reuse (record_stream semantics) on the simulated device:
// blocks are cached per stream, a block used on other streams comes back
// only once the work queued there has completed, and a free block of an idle
// stream may serve another stream before the pool grows.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// Parameter: thread cache on / off.
class AllocatorStreamsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { make(1 * GiB); }
  void make(std::size_t capacity, bool stream_borrow = true) {
    a_.reset();
    sim_ = std::make_shared<SimulatedDevice>(capacity);
    s1_ = sim_->create_stream();
    s2_ = sim_->create_stream();
    s3_ = sim_->create_stream();
    AllocatorOptions o = classic();  // segment counts and OOM sizes below assume classic segments
    o.thread_cache = GetParam();
    o.stream_borrow = stream_borrow;
    a_ = std::make_unique<CachingAllocator>(sim_, o);
  }
  void TearDown() override {
    a_.reset();
    EXPECT_EQ(sim_->outstanding_events(), 0u) << "events leaked";
    EXPECT_EQ(sim_->bytes_in_use(), 0u);
    EXPECT_EQ(sim_->num_misuses(), 0u);
  }
  std::string state_of(void* p) const {
    for (const SegmentInfo& seg : a_->snapshot())
      for (const BlockInfo& b : seg.blocks)
        if (b.address == addr_of(p)) return b.state;
    return "(none)";
  }

  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> a_;
  StreamId s1_ = 0, s2_ = 0, s3_ = 0;
};

TEST_P(AllocatorStreamsTest, RecordedBlockWaitsForTheOtherStream) {
  void* p = a_->allocate(1000, s1_);
  a_->record_stream(p, s2_);
  sim_->submit_work(s2_);  // a kernel on s2 still uses p
  a_->deallocate(p);
  EXPECT_EQ(sim_->outstanding_events(), 1u);
  EXPECT_EQ(state_of(p), "pending");
  EXPECT_FALSE(a_->owns(p));
  // Not handed out again, not even on its own stream, while s2 is busy.
  std::vector<void*> live;
  for (int i = 0; i < 5; ++i) {
    void* q = a_->allocate(1000, s1_);
    EXPECT_NE(q, p) << i;
    live.push_back(q);
  }
  EXPECT_EQ(state_of(p), "pending");
  // Double free of a pending block is still an error.
  EXPECT_THROW(a_->deallocate(p), InvalidArgumentError);
  sim_->complete_work(s2_);
  void* again = a_->allocate(1000, s1_);
  EXPECT_EQ(again, p);  // best fit: the exact-size block that came back
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  live.push_back(again);
  for (void* q : live) a_->deallocate(q);
}

TEST_P(AllocatorStreamsTest, PendingBytesAreActive) {
  void* keep = a_->allocate(4 * KiB, s1_);
  void* p = a_->allocate(1000, s1_);
  a_->record_stream(p, s2_);
  sim_->submit_work(s2_);
  a_->deallocate(p);
  MemoryStats s = a_->stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 4096);
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 4096 + 1024);
  EXPECT_EQ(s.active_bytes[kStatSmallPool].current, 4096 + 1024);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 1);
  EXPECT_EQ(s.num_frees, 1);
  sim_->complete_work(s2_);
  // Completion is noticed the next time the allocator looks (here: gc that
  // releases nothing recent).
  EXPECT_EQ(a_->collect_garbage(std::chrono::hours(1)), 0u);
  s = a_->stats();
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 4096);
  EXPECT_EQ(state_of(p), "free");
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  a_->deallocate(keep);
}

TEST_P(AllocatorStreamsTest, EveryRecordedStreamMustComplete) {
  void* p = a_->allocate(64 * KiB, s1_);
  a_->record_stream(p, s2_);
  a_->record_stream(p, s3_);
  a_->record_stream(p, s2_);  // recorded once per stream
  a_->record_stream(p, s1_);  // its own stream: nothing to wait for
  sim_->submit_work(s2_);
  sim_->submit_work(s3_);
  a_->deallocate(p);
  EXPECT_EQ(sim_->outstanding_events(), 2u);
  sim_->complete_work(s2_);
  void* q = a_->allocate(64 * KiB, s1_);
  EXPECT_NE(q, p);
  EXPECT_EQ(state_of(p), "pending");
  EXPECT_EQ(sim_->outstanding_events(), 1u);
  sim_->complete_work(s3_);
  void* r = a_->allocate(64 * KiB, s1_);
  EXPECT_EQ(r, p);
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  a_->deallocate(q);
  a_->deallocate(r);
}

TEST_P(AllocatorStreamsTest, OwnStreamOrIdleStreamNeedsNoWait) {
  // record_stream on the block's own stream: nothing recorded.
  void* p = a_->allocate(2000, s1_);
  a_->record_stream(p, s1_);
  a_->deallocate(p);
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  EXPECT_EQ(a_->allocate(2000, s1_), p);
  // Another stream with no work queued: its event is complete at once.
  a_->record_stream(p, s2_);
  a_->deallocate(p);
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  EXPECT_EQ(state_of(p), "free");
  EXPECT_EQ(a_->allocate(2000, s1_), p);
  a_->deallocate(p);
}

// Without lending across streams (allocator_borrow_test.cpp) every stream
// keeps segments of its own.
TEST_P(AllocatorStreamsTest, BlocksAreCachedPerStream) {
  make(1 * GiB, /*stream_borrow=*/false);
  void* p = a_->allocate(4 * KiB, s1_);
  a_->deallocate(p);
  void* q = a_->allocate(4 * KiB, s2_);
  EXPECT_NE(q, p);
  void* z = a_->allocate(4 * KiB);  // default stream
  EXPECT_NE(z, p);
  EXPECT_NE(z, q);
  const auto snap = a_->snapshot();
  ASSERT_EQ(snap.size(), 3u);
  std::map<StreamId, int> segments_per_stream;
  for (const SegmentInfo& seg : snap) ++segments_per_stream[seg.stream];
  EXPECT_EQ(segments_per_stream[s1_], 1);
  EXPECT_EQ(segments_per_stream[s2_], 1);
  EXPECT_EQ(segments_per_stream[0], 1);
  EXPECT_EQ(a_->allocate(4 * KiB, s1_), p);  // back on s1: the cached block
  a_->deallocate(p);
  a_->deallocate(q);
  a_->deallocate(z);
  a_->empty_cache();
}

// Random traffic over more streams than a thread cache tracks at once: an
// address is only ever handed out on the stream of its segment (without
// lending across streams).
TEST_P(AllocatorStreamsTest, NoBlockCrossesStreams) {
  make(1 * GiB, /*stream_borrow=*/false);
  std::vector<StreamId> streams{0, s1_, s2_, s3_};
  for (int i = 0; i < 4; ++i) streams.push_back(sim_->create_stream());
  std::mt19937 rng(7);
  std::map<std::uintptr_t, StreamId> owner;  // address -> stream it was handed out on
  struct Live {
    void* p;
    StreamId s;
  };
  std::vector<Live> live;
  const std::size_t sizes[] = {512, 1000, 4096, 70000, 1 * MiB, 3 * MiB};
  for (int it = 0; it < 4000; ++it) {
    if (live.size() < 40 && (live.empty() || rng() % 2 == 0)) {
      const StreamId s = streams[rng() % streams.size()];
      void* p = a_->allocate(sizes[rng() % 6], s);
      auto [pos, inserted] = owner.emplace(addr_of(p), s);
      ASSERT_EQ(pos->second, s) << "address handed out on two streams";
      live.push_back({p, s});
    } else {
      const std::size_t k = rng() % live.size();
      a_->deallocate(live[k].p);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (const SegmentInfo& seg : a_->snapshot())
    for (const BlockInfo& b : seg.blocks) EXPECT_EQ(b.stream, seg.stream);
  for (const Live& l : live) a_->deallocate(l.p);
}

TEST_P(AllocatorStreamsTest, EmptyCacheWaitsForPendingWork) {
  void* p = a_->allocate(12 * MiB, s1_);  // a segment of its own
  a_->record_stream(p, s2_);
  for (int i = 0; i < 3; ++i) sim_->submit_work(s2_);
  a_->deallocate(p);
  sim_->submit_work(s2_);  // queued after the free: not waited for
  EXPECT_EQ(sim_->completed_work(s2_), 0u);
  a_->empty_cache();
  EXPECT_EQ(sim_->completed_work(s2_), 3u);
  EXPECT_EQ(sim_->submitted_work(s2_), 4u);
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  EXPECT_EQ(a_->stats().reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(a_->stats().active_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(sim_->bytes_in_use(), 0u);
}

TEST_P(AllocatorStreamsTest, OutOfMemoryWaitsForPendingBlocks) {
  make(24 * MiB);
  void* p = a_->allocate(16 * MiB, s1_);
  a_->record_stream(p, s2_);
  sim_->submit_work(s2_);
  a_->deallocate(p);
  // Only the pending block can serve this: the allocator waits for s2.
  void* q = a_->allocate(16 * MiB, s1_);
  EXPECT_EQ(q, p);
  EXPECT_EQ(sim_->completed_work(s2_), 1u);
  const MemoryStats s = a_->stats();
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_upstream_failures, 1);
  EXPECT_EQ(s.num_upstream_allocs, 1);
  EXPECT_EQ(sim_->outstanding_events(), 0u);
  a_->deallocate(q);
}

TEST_P(AllocatorStreamsTest, DestructorReleasesPendingEvents) {
  void* p = a_->allocate(1000, s1_);
  a_->record_stream(p, s2_);
  a_->record_stream(p, s3_);
  sim_->submit_work(s2_);
  sim_->submit_work(s3_);
  a_->deallocate(p);
  EXPECT_EQ(sim_->outstanding_events(), 2u);
  // TearDown destroys the allocator and checks that nothing leaked.
}

// The upstream refuses to record an event (unknown stream): the free fails
// and leaves the block allocated and every statistic as it was.
// record_stream validates the stream at once (by recording an event on it):
// an unknown stream is an error there and changes nothing, instead of a block
// that could never be freed later.
TEST_P(AllocatorStreamsTest, RecordStreamRejectsUnknownStream) {
  void* p = a_->allocate(1000, s1_);
  a_->record_stream(p, s2_);
  const MemoryStats before = a_->stats();
  EXPECT_THROW(a_->record_stream(p, StreamId{999}), InvalidArgumentError);  // not a stream of this device
  EXPECT_TRUE(StatsEqual(before, a_->stats()));
  EXPECT_EQ(sim_->outstanding_events(), 0u) << "the validation event leaked";
  EXPECT_EQ(state_of(p), "allocated");
  // The block is still freed the normal way: pending until s2's work is done.
  sim_->submit_work(s2_);
  a_->deallocate(p);
  EXPECT_EQ(state_of(p), "pending");
  sim_->complete_work(s2_);
  void* q = a_->allocate(1000, s1_);
  EXPECT_EQ(q, p) << "the block returns to the pool once the other stream's work completed";
  a_->deallocate(q);
}

// Lending across streams (Note [Borrowing across streams]) with classic
// segments: an idle stream's free block serves another stream before the
// pool grows; a busy stream's does not, and nothing waits.
constexpr std::size_t kBig = 12 * MiB;  // a large-pool request with a segment of its own

TEST_P(AllocatorStreamsTest, AnIdleStreamsFreeBlockServesInsteadOfANewSegment) {
  void* p = a_->allocate(kBig, s1_);
  a_->deallocate(p);
  const MemoryStats before = a_->stats();
  void* q = a_->allocate(kBig, s2_);
  EXPECT_EQ(q, p) << "s1 is idle: its free block serves s2";
  MemoryStats s = a_->stats();
  EXPECT_EQ(s.num_upstream_allocs, before.num_upstream_allocs) << "the pool grew";
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, before.reserved_bytes[kStatAggregate].current);
  EXPECT_EQ(s.num_stream_borrows, 1);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(kBig));

  // s2 uses the block, then frees it: it goes back to s1's free blocks only
  // once s2's work is done, as a block used on another stream does.
  sim_->submit_work(s2_);
  a_->deallocate(q);
  EXPECT_EQ(state_of(q), "pending");
  void* r = a_->allocate(kBig, s1_);
  EXPECT_NE(r, p) << "handed out on s1 while s2's work may still use it";
  sim_->complete_work(s2_);
  void* again = a_->allocate(kBig, s1_);
  EXPECT_EQ(again, p) << "back among s1's free blocks once s2's work completed";
  EXPECT_TRUE(SnapshotConsistent(a_->snapshot()));
  a_->deallocate(r);
  a_->deallocate(again);
}

TEST_P(AllocatorStreamsTest, ABusyStreamsBlockIsNotLentAndNothingWaits) {
  void* p = a_->allocate(kBig, s1_);
  sim_->submit_work(s1_);  // a kernel on s1 still uses p
  a_->deallocate(p);
  const MemoryStats before = a_->stats();
  void* q = a_->allocate(kBig, s2_);
  EXPECT_NE(q, p);
  EXPECT_EQ(a_->stats().num_upstream_allocs, before.num_upstream_allocs + 1) << "classic segments grow instead";
  EXPECT_EQ(a_->stats().num_stream_borrows, 0);
  EXPECT_EQ(sim_->completed_work(s1_), 0u) << "s1's work was waited for";
  sim_->complete_work(s1_);
  a_->deallocate(q);
}

TEST_P(AllocatorStreamsTest, TurnedOffEachStreamKeepsItsOwnSegments) {
  make(1 * GiB, /*stream_borrow=*/false);
  void* p = a_->allocate(kBig, s1_);
  a_->deallocate(p);
  void* q = a_->allocate(kBig, s2_);
  EXPECT_NE(q, p);
  EXPECT_EQ(a_->stats().num_upstream_allocs, 2);
  EXPECT_EQ(a_->stats().num_stream_borrows, 0);
  a_->deallocate(q);
}

INSTANTIATE_TEST_SUITE_P(ThreadCache, AllocatorStreamsTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "On" : "Off"; });

// Expandable segments: a block taken from the pool whose pages cannot be
// mapped triggers the out-of-memory recovery, which waits for pending blocks
// and returns them to the pool. The taken block must not be merged into such
// a neighbour (it was, and allocate() returned nullptr).
TEST(AllocatorStreamsExpandableTest, OutOfMemoryRecoveryKeepsTheTakenBlock) {
  for (const bool thread_cache : {true, false}) {
    SCOPED_TRACE(thread_cache ? "thread cache" : "no thread cache");
    auto sim = std::make_shared<SimulatedDevice>(4 * MiB);  // two physical pages
    const StreamId s1 = sim->create_stream();
    AllocatorOptions o;
    o.expandable_segments = AllocatorOptions::Expandable::kOn;
    o.thread_cache = thread_cache;
    {
      CachingAllocator a(sim, o);
      void* big = a.allocate(2 * MiB);  // large pool: one page
      void* x = a.allocate(1 * MiB);
      void* y = a.allocate(1 * MiB);  // small pool: x and y fill the other page
      for (void* p : {x, y}) {
        a.record_stream(p, s1);
        sim->submit_work(s1);
        a.deallocate(p);  // pending: s1 still uses it
      }
      EXPECT_EQ(sim->mapped_bytes(), 4 * MiB);
      // The only free small block starts on the small pool's unmapped second
      // page: mapping it fails, the recovery waits for s1 (x and y return to
      // the pool, next to the taken block), unmaps their page, and retries.
      void* b = a.allocate(1 * MiB);
      ASSERT_NE(b, nullptr);
      EXPECT_TRUE(a.owns(b));
      EXPECT_EQ(a.allocation_size(b), 1 * MiB);
      EXPECT_TRUE(SnapshotConsistent(a.snapshot()));
      const MemoryStats s = a.stats();
      EXPECT_EQ(s.allocation_count[kStatAggregate].current, 2);
      EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, static_cast<std::int64_t>(3 * MiB));
      EXPECT_EQ(s.num_ooms, 0);
      EXPECT_EQ(sim->mapped_bytes(), 4 * MiB);
      EXPECT_EQ(sim->outstanding_events(), 0u);
      a.deallocate(b);
      a.deallocate(big);
      a.empty_cache();
      EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
      EXPECT_EQ(sim->mapped_bytes(), 0u);
    }
    EXPECT_EQ(sim->bytes_in_use(), 0u);
    EXPECT_EQ(sim->num_reserved_ranges(), 0u);
    EXPECT_EQ(sim->num_misuses(), 0u);
  }
}

}  // namespace
}  // namespace genesis::memory
