// Multi-threaded stress tests of the caching allocator. Every test name
// contains "Stress" so that the TSan stage of scripts/test.sh runs them.
//
// Iteration counts scale with GENESIS_STRESS_SCALE (see
// tests/support/allocator_test_util.cpp): by default a few seconds each in
// Release on two cores, and well under a minute under the sanitizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/detail/asymmetric_fence.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using namespace testing_support;  // NOLINT

// One live allocation owned by a worker (or waiting in the hand-off queue).
struct Item {
  void* ptr = nullptr;
  CachingAllocator::Block* block = nullptr;  // set when made by allocate_block()
  std::size_t requested = 0;
  std::size_t size = 0;  // bytes registered with LiveRanges
  std::uint64_t tag = 0;  // HostResource test: pattern seed
};

// Items passed between threads: allocated on one, freed on another.
class HandOff {
 public:
  void push(Item it) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(it);
  }
  bool pop(Item* it) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return false;
    *it = q_.front();
    q_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::deque<Item> q_;
};

// Failures found on worker threads: reported once from the main thread (and
// a flag that stops the run early).
class Failures {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < 20) messages_.push_back(what);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream os;
    for (const std::string& m : messages_) os << "  " << m << "\n";
    return os.str();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> messages_;
  std::atomic<bool> failed_{false};
};

// Sizes: mostly small (1 B .. 64 KiB, log-uniform), some medium (.. 4 MiB),
// a few huge (16 .. 64 MiB) when `huge` is allowed.
std::size_t random_size(std::mt19937_64& rng, bool huge, std::size_t medium_max = 4 * MiB) {
  const unsigned r = static_cast<unsigned>(rng() % 1000);
  if (huge && r < 15) return 16 * MiB + rng() % (48 * MiB);
  if (r < 150) return 64 * KiB + rng() % (medium_max - 64 * KiB);
  const int bits = 1 + static_cast<int>(rng() % 16);  // up to 64 KiB
  return 1 + rng() % (std::size_t{1} << bits);
}

// The allocator's own invariant check (Note [Allocator invariants]);
// include_thread_caches only where no other thread uses the allocator.
void check_internal_invariants(const CachingAllocator& a, Failures& f, bool include_thread_caches) {
  try {
    a.check_invariants(include_thread_caches);
  } catch (const Error& e) {
    f.add(e.message());
  }
}

// Invariants that hold at any moment, even while other threads allocate.
void check_live_invariants(CachingAllocator& a, Failures& f) {
  check_internal_invariants(a, f, /*include_thread_caches=*/false);
  const MemoryStats s = a.stats();
  for (int i = 0; i < kNumStatTypes; ++i) {
    const std::int64_t reserved = s.reserved_bytes[i].current;
    const std::int64_t allocated = s.allocated_bytes[i].current;
    if (allocated < 0 || allocated > reserved)
      f.add("allocated " + std::to_string(allocated) + " outside [0, reserved " + std::to_string(reserved) + "]");
    if (s.cached_bytes[i].current != reserved - allocated) f.add("cached != reserved - allocated");
    if (s.allocation_count[i].current < 0) f.add("negative allocation count");
    if (s.active_bytes[i].current < allocated) f.add("active < allocated");
    for (const StatArray* arr : {&s.allocated_bytes, &s.reserved_bytes, &s.segment_count})
      if ((*arr)[i].peak < (*arr)[i].current) f.add("peak below current");
  }
  if (s.reserved_bytes[0].current != s.reserved_bytes[1].current + s.reserved_bytes[2].current)
    f.add("reserved: aggregate != small + large");
  if (s.num_frees > s.num_allocs) f.add("more frees than allocations");
  const auto snap = a.snapshot();
  const ::testing::AssertionResult ok = SnapshotConsistent(snap);
  if (!ok) f.add(std::string("snapshot: ") + ok.message());
  std::size_t seg_bytes = 0;
  for (const SegmentInfo& seg : snap) seg_bytes += seg.size;
  // reserved is read under the same lock in stats() and snapshot() but at two
  // different moments; only the sign of the difference is meaningful here.
  (void)seg_bytes;
}

struct StressConfig {
  int threads = 8;
  int ops_per_thread = 20000;
  int max_live = 24;
  bool thread_cache = true;
  bool huge = true;
  bool record_streams = true;
  bool expandable = false;  // expandable segments (else classic ones)
  std::uint32_t chunk_pages = 0;  // AllocatorOptions::chunk_pages
  std::size_t capacity = 16 * GiB;
  // Mapping priced like CUDA's (a token cost): the auto settings resolve as
  // they do there, chunk_strand_pages among them.
  bool costly_mapping = false;
};

