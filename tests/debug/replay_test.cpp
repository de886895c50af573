// The replay engine on the simulated device: small traces with known
// outcomes (peak live, peak reserved under the classic segment policy, OOM
// skipping, unknown frees, leftovers), random traces checked for overlapping
// blocks, a recorded allocator history replayed through write_trace /
// read_trace, the named configurations and the report.
#include "genesis/debug/replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "debug/trace_test_util.h"
#include "genesis/core/error.h"
#include "genesis/debug/replay_report.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::debug {
namespace {

using memory::testing_support::GiB;
using memory::testing_support::KiB;
using memory::testing_support::MiB;

ReplayConfig classic(std::size_t capacity = 0) { return make_replay_config("genesis-classic", ReplayDevice::kSimulated, capacity); }

TEST(ReplayTest, PeakLiveIsTheLargestSumOfRequestedSizes) {
  TraceBuilder b("test");
  b.alloc(1, 1000);
  b.alloc(2, 3000);
  b.free(1);
  b.alloc(3, 500);
  b.free(2);
  b.free(3);
  const Trace t = b.finish();
  const ReplayResult r = replay(t, classic());
  EXPECT_EQ(r.events, 6u);
  EXPECT_EQ(r.peak_live_bytes, 4000u);
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.allocated_after_cleanup, 0);
  EXPECT_EQ(r.final_stats.num_allocs, 3);
  EXPECT_EQ(r.final_stats.num_frees, 3);
  EXPECT_EQ(r.upstream, "sim:0");
  EXPECT_EQ(r.capacity, std::size_t{128} << 30);  // a small trace: the smallest default
  EXPECT_EQ(r.capacity, default_simulated_capacity(t));
  EXPECT_GT(r.ns_per_event, 0.0);
}

// Expected values from the policy in caching_allocator.h: <= 1 MiB -> small
// pool, 2 MiB segments; < 10 MiB -> a 20 MiB segment; else the request
// rounded up to 2 MiB.
TEST(ReplayTest, ClassicPolicyPeakReserved) {
  TraceBuilder b("test");
  b.alloc(1, 1 * MiB);   // small segment 1
  b.alloc(2, 1 * MiB);   // fills it
  b.alloc(3, 1 * MiB);   // small segment 2
  b.alloc(4, 12 * MiB);  // a 12 MiB segment, nothing left over
  b.alloc(5, 3 * MiB);   // a 20 MiB segment (17 MiB stay free)
  b.alloc(6, 11 * MiB - 100);  // fits in the 17 MiB remainder: no new segment
  for (std::uintptr_t a = 1; a <= 6; ++a) b.free(a);
  const Trace t = b.finish();
  for (const char* name : {"genesis-classic", "genesis-no-tcache"}) {
    SCOPED_TRACE(name);
    ReplayConfig config = make_replay_config(name);
    config.options.expandable_segments = memory::AllocatorOptions::Expandable::kOff;
    const ReplayResult r = replay(t, config);
    EXPECT_EQ(r.peak_reserved_bytes, 36 * MiB);
    EXPECT_EQ(r.upstream_allocs, 4);
    EXPECT_EQ(r.upstream_frees, 0);
    EXPECT_EQ(r.peak_live_bytes, 3 * MiB + 12 * MiB + 3 * MiB + 11 * MiB - 100);
    EXPECT_NEAR(r.reserved_per_live, 36.0 * MiB / static_cast<double>(r.peak_live_bytes), 1e-12);
    EXPECT_EQ(r.allocated_after_cleanup, 0);
  }
}

