// Misuse of the caching allocator: every bad call throws InvalidArgumentError
// with a message that names the problem, and leaves the allocator exactly as
// it was (same statistics, same snapshot) and fully usable.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

std::string hex(const void* p) {
  std::ostringstream os;
  os << "0x" << std::hex << reinterpret_cast<std::uintptr_t>(p);
  return os.str();
}

// A printable form of a snapshot, to compare before/after.
std::string describe(const std::vector<SegmentInfo>& snap) {
  std::ostringstream os;
  for (const SegmentInfo& s : snap) {
    os << "seg " << s.address << " " << s.size << " " << s.pool << " " << s.stream << " " << s.allocated_bytes << "\n";
    for (const BlockInfo& b : s.blocks)
      os << "  " << b.address << " " << b.size << " " << b.state << " " << b.requested << " " << b.stream << "\n";
  }
  return os.str();
}

// Parameter: thread cache on / off (the hot path and the slow path detect
// misuse in different places).
class AllocatorMisuseTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    sim_ = std::make_shared<SimulatedDevice>(256 * MiB);
    other_stream_ = sim_->create_stream();
    AllocatorOptions o = classic();
    o.thread_cache = GetParam();
    a_ = std::make_unique<CachingAllocator>(sim_, o);
    live_small_ = a_->allocate(4 * KiB);
    live_large_ = a_->allocate(3 * MiB);
    freed_ = a_->allocate(8 * KiB);
    guard_ = a_->allocate(2 * KiB);  // keeps freed_ from merging into its successor's block
    a_->deallocate(freed_);
  }
  void TearDown() override {
    if (a_ == nullptr) return;
    a_->deallocate(live_small_);
    a_->deallocate(live_large_);
    a_->deallocate(guard_);
    a_->empty_cache();
    EXPECT_EQ(a_->stats().reserved_bytes[kStatAggregate].current, 0);
    a_.reset();
    EXPECT_EQ(sim_->bytes_in_use(), 0u);
    EXPECT_EQ(sim_->outstanding_events(), 0u);
    EXPECT_EQ(sim_->num_misuses(), 0u);
  }

  // Runs `bad`, expects InvalidArgumentError whose message contains every one
  // of `needles`, and checks that nothing changed and everything still works.
  template <typename F>
  void ExpectRejected(F bad, const std::vector<std::string>& needles) {
    const MemoryStats before = a_->stats();
    const std::string snap_before = describe(a_->snapshot());
    try {
      bad();
      ADD_FAILURE() << "no exception";
    } catch (const InvalidArgumentError& e) {
      const std::string msg = e.what();
      for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
    EXPECT_TRUE(StatsEqual(before, a_->stats()));
    EXPECT_EQ(snap_before, describe(a_->snapshot()));
    ExpectUsable();
  }

  void ExpectUsable() {
    EXPECT_TRUE(a_->owns(live_small_));
    EXPECT_TRUE(a_->owns(live_large_));
    EXPECT_EQ(a_->allocation_size(live_small_), 4 * KiB);
    // The freed block is still the one handed out for its size.
    void* again = a_->allocate(8 * KiB);
    EXPECT_EQ(again, freed_);
    void* other = a_->allocate(100 * KiB);
    EXPECT_NE(other, nullptr);
    a_->deallocate(other);
    a_->deallocate(again);
    EXPECT_TRUE(SnapshotConsistent(a_->snapshot()));
  }

  std::shared_ptr<SimulatedDevice> sim_;
  std::unique_ptr<CachingAllocator> a_;
  StreamId other_stream_ = 0;
  void* live_small_ = nullptr;
  void* live_large_ = nullptr;
  void* freed_ = nullptr;
  void* guard_ = nullptr;
};

TEST_P(AllocatorMisuseTest, DoubleFree) {
  ExpectRejected([&] { a_->deallocate(freed_); }, {"double free", hex(freed_), "sim:0"});
  // Twice in a row: still the same answer.
  ExpectRejected([&] { a_->deallocate(freed_); }, {"double free"});
}

TEST_P(AllocatorMisuseTest, DoubleFreeOfMergedBlock) {
  // Two neighbours freed in order: without a thread cache the second merges
  // into the first and no block starts at its address any more.
  void* x = a_->allocate(16 * KiB);
  void* y = a_->allocate(16 * KiB);
  void* z = a_->allocate(16 * KiB);
  a_->deallocate(x);
  a_->deallocate(y);
  ExpectRejected([&] { a_->deallocate(y); }, {hex(y)});
  ExpectRejected([&] { a_->deallocate(x); }, {hex(x)});
  a_->deallocate(z);
}

TEST_P(AllocatorMisuseTest, DoubleFreeThroughHandle) {
  CachingAllocator::Block* b = a_->allocate_block(24 * KiB);
  ASSERT_NE(b, nullptr);
  void* guard = a_->allocate(16 * KiB);  // b cannot merge with its successor (too big for the 8 KiB hole)
  a_->free_block(b);
  ASSERT_NE(b->load_state(), detail::BlockState::kAllocated);
  ExpectRejected([&] { a_->free_block(b); }, {"double free", hex(b->ptr())});
  a_->deallocate(guard);
}