struct StressResult {
  std::int64_t ooms = 0;
  std::int64_t allocs = 0;
  std::int64_t handoffs = 0;
};

// The simulated-device stress: N workers x random sizes x several streams,
// both APIs, cross-thread frees, and a maintenance thread that empties the
// cache, collects garbage, reads stats and snapshots, and completes the
// simulated GPU work.
StressResult run_simulated_stress(const StressConfig& cfg) {
  const SimulatedDevice::VmmCost cost =
      cfg.costly_mapping ? SimulatedDevice::VmmCost::parse("0.001,0.001,0.001") : SimulatedDevice::VmmCost{};
  auto sim = std::make_shared<SimulatedDevice>(cfg.capacity, 0, cost);
  std::vector<StreamId> streams{0};
  for (int i = 0; i < 3; ++i) streams.push_back(sim->create_stream());
  AllocatorOptions opts;
  opts.thread_cache = cfg.thread_cache;
  opts.expandable_segments =
      cfg.expandable ? AllocatorOptions::Expandable::kOn : AllocatorOptions::Expandable::kOff;
  opts.chunk_pages = cfg.chunk_pages;
  auto alloc = std::make_unique<CachingAllocator>(sim, opts);
  CachingAllocator& a = *alloc;

  LiveRanges ranges;
  HandOff handoff;
  Failures failures;
  std::atomic<int> workers_left{cfg.threads};
  std::atomic<std::int64_t> ooms{0}, allocs{0}, handoffs{0};

  auto release = [&](const Item& it) {
    const std::string e = ranges.erase(addr_of(it.ptr));
    if (!e.empty()) failures.add(e);
    if (it.block != nullptr) a.free_block(it.block);
    else a.deallocate(it.ptr);
  };

  auto worker = [&](int index) {
    std::mt19937_64 rng(0x5eed0000u + static_cast<unsigned>(index));
    std::vector<Item> live;
    for (int op = 0; op < cfg.ops_per_thread && !failures.failed(); ++op) {
      const unsigned r = static_cast<unsigned>(rng() % 100);
      if (r < 46 && static_cast<int>(live.size()) < cfg.max_live) {
        const std::size_t n = random_size(rng, cfg.huge && index % 2 == 0);
        const StreamId s = streams[rng() % streams.size()];
        Item it;
        it.requested = n;
        try {
          if (rng() % 2 == 0) {
            it.block = a.allocate_block(n, s);
            it.ptr = it.block->ptr();
            it.size = it.block->size;  // the owner may read its block's size
          } else {
            it.ptr = a.allocate(n, s);
            // allocation_size takes the lock: ask only now and then.
            it.size = rng() % 8 == 0 ? a.allocation_size(it.ptr) : round512(n);
          }
        } catch (const OutOfMemoryError&) {
          ooms.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        allocs.fetch_add(1, std::memory_order_relaxed);
        if (it.ptr == nullptr || addr_of(it.ptr) % 512 != 0) {
          std::ostringstream os;
          os << "allocate(" << n << ", stream " << s << ") returned " << it.ptr;
          failures.add(os.str());
          continue;
        }
        if (it.size < round512(n)) failures.add("block smaller than the rounded request");
        const std::string e = ranges.insert(addr_of(it.ptr), it.size);
        if (!e.empty()) failures.add("overlap: " + e);
        if (cfg.record_streams && rng() % 20 == 0) {
          const StreamId other = streams[rng() % streams.size()];
          a.record_stream(it.ptr, other);
          sim->submit_work(other);
        }
        live.push_back(it);
      } else if (r < 82 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        release(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else if (r < 91 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        handoff.push(live[k]);
        handoffs.fetch_add(1, std::memory_order_relaxed);
        live[k] = live.back();
        live.pop_back();
      } else {
        Item it;
        if (handoff.pop(&it)) release(it);
      }
    }
    for (const Item& it : live) release(it);
    workers_left.fetch_sub(1);
  };

  auto maintenance = [&] {
    std::mt19937_64 rng(99);
    int round = 0;
    while (workers_left.load() > 0 && !failures.failed()) {
      switch (rng() % 8) {
        case 0: a.empty_cache(); break;
        case 1: (void)a.collect_garbage(std::chrono::milliseconds(rng() % 2)); break;
        case 2: sim->complete_all(); break;
        case 3: sim->complete_work(streams[rng() % streams.size()]); break;
        case 4: (void)a.large_allocations(16 * MiB); break;
        case 5: if (++round % 8 == 0) (void)a.memory_summary(); else a.reset_peak_stats(); break;
        default: check_live_invariants(a, failures); break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 200));
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.threads; ++i) threads.emplace_back(worker, i);
  std::thread maint(maintenance);
  for (auto& t : threads) t.join();
  maint.join();
  EXPECT_FALSE(failures.failed()) << "during the run:\n" << failures.report();
  Failures books;  // the internal invariants at each quiescent point
  check_internal_invariants(a, books, true);

  // Quiescent: only hand-off items are live. Check the books, then free.
  std::vector<Item> left;
  for (Item it; handoff.pop(&it);) left.push_back(it);
  sim->complete_all();
  MemoryStats s = a.stats();
  if (std::getenv("GENESIS_STRESS_VERBOSE") != nullptr)
    std::fprintf(stderr, "allocs %lld hits %lld thread hits %lld misses %lld ooms %lld upstream allocs %lld frees %lld "
                 "flushes %lld handoffs %lld peak reserved %lld\n",
                 (long long)s.num_allocs, (long long)s.num_cache_hits, (long long)s.num_thread_cache_hits,
                 (long long)s.num_cache_misses, (long long)s.num_ooms, (long long)s.num_upstream_allocs,
                 (long long)s.num_upstream_frees, (long long)s.num_cache_flushes, (long long)handoffs.load(),
                 (long long)s.reserved_bytes[0].peak);
  std::int64_t live_bytes = 0;
  for (const Item& it : left) {
    EXPECT_TRUE(a.owns(it.ptr));
    live_bytes += static_cast<std::int64_t>(a.allocation_size(it.ptr));
  }
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, static_cast<std::int64_t>(left.size()));
  EXPECT_EQ(s.num_allocs - s.num_frees, static_cast<std::int64_t>(left.size()));
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, live_bytes);
  EXPECT_GE(s.reserved_bytes[kStatAggregate].current, s.allocated_bytes[kStatAggregate].current);
  EXPECT_EQ(s.num_allocs, allocs.load());
  EXPECT_EQ(s.num_cache_hits + s.num_cache_misses, s.num_allocs);
  EXPECT_EQ(s.num_ooms, ooms.load());
  EXPECT_EQ(ranges.size(), left.size());
  auto snap = a.snapshot();
  EXPECT_TRUE(SnapshotConsistent(snap));
  EXPECT_EQ(count_blocks(snap, "allocated"), left.size());
  EXPECT_EQ(count_blocks(snap, "thread_cached"), 0u) << "exited threads keep cached blocks";
  for (const Item& it : left) release(it);
  check_internal_invariants(a, books, true);
  a.empty_cache();
  check_internal_invariants(a, books, true);
  EXPECT_FALSE(books.failed()) << books.report();
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.active_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.reserved_bytes[kStatAggregate].current, 0);
  if (!cfg.expandable) {
    EXPECT_EQ(s.segment_count[kStatAggregate].current, 0);  // expandable: ranges stay reserved
  }
  EXPECT_EQ(s.num_allocs, s.num_frees);
  EXPECT_EQ(sim->bytes_in_use(), 0u);
  EXPECT_EQ(sim->mapped_bytes(), 0u);
  EXPECT_EQ(sim->num_live_allocations(), 0u);
  EXPECT_EQ(sim->outstanding_events(), 0u);
  alloc.reset();
  EXPECT_EQ(sim->num_reserved_ranges(), 0u);
  EXPECT_EQ(sim->num_misuses(), 0u);
  return StressResult{ooms.load(), allocs.load(), handoffs.load()};
}