// A simulated device with CUDA's mapping costs (ReplayConfig::sim_vmm_cost)
// is "not cheap": the default configuration then uses classic segments, as on
// CUDA, and only genesis-expandable maps pages.
TEST(ReplayTest, SimulatedMappingCostsMakeTheDefaultClassic) {
  TraceBuilder b("test");
  b.alloc(1, 3 * MiB);
  b.alloc(2, 12 * MiB);
  b.free(1);
  b.free(2);
  const Trace t = b.finish();
  const auto tiny = memory::SimulatedDevice::VmmCost::parse("0.001,0.001,0.001");
  ReplayConfig def = make_replay_config("genesis");
  def.sim_vmm_cost = tiny;
  const ReplayResult r = replay(t, def);
  EXPECT_EQ(r.peak_reserved_bytes, 20 * MiB);  // classic: one 20 MiB segment holds both
  EXPECT_EQ(r.upstream_allocs, 1);
  ReplayConfig exp = make_replay_config("genesis-expandable");
  exp.sim_vmm_cost = tiny;
  const ReplayResult e = replay(t, exp);
  EXPECT_EQ(e.peak_reserved_bytes, 16 * MiB);  // the 8 pages under [0, 15 MiB)
  EXPECT_EQ(e.allocated_after_cleanup, 0);
}

TEST(ReplayTest, FreedMemoryIsReusedNotReserved) {
  TraceBuilder b("test");
  for (std::uintptr_t i = 1; i <= 50; ++i) {
    b.alloc(i, 12 * MiB);
    b.free(i);
  }
  const Trace t = b.finish();
  for (const auto& c : known_replay_configs()) {
    SCOPED_TRACE(c.name);
    ReplayConfig config = make_replay_config(c.name);
    config.options.expandable_segments = memory::AllocatorOptions::Expandable::kOff;
    const ReplayResult r = replay(t, config);
    EXPECT_EQ(r.peak_reserved_bytes, 12 * MiB);
    EXPECT_EQ(r.upstream_allocs, 1);
    EXPECT_EQ(r.peak_live_bytes, 12 * MiB);
  }
}

TEST(ReplayTest, OutOfMemoryIsCountedAndSkipped) {
  TraceBuilder b("test");
  b.alloc(1, 40 * MiB);
  b.alloc(2, 40 * MiB);  // does not fit in 64 MiB: OOM, skipped
  b.free(2);             // a no-op then
  b.alloc(3, 10 * MiB);
  b.free(1);
  b.free(3);
  const Trace t = b.finish();
  EXPECT_EQ(t.peak_live_bytes, 80 * MiB);  // what the trace recorded
  const ReplayResult r = replay(t, classic(64 * MiB));
  EXPECT_EQ(r.ooms, 1u);
  EXPECT_EQ(r.final_stats.num_ooms, 1);
  EXPECT_EQ(r.peak_live_bytes, 50 * MiB);  // what this replay held
  EXPECT_LE(r.peak_reserved_bytes, 64 * MiB);
  EXPECT_EQ(r.allocated_after_cleanup, 0);
  EXPECT_EQ(r.capacity, 64 * MiB);
}

TEST(ReplayTest, UnknownFreesAreNoOpsAndLeftoversAreFreedAfterwards) {
  TraceBuilder b("test");
  b.free(0x999);          // freed before the trace started
  b.alloc(1, 5000);
  b.alloc(2, 7000);       // never freed
  b.free(1);
  b.free(0x999);
  const Trace t = b.finish();
  bool inspected = false;
  ReplayOptions options;
  options.inspect = [&](const memory::CachingAllocator& a) {
    inspected = true;
    EXPECT_EQ(a.stats().allocation_count[0].current, 1);  // before the cleanup
  };
  const ReplayResult r = replay(t, classic(), options);
  EXPECT_TRUE(inspected);
  EXPECT_EQ(r.unknown_frees, 2u);
  EXPECT_EQ(r.live_at_end, 1u);
  EXPECT_EQ(r.final_stats.allocation_count[0].current, 1);
  EXPECT_EQ(r.allocated_after_cleanup, 0);
  EXPECT_EQ(r.peak_live_bytes, 12000u);
}