TEST_P(AllocatorMisuseTest, PointerNeverAllocated) {
  int local = 0;
  ExpectRejected([&] { a_->deallocate(&local); }, {"not allocated", hex(&local), "sim:0"});
  void* foreign = reinterpret_cast<void*>(std::uintptr_t{0x1000});
  ExpectRejected([&] { a_->deallocate(foreign); }, {"not allocated", "0x1000"});
  // An address of the simulated device that no segment covers.
  void* unmapped = reinterpret_cast<void*>(sim_->base_address() + 200 * MiB);
  ExpectRejected([&] { a_->deallocate(unmapped); }, {"not allocated"});
}

TEST_P(AllocatorMisuseTest, PointerInsideAnAllocation) {
  void* inside = static_cast<char*>(live_small_) + 512;
  ExpectRejected([&] { a_->deallocate(inside); }, {"not the start of an allocation", hex(inside)});
  void* unaligned = static_cast<char*>(live_large_) + 1;
  ExpectRejected([&] { a_->deallocate(unaligned); }, {"not the start of an allocation", hex(unaligned)});
  void* deep = static_cast<char*>(live_large_) + 2 * MiB;
  ExpectRejected([&] { a_->deallocate(deep); }, {"not the start of an allocation"});
  EXPECT_THROW((void)a_->allocation_size(inside), InvalidArgumentError);
}

TEST_P(AllocatorMisuseTest, RecordStreamOnBadPointers) {
  ExpectRejected([&] { a_->record_stream(freed_, other_stream_); }, {"record_stream", hex(freed_), "not a live"});
  ExpectRejected([&] { a_->record_stream(nullptr, other_stream_); }, {"record_stream", "null"});
  void* inside = static_cast<char*>(live_small_) + 512;
  ExpectRejected([&] { a_->record_stream(inside, other_stream_); }, {"record_stream", hex(inside)});
  EXPECT_EQ(sim_->outstanding_events(), 0u);
}

TEST_P(AllocatorMisuseTest, HugeSizes) {
  const std::size_t limit = std::size_t{1} << 62;
  for (std::size_t n : {SIZE_MAX, SIZE_MAX - 511, SIZE_MAX - 512, limit + 1, limit + 512,
                        static_cast<std::size_t>(-1024), std::size_t{1} << 63}) {
    SCOPED_TRACE(n);
    ExpectRejected([&] { (void)a_->allocate(n); }, {std::to_string(n), "2^62"});
    ExpectRejected([&] { (void)a_->allocate_block(n, other_stream_); }, {"2^62"});
  }
  // Exactly 2^62 is a valid request that the device cannot satisfy.
  EXPECT_THROW((void)a_->allocate(limit), OutOfMemoryError);
}

TEST_P(AllocatorMisuseTest, BadControls) {
  ExpectRejected([&] { a_->warmup({{0, 1}}); }, {"warmup"});
  ExpectRejected([&] { a_->warmup({{1024, -1}}); }, {"warmup"});
  ExpectRejected([&] { a_->set_memory_fraction(0.0); }, {"fraction"});
  ExpectRejected([&] { a_->set_memory_fraction(1.5); }, {"fraction"});
  ExpectRejected([&] { a_->set_memory_fraction(-0.1); }, {"fraction"});
  ExpectRejected([&] { a_->set_memory_fraction(std::numeric_limits<double>::quiet_NaN()); }, {"fraction"});
  ExpectRejected([&] { (void)a_->collect_garbage(std::chrono::nanoseconds(-1)); }, {"max_idle"});
  EXPECT_EQ(a_->memory_limit(), SIZE_MAX);
  // Unknown stream of the simulated device: rejected by the upstream when an
  // event is needed, i.e. when the block is freed.
}

TEST_P(AllocatorMisuseTest, AllocationSizeOfFreedPointer) {
  EXPECT_THROW((void)a_->allocation_size(freed_), InvalidArgumentError);
  EXPECT_FALSE(a_->owns(freed_));
  ExpectUsable();
}

INSTANTIATE_TEST_SUITE_P(ThreadCache, AllocatorMisuseTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "On" : "Off"; });

TEST(AllocatorMisuseOptionsTest, BadConstruction) {
  EXPECT_THROW(CachingAllocator(nullptr), InvalidArgumentError);
  auto sim = std::make_shared<SimulatedDevice>(64 * MiB);
  for (double f : {0.0, -1.0, 1.0001, std::numeric_limits<double>::quiet_NaN()}) {
    AllocatorOptions o;
    o.memory_fraction = f;
    EXPECT_THROW(CachingAllocator(sim, o), InvalidArgumentError) << f;
  }
  AllocatorOptions o;
  o.thread_cache_small_count = 0;
  EXPECT_THROW(CachingAllocator(sim, o), InvalidArgumentError);
  // Expandable segments demanded of an upstream without virtual memory.
  AllocatorOptions on;
  on.expandable_segments = AllocatorOptions::Expandable::kOn;
  EXPECT_THROW(CachingAllocator(std::make_shared<HostResource>(), on), InvalidArgumentError);
  // Nothing was taken from the device by the failed constructions.
  EXPECT_EQ(sim->bytes_in_use(), 0u);
  CachingAllocator ok(sim);
  ok.deallocate(ok.allocate(10));
}

}  // namespace
}  // namespace genesis::memory