// Under GENESIS_NO_MEMBARRIER=1 (set by NoMembarrierFallbackInChildProcess)
// the handshake must use the symmetric fallback.
void expect_fence_mode_matches_environment() {
  const char* env = std::getenv("GENESIS_NO_MEMBARRIER");
  if (env != nullptr && env[0] == '1') {
    EXPECT_FALSE(detail::asymmetric_fence_available());
  }
}

TEST(AllocatorStress, SimulatedDeviceMixed) {
  expect_fence_mode_matches_environment();
  StressConfig cfg;
  cfg.ops_per_thread = scaled(60000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
  EXPECT_GT(r.handoffs, 0);
  RecordProperty("ooms", static_cast<int>(r.ooms));
}

TEST(AllocatorStress, SimulatedDeviceMixedExpandable) {
  StressConfig cfg;
  cfg.expandable = true;
  cfg.ops_per_thread = scaled(40000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
}

// Physical chunks of several pages (Note [Physical chunks]): chunks are
// split under blocks taken from free memory while other threads allocate,
// free and release pages; the device counts any chunk cut in two as a misuse.
TEST(AllocatorStress, SimulatedDeviceMixedExpandableChunked) {
  StressConfig cfg;
  cfg.expandable = true;
  cfg.chunk_pages = 4;
  cfg.ops_per_thread = scaled(30000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
}

// Where mapping is costly a chunk may strand pages past a block instead of
// being split (Note [Stranded pages]): a block then lands in a chunk that
// still holds another's pages, and no release may cut or unmap it.
TEST(AllocatorStress, SimulatedDeviceMixedExpandableStrandedChunks) {
  StressConfig cfg;
  cfg.expandable = true;
  cfg.costly_mapping = true;
  cfg.chunk_pages = 8;
  cfg.ops_per_thread = scaled(20000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
}

TEST(AllocatorStress, SimulatedDeviceNoThreadCache) {
  StressConfig cfg;
  cfg.thread_cache = false;
  cfg.ops_per_thread = scaled(40000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
}

// A device small enough that OOMs happen all the time under contention: the
// retry path (waiting for events, reclaiming other threads' caches,
// releasing segments) runs concurrently with everything else.
TEST(AllocatorStress, SimulatedDeviceUnderMemoryPressure) {
  StressConfig cfg;
  cfg.capacity = 256 * MiB;
  cfg.ops_per_thread = scaled(40000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
  RecordProperty("ooms", static_cast<int>(r.ooms));
}

TEST(AllocatorStress, SimulatedDeviceUnderMemoryPressureExpandable) {
  StressConfig cfg;
  cfg.expandable = true;
  cfg.capacity = 256 * MiB;
  cfg.ops_per_thread = scaled(30000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
  RecordProperty("ooms", static_cast<int>(r.ooms));
}

TEST(AllocatorStress, SimulatedDeviceUnderMemoryPressureExpandableChunked) {
  StressConfig cfg;
  cfg.expandable = true;
  cfg.chunk_pages = 4;
  cfg.capacity = 256 * MiB;
  cfg.ops_per_thread = scaled(30000);
  const StressResult r = run_simulated_stress(cfg);
  EXPECT_GT(r.allocs, cfg.ops_per_thread);
  RecordProperty("ooms", static_cast<int>(r.ooms));
}

// Checks the fence mode in a child run with GENESIS_NO_MEMBARRIER=1 (the
// variable is read once per process, so this process cannot switch).
TEST(AllocatorStress, FenceModeMatchesEnvironment) {
  const char* env = std::getenv("GENESIS_NO_MEMBARRIER");
  if (env == nullptr || env[0] != '1')
    GTEST_SKIP() << "checked in the child process of NoMembarrierFallbackInChildProcess";
  EXPECT_FALSE(detail::asymmetric_fence_available());
}

// The symmetric-fence fallback of Note [Thread cache handshake]: the
// membarrier decision is made once per process, so run the mixed stress test
// again in a child process with GENESIS_NO_MEMBARRIER=1.
TEST(AllocatorStress, NoMembarrierFallbackInChildProcess) {
  const char* env = std::getenv("GENESIS_NO_MEMBARRIER");
  if (env != nullptr && env[0] == '1') GTEST_SKIP() << "already the child";
  std::string out;
  const int rc = run_self("AllocatorStress.SimulatedDeviceMixed:AllocatorStress.FenceModeMatchesEnvironment",
                          {"GENESIS_NO_MEMBARRIER=1"}, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 2 tests"), std::string::npos) << out;
}

// Real memory: every thread writes a pattern over each allocation and checks
// it before freeing (also after a hand-off to another thread). Overlapping
// allocations would corrupt each other's patterns; ASan catches overruns.
TEST(AllocatorStress, HostResourcePatterns) {
  auto host = std::make_shared<HostResource>(2 * GiB);
  auto alloc = std::make_unique<CachingAllocator>(host);
  CachingAllocator& a = *alloc;
  const int threads = 8;
  const int ops = scaled(15000);
  const std::size_t medium_max = under_tsan() ? 512 * KiB : 4 * MiB;
  HandOff handoff;
  Failures failures;
  LiveRanges ranges;
  std::atomic<int> workers_left{threads};

  auto fill = [](const Item& it) {
    auto* w = static_cast<std::uint64_t*>(it.ptr);
    const std::size_t words = it.requested / 8;
    for (std::size_t i = 0; i < words; ++i) w[i] = it.tag ^ (i * 0x9E3779B97F4A7C15ull);
    auto* c = static_cast<unsigned char*>(it.ptr);
    for (std::size_t i = words * 8; i < it.requested; ++i) c[i] = static_cast<unsigned char>(it.tag + i);
  };
  auto intact = [](const Item& it) {
    const auto* w = static_cast<const std::uint64_t*>(it.ptr);
    const std::size_t words = it.requested / 8;
    for (std::size_t i = 0; i < words; ++i)
      if (w[i] != (it.tag ^ (i * 0x9E3779B97F4A7C15ull))) return false;
    const auto* c = static_cast<const unsigned char*>(it.ptr);
    for (std::size_t i = words * 8; i < it.requested; ++i)
      if (c[i] != static_cast<unsigned char>(it.tag + i)) return false;
    return true;
  };
  auto release = [&](const Item& it) {
    if (!intact(it)) {
      std::ostringstream os;
      os << "pattern of " << it.ptr << " (" << it.requested << " bytes, tag " << it.tag << ") was overwritten";
      failures.add(os.str());
    }
    const std::string e = ranges.erase(addr_of(it.ptr));
    if (!e.empty()) failures.add(e);
    if (it.block != nullptr) a.free_block(it.block);
    else a.deallocate(it.ptr);
  };

  auto worker = [&](int index) {
    std::mt19937_64 rng(0xabc0u + static_cast<unsigned>(index));
    std::vector<Item> live;
    std::uint64_t counter = 0;
    for (int op = 0; op < ops && !failures.failed(); ++op) {
      const unsigned r = static_cast<unsigned>(rng() % 100);
      if (r < 45 && live.size() < 16) {
        Item it;
        it.requested = random_size(rng, false, medium_max);
        it.tag = (static_cast<std::uint64_t>(index) << 48) | ++counter;
        if (rng() % 2 == 0) {
          it.block = a.allocate_block(it.requested);
          it.ptr = it.block->ptr();
          it.size = it.block->size;
        } else {
          it.ptr = a.allocate(it.requested);
          it.size = round512(it.requested);
        }
        const std::string e = ranges.insert(addr_of(it.ptr), it.size);
        if (!e.empty()) failures.add("overlap: " + e);
        fill(it);
        live.push_back(it);
      } else if (r < 80 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        release(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else if (r < 90 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        handoff.push(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else {
        Item it;
        if (handoff.pop(&it)) release(it);
      }
    }
    for (const Item& it : live) release(it);
    workers_left.fetch_sub(1);
  };
  std::thread maint([&] {
    std::mt19937_64 rng(5);
    while (workers_left.load() > 0 && !failures.failed()) {
      switch (rng() % 4) {
        case 0: a.empty_cache(); break;
        case 1: (void)a.collect_garbage(); break;
        default: check_live_invariants(a, failures); break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 1500));
    }
  });
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker, i);
  for (auto& t : ts) t.join();
  maint.join();
  check_internal_invariants(a, failures, true);
  for (Item it; handoff.pop(&it);) release(it);
  check_internal_invariants(a, failures, true);
  EXPECT_FALSE(failures.failed()) << failures.report();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.num_allocs, s.num_frees);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(host->bytes_in_use(), 0u);
}

// Threads come and go while another thread empties the cache and reads
// statistics: thread caches are created and retired concurrently with
// reclaims, and every counter of an exited thread survives it. (Default
// options: expandable segments on the simulated device.)
TEST(AllocatorStress, ThreadChurn) {
  auto sim = std::make_shared<SimulatedDevice>(4 * GiB);
  // On the heap: TSan identifies mutexes by address, and a stack slot reused
  // by a later test would inherit this allocator's lock-order history.
  auto owner = std::make_unique<CachingAllocator>(sim);
  CachingAllocator& a = *owner;
  std::atomic<bool> done{false};
  Failures failures;
  std::atomic<std::int64_t> allocs{0};
  std::thread maint([&] {
    std::mt19937_64 rng(11);
    while (!done.load()) {
      if (rng() % 2 == 0) a.empty_cache();
      else check_live_invariants(a, failures);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  const int waves = scaled(150);
  for (int w = 0; w < waves; ++w) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([&, seed = w * 16 + t] {
        std::mt19937_64 rng(static_cast<unsigned>(seed));
        std::vector<void*> live;
        for (int i = 0; i < 1000; ++i) {
          if (live.size() < 8 && rng() % 3 != 0) {
            live.push_back(a.allocate(random_size(rng, false, 2 * MiB)));
            allocs.fetch_add(1, std::memory_order_relaxed);
          } else if (!live.empty()) {
            a.deallocate(live.back());
            live.pop_back();
          }
        }
        for (void* p : live) a.deallocate(p);
      });
    }
    for (auto& t : ts) t.join();
    if (w % 16 == 0) check_internal_invariants(a, failures, true);  // the maintenance thread takes no cache
  }
  done.store(true);
  maint.join();
  EXPECT_FALSE(failures.failed()) << failures.report();
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_allocs, allocs.load());
  EXPECT_EQ(s.num_frees, allocs.load());
  EXPECT_EQ(s.num_cache_hits + s.num_cache_misses, s.num_allocs);
  EXPECT_EQ(s.allocation_count[kStatAggregate].current, 0);
  EXPECT_EQ(s.allocated_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(s.requested_bytes[kStatAggregate].current, 0);
  EXPECT_EQ(count_blocks(a.snapshot(), "thread_cached"), 0u);
  a.empty_cache();
  EXPECT_EQ(sim->bytes_in_use(), 0u);
}

// Allocators created and destroyed while long-lived threads keep stale
// thread-local slots for the dead ones; more allocators than thread-cache
// slots at once (the extra ones run without thread caches).
TEST(AllocatorStress, ManyAllocatorsAndThreadReuse) {
  const int rounds = scaled(30);
  const int kAllocators = detail::kMaxAllocatorSlots + 6;
  std::vector<std::shared_ptr<SimulatedDevice>> sims;
  for (int i = 0; i < 4; ++i) sims.push_back(std::make_shared<SimulatedDevice>(1 * GiB, i));
  std::mutex mu;
  std::vector<std::unique_ptr<CachingAllocator>> allocators;
  std::atomic<int> round_started{-1};
  std::atomic<int> finished{0};
  const int threads = 4;
  Failures failures;
  auto worker = [&](int index) {
    std::mt19937_64 rng(static_cast<unsigned>(index));
    for (int r = 0; r < rounds; ++r) {
      while (round_started.load() < r) std::this_thread::yield();
      std::vector<CachingAllocator*> mine;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& a : allocators) mine.push_back(a.get());
      }
      for (int i = 0; i < 40; ++i) {
        CachingAllocator* a = mine[rng() % mine.size()];
        void* p = a->allocate(1 + rng() % (256 * KiB));
        void* q = a->allocate(1 + rng() % 4096);
        if (!a->owns(p) || !a->owns(q)) failures.add("allocation not owned by its allocator");
        a->deallocate(q);
        a->deallocate(p);
      }
      finished.fetch_add(1);
      while (finished.load() < (r + 1) * threads) std::this_thread::yield();
    }
  };
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) ts.emplace_back(worker, i);
  for (int r = 0; r < rounds; ++r) {
    // Allocators are made and destroyed outside `mu`: the registry lock is
    // taken inside, and holding a test lock around it would only teach TSan
    // a lock order that the allocator itself never uses.
    std::vector<std::unique_ptr<CachingAllocator>> fresh;
    AllocatorOptions o;
    o.event_capacity_per_thread = 16;  // each allocator otherwise allocates a 3.5 MiB event ring up front
    const int n = r % 2 == 0 ? kAllocators : 3;
    for (int i = 0; i < n; ++i) fresh.push_back(std::make_unique<CachingAllocator>(sims[i % sims.size()], o));
    {
      std::lock_guard<std::mutex> lock(mu);
      allocators.swap(fresh);
    }
    fresh.clear();  // the previous round's, with the workers' caches
    round_started.store(r);
    while (finished.load() < (r + 1) * threads) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& a : allocators) {
      const MemoryStats s = a->stats();
      if (s.allocation_count[kStatAggregate].current != 0) failures.add("live allocations after a round");
      if (s.num_allocs != s.num_frees) failures.add("allocs != frees after a round");
      check_internal_invariants(*a, failures, true);  // the workers wait for the next round
    }
  }
  for (auto& t : ts) t.join();
  allocators.clear();
  EXPECT_FALSE(failures.failed()) << failures.report();
  for (auto& s : sims) {
    EXPECT_EQ(s->bytes_in_use(), 0u);
    EXPECT_EQ(s->num_misuses(), 0u);
  }
}

}  // namespace
}  // namespace genesis::memory