// The trace's streams are streams of the replay's device: a free block of
// an idle stream serves another before the pool grows, and without lending
// each stream keeps segments of its own.
TEST(ReplayTest, SeveralStreamsShareIdleFreeBlocksOrGetSeparatePools) {
  TraceBuilder b("test");
  b.alloc(1, 100, 0);
  b.free(1, 0);
  b.alloc(2, 100, 0xdeadbeef);
  b.free(2, 0xdeadbeef);
  const Trace t = b.finish();
  ASSERT_EQ(t.streams.size(), 2u);
  const ReplayResult lent = replay(t, classic());
  EXPECT_EQ(lent.upstream_allocs, 1);
  EXPECT_EQ(lent.stream_borrows, 1);
  EXPECT_EQ(lent.peak_reserved_bytes, 2 * MiB);
  ReplayConfig own = classic();
  own.options.stream_borrow = false;
  const ReplayResult separate = replay(t, own);
  EXPECT_EQ(separate.upstream_allocs, 2);
  EXPECT_EQ(separate.stream_borrows, 0);
  EXPECT_EQ(separate.peak_reserved_bytes, 4 * MiB);
}

TEST(ReplayTest, RepeatAndProgress) {
  TraceBuilder b("test");
  for (std::uintptr_t i = 1; i <= 1000; ++i) b.alloc(i, i * 512);
  for (std::uintptr_t i = 1; i <= 1000; ++i) b.free(i);
  const Trace t = b.finish();
  ReplayOptions options;
  options.repeat = 3;
  options.progress_every = 300;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const ReplayResult r = replay(t, classic(), options);
  ASSERT_EQ(r.ns_per_event_runs.size(), 3u);
  std::vector<double> sorted = r.ns_per_event_runs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(r.ns_per_event, sorted[1]);
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(std::uint64_t{6000}, std::uint64_t{6000}));
  EXPECT_EQ(calls.size(), 3u * 7u);  // ceil(2000 / 300) per run
  for (std::size_t i = 1; i < calls.size(); ++i) EXPECT_GT(calls[i].first, calls[i - 1].first);
  options.repeat = 0;
  EXPECT_THROW(replay(t, classic(), options), InvalidArgumentError);
}

TEST(ReplayTest, WarmupRunsAreUntimedAndChangeNothing) {
  TraceBuilder b("test");
  for (std::uintptr_t i = 1; i <= 200; ++i) b.alloc(i, i * 4096);
  for (std::uintptr_t i = 1; i <= 200; i += 2) b.free(i);
  const Trace t = b.finish();
  ReplayOptions options;
  options.repeat = 2;
  int inspected = 0;
  options.inspect = [&](const memory::CachingAllocator&) { ++inspected; };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  options.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const ReplayResult cold = replay(t, classic(), options);
  for (const int warmup : {-1, 3}) {
    options.warmup = warmup;
    inspected = 0;
    calls.clear();
    const ReplayResult warm = replay(t, classic(), options);
    // Only the timed runs count, report and are inspected; the outcome is the same.
    EXPECT_EQ(warm.ns_per_event_runs.size(), 2u) << warmup;
    EXPECT_EQ(inspected, 2) << warmup;
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back(), std::make_pair(std::uint64_t{600}, std::uint64_t{600})) << warmup;
    EXPECT_EQ(warm.peak_live_bytes, cold.peak_live_bytes);
    EXPECT_EQ(warm.peak_reserved_bytes, cold.peak_reserved_bytes);
    EXPECT_EQ(warm.upstream_allocs, cold.upstream_allocs);
    EXPECT_EQ(warm.allocated_after_cleanup, 0u);
  }
  options.warmup = -2;
  EXPECT_THROW(replay(t, classic(), options), InvalidArgumentError);
}

TEST(ReplayTest, InconsistentHandBuiltTraceIsRejected) {
  Trace t;
  t.streams = {0};
  t.num_slots = 2;
  t.events.push_back(TraceEvent{100, 5, 0, TraceOp::kAlloc});  // slot out of range
  EXPECT_THROW(replay(t, classic()), InvalidArgumentError);
  t.events[0].slot = kNullSlot;  // allocs never use the null slot
  EXPECT_THROW(replay(t, classic()), InvalidArgumentError);
  t.events[0].slot = 1;
  t.events[0].stream = 1;  // no such stream
  EXPECT_THROW(replay(t, classic()), InvalidArgumentError);
}

TEST(ReplayConfigTest, KnownNamesAndErrors) {
  std::vector<std::string> names;
  for (const auto& c : known_replay_configs()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"genesis", "genesis-classic", "genesis-expandable",
                                              "genesis-expandable-pages", "genesis-no-tcache"}));
  using E = memory::AllocatorOptions::Expandable;
  EXPECT_EQ(make_replay_config("genesis").options.expandable_segments, E::kAuto);
  EXPECT_TRUE(make_replay_config("genesis").options.thread_cache.is_auto());  // resolved by the allocator
  EXPECT_EQ(make_replay_config("genesis-classic").options.expandable_segments, E::kOff);
  EXPECT_EQ(make_replay_config("genesis-expandable").options.expandable_segments, E::kOn);
  EXPECT_EQ(make_replay_config("genesis-expandable").options.chunk_pages, 0u);  // the upstream's default
  EXPECT_EQ(make_replay_config("genesis-expandable-pages").options.expandable_segments, E::kOn);
  EXPECT_EQ(make_replay_config("genesis-expandable-pages").options.chunk_pages, 1u);
  EXPECT_EQ(make_replay_config("genesis-no-tcache").options.thread_cache, memory::AutoSwitch(false));
  try {
    (void)make_replay_config("pytorch");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("unknown configuration 'pytorch'"), std::string::npos) << e.message();
    for (const auto& n : names) EXPECT_NE(e.message().find(n), std::string::npos) << e.message();
  }
  EXPECT_EQ(parse_replay_device("sim"), ReplayDevice::kSimulated);
  EXPECT_EQ(parse_replay_device("cuda"), ReplayDevice::kCuda);
  EXPECT_THROW(parse_replay_device("gpu"), InvalidArgumentError);
  // More than a simulated device can hold.
  TraceBuilder b("test");
  b.alloc(1, 100);
  EXPECT_THROW(replay(b.finish(), classic(2 * (std::size_t{1} << 40))), InvalidArgumentError);
}

// A random trace: sizes from 1 byte to 48 MiB (mostly small), random
// lifetimes, a few frees of unknown addresses.
Trace random_trace(std::uint32_t seed, int n_allocs) {
  std::mt19937_64 rng(seed);
  TraceBuilder b("random " + std::to_string(seed));
  std::vector<std::uintptr_t> live;
  std::uintptr_t next = 0x10000;
  auto size = [&]() -> std::uint64_t {
    const auto k = rng() % 100;
    if (k < 60) return 1 + rng() % (64 * KiB);
    if (k < 85) return 1 + rng() % (1 * MiB);
    if (k < 97) return 1 * MiB + rng() % (9 * MiB);
    return 10 * MiB + rng() % (38 * MiB);
  };
  for (int i = 0; i < n_allocs; ++i) {
    b.alloc(next, size(), rng() % 8 == 0 ? 1 : 0);
    live.push_back(next);
    next += 0x100000;
    while (!live.empty() && rng() % 100 < 45) {
      const std::size_t j = rng() % live.size();
      b.free(live[j]);
      live[j] = live.back();
      live.pop_back();
    }
    if (rng() % 200 == 0) b.free(1);  // unknown
  }
  // Most are freed at the end; a few stay live.
  for (std::size_t j = 0; j < live.size(); ++j) {
    if (j % 10 != 0) b.free(live[j]);
  }
  return b.finish();
}

// Every block handed out during the replay, checked against every block live
// at that moment (from the allocator's own event history), and the state
// at the end checked for consistency; afterwards nothing stays allocated.
TEST(ReplayPropertyTest, RandomTracesNeverOverlapAndEndAtZero) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const Trace t = random_trace(seed, 1500);
    for (const auto& c : known_replay_configs()) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
      ReplayConfig config = make_replay_config(c.name, ReplayDevice::kSimulated, 4 * GiB);
      config.options.record_events = true;
      config.options.event_capacity_per_thread = 1 << 15;
      ReplayOptions options;
      std::size_t allocs_seen = 0;
      options.inspect = [&](const memory::CachingAllocator& a) {
        EXPECT_TRUE(memory::testing_support::SnapshotConsistent(a.snapshot()));
        memory::testing_support::LiveRanges live;
        for (const memory::MemoryEvent& e : a.events()) {
          if (e.action == memory::EventAction::kAlloc) {
            ++allocs_seen;
            const std::string err = live.insert(e.address, e.block_size);
            ASSERT_TRUE(err.empty()) << err;
          } else if (e.action == memory::EventAction::kFree) {
            const std::string err = live.erase(e.address);
            ASSERT_TRUE(err.empty()) << err;
          }
        }
        EXPECT_EQ(live.size(), t.counts.live_at_end);
      };
      const ReplayResult r = replay(t, config, options);
      EXPECT_EQ(allocs_seen, t.counts.alloc);
      EXPECT_EQ(r.ooms, 0u);
      EXPECT_EQ(r.peak_live_bytes, t.peak_live_bytes);
      EXPECT_GE(r.peak_reserved_bytes, r.peak_live_bytes);
      EXPECT_EQ(r.final_stats.allocation_count[0].current, static_cast<std::int64_t>(t.counts.live_at_end));
      EXPECT_EQ(r.allocated_after_cleanup, 0);
      EXPECT_EQ(r.unknown_frees, t.counts.unknown_frees);
    }
  }
}

// A small device: some allocations fail, the replay goes on, and still
// nothing overlaps and nothing stays allocated.
TEST(ReplayPropertyTest, RandomTracesUnderMemoryPressure) {
  std::uint64_t ooms = 0;
  for (std::uint32_t seed = 11; seed <= 14; ++seed) {
    const Trace t = random_trace(seed, 1500);
    const ReplayResult r = replay(t, classic(256 * MiB));
    SCOPED_TRACE("seed " + std::to_string(seed));
    EXPECT_LE(r.peak_reserved_bytes, 256 * MiB);
    EXPECT_LE(r.peak_live_bytes, t.peak_live_bytes);
    EXPECT_EQ(r.ooms, static_cast<std::uint64_t>(r.final_stats.num_ooms));
    EXPECT_EQ(r.allocated_after_cleanup, 0);
    ooms += r.ooms;
  }
  EXPECT_GT(ooms, 0u) << "the device is too large for this test to exercise out-of-memory";
}

class ReplayRoundTripTest : public testing_support::TempDirTest {};

// Record a program's allocations with the allocator's event history, write
// them as a trace, read it back and replay it: the same peak live bytes.
TEST_F(ReplayRoundTripTest, RecordedHistoryReplaysToSamePeakLive) {
  auto dev = std::make_shared<memory::SimulatedDevice>(8 * GiB);
  memory::AllocatorOptions o;
  o.record_events = true;
  o.event_capacity_per_thread = 1 << 15;
  memory::CachingAllocator a(dev, o);
  std::mt19937 rng(7);
  std::map<void*, std::size_t> live;
  std::uint64_t live_bytes = 0, peak = 0;
  for (int i = 0; i < 3000; ++i) {
    if (live.empty() || rng() % 100 < 55) {
      const std::size_t n = rng() % 4 == 0 ? 1 + rng() % (24 * MiB) : 1 + rng() % (256 * KiB);
      void* p = a.allocate(n);
      live[p] = n;
      live_bytes += n;
      peak = std::max(peak, live_bytes);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      live_bytes -= it->second;
      a.deallocate(it->first);
      live.erase(it);
    }
  }
  const std::vector<memory::MemoryEvent> history = a.events();
  const std::int64_t segments = a.stats().num_upstream_allocs;
  for (auto& [p, n] : live) a.deallocate(p);

  std::vector<std::string> files = {path("rec.csv")};
  if (trace_gzip_supported()) files.push_back(path("rec.csv.gz"));
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    write_trace(f, history);
    const Trace t = read_trace(f);
    EXPECT_EQ(t.peak_live_bytes, peak);
    EXPECT_EQ(t.counts.segment_alloc, static_cast<std::uint64_t>(segments));
    EXPECT_EQ(t.counts.unknown_frees, 0u);
    EXPECT_EQ(t.counts.live_at_end, live.size());
    const ReplayResult r = replay(t, classic());
    EXPECT_EQ(r.peak_live_bytes, peak);
    EXPECT_EQ(r.allocated_after_cleanup, 0);
  }
}

// The bundled PyTorch trace replays completely on the simulated device.
TEST(BundledTraceReplayTest, Gpt2) {
  const std::string p = testing_support::bundled_trace("gpt2_train.trace.csv.gz");
  if (p.empty()) GTEST_SKIP() << "data/traces/gpt2_train.trace.csv.gz not found";
  if (!trace_gzip_supported()) GTEST_SKIP() << "built without zlib";
  const Trace t = read_trace(p);
  const ReplayResult r = replay(t, classic());
  EXPECT_EQ(r.events, 12355u);
  EXPECT_EQ(r.peak_live_bytes, 14'417'617'608ull);
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_GE(r.reserved_per_live, 1.0);
  EXPECT_EQ(r.allocated_after_cleanup, 0);
}

TEST(ReplayReportTest, TableAndReferences) {
  EXPECT_EQ(format_thousands(0), "0");
  EXPECT_EQ(format_thousands(999), "999");
  EXPECT_EQ(format_thousands(1000), "1,000");
  EXPECT_EQ(format_thousands(14417617608ull), "14,417,617,608");
  ReferenceFigures refs;
  refs.label = "measured elsewhere";
  refs.results = {{"PyTorch native", 16'521'363'456ull, 1.146, 1099}, {"other", 4096, 1.5, 0}};

  ReplayResult r;
  r.config = "genesis";
  r.peak_live_bytes = 1000;
  r.peak_reserved_bytes = 2048;
  r.reserved_per_live = 2.048;
  r.ns_per_event = 12.34;
  r.upstream_allocs = 3;
  const std::string table = format_replay_table({r}, refs);
  EXPECT_NE(table.find("configuration"), std::string::npos) << table;
  EXPECT_NE(table.find("genesis"), std::string::npos) << table;
  EXPECT_NE(table.find("2.048"), std::string::npos) << table;
  EXPECT_NE(table.find("2,048"), std::string::npos) << table;
  EXPECT_NE(table.find("measured elsewhere:"), std::string::npos) << table;
  EXPECT_NE(table.find("16,521,363,456"), std::string::npos) << table;
  EXPECT_NE(table.find("1099"), std::string::npos) << table;
  // The row without a time prints "-" in the ns/event column.
  const std::size_t other = table.find("  other");
  ASSERT_NE(other, std::string::npos) << table;
  const std::string other_row = table.substr(other, table.find('\n', other) - other);
  EXPECT_NE(other_row.find("1.500"), std::string::npos) << other_row;
  EXPECT_NE(other_row.find(" -"), std::string::npos) << other_row;
  EXPECT_EQ(format_replay_table({r}).find("measured elsewhere"), std::string::npos);
}

}  // namespace
}  // namespace genesis::debug
