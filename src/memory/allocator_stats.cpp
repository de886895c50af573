// Caching allocator: statistics, summaries and snapshots (SPEC M2).
// See Note [Statistics] in caching_allocator.cpp for how the numbers are kept.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using detail::Block;
using detail::BlockState;
using detail::Segment;
using detail::ThreadCache;

double MemoryStats::cache_hit_rate() const noexcept {
  return num_allocs > 0 ? static_cast<double>(num_cache_hits) / static_cast<double>(num_allocs) : 0.0;
}

double MemoryStats::fragmentation_ratio() const noexcept {
  const auto reserved = reserved_bytes[kStatAggregate].current;
  const auto allocated = allocated_bytes[kStatAggregate].current;
  return reserved > 0 ? static_cast<double>(reserved - allocated) / static_cast<double>(reserved) : 0.0;
}

namespace {

// Current values summed over the pool and every thread cache.
struct Current {
  std::int64_t allocated[3] = {}, requested[3] = {}, reserved[3] = {}, active[3] = {};
  std::int64_t inactive[3] = {}, inactive_count[3] = {}, cached[3] = {}, allocations[3] = {}, segments[3] = {};
  std::int64_t allocs_cum[3] = {}, frees_cum[3] = {}, total_alloc_cum[3] = {};
  std::int64_t thread_hits_cum = 0;
};

void fill_aggregate(std::int64_t (&v)[3]) { v[0] = v[1] + v[2]; }

}  // namespace

// Declared here rather than in the header: only this file and the pool need it.
static Current current_values(const std::vector<ThreadCache*>& caches, const std::int64_t* out_pool,
                              const auto& counters, const std::int64_t* retired_allocs,
                              const std::int64_t* retired_frees, const std::int64_t* retired_requested,
                              const std::int64_t* retired_total) {
  Current c;
  for (int p = 0; p < detail::kNumPools; ++p) {
    std::int64_t tc_cached = 0, tc_blocks_allocs = 0, tc_frees = 0, tc_req = 0, tc_total = 0;
    for (const ThreadCache* tc : caches) {
      tc_cached += tc->cached_bytes[p].get();
      tc_blocks_allocs += tc->num_allocs[p].get();
      tc_frees += tc->num_frees[p].get();
      tc_req += tc->requested_delta[p].get();
      tc_total += tc->total_allocated[p].get();
    }
    // Allocations served by a thread cache are all hits, including those of
    // threads that exited (folded into retired_allocs by retire_thread_cache):
    // without them num_cache_hits dropped when a thread exited, and could go
    // negative after reset_memory_stats().
    c.thread_hits_cum += tc_blocks_allocs + retired_allocs[p];
    const int i = 1 + p;
    c.allocated[i] = out_pool[p] - tc_cached;
    c.requested[i] = counters.requested[p] + tc_req + retired_requested[p];
    c.reserved[i] = counters.reserved[p];
    c.active[i] = c.allocated[i] + counters.pending_bytes[p];
    c.inactive[i] = counters.inactive_split_bytes[p];
    c.inactive_count[i] = counters.inactive_split_count[p];
    c.cached[i] = c.reserved[i] - c.allocated[i];
    c.segments[i] = counters.segments[p];
    c.allocs_cum[i] = counters.num_allocs[p] + tc_blocks_allocs + retired_allocs[p];
    c.frees_cum[i] = counters.num_frees[p] + tc_frees + retired_frees[p];
    c.allocations[i] = c.allocs_cum[i] - c.frees_cum[i];
    c.total_alloc_cum[i] = counters.total_allocated[p] + tc_total + retired_total[p];
  }
  for (auto* v : {&c.allocated, &c.requested, &c.reserved, &c.active, &c.inactive, &c.inactive_count, &c.cached,
                  &c.allocations, &c.segments, &c.allocs_cum, &c.frees_cum, &c.total_alloc_cum})
    fill_aggregate(*v);
  return c;
}

// Raises every peak to at least the current value.
template <typename PeaksT>
static void fold_peaks(PeaksT& peaks, const Current& c) {
  for (int i = 0; i < 3; ++i) {
    peaks.allocated[i] = std::max(peaks.allocated[i], c.allocated[i]);
    peaks.reserved[i] = std::max(peaks.reserved[i], c.reserved[i]);
    peaks.active[i] = std::max(peaks.active[i], c.active[i]);
    peaks.requested[i] = std::max(peaks.requested[i], c.requested[i]);
    peaks.cached[i] = std::max(peaks.cached[i], c.cached[i]);
    peaks.segments[i] = std::max(peaks.segments[i], c.segments[i]);
    peaks.allocations[i] = std::max(peaks.allocations[i], c.allocations[i]);
    peaks.inactive_split[i] = std::max(peaks.inactive_split[i], c.inactive[i]);
  }
}

#define GENESIS_CURRENT_VALUES()                                                                        \
  ([&] {                                                                                               \
    std::int64_t out_pool[detail::kNumPools];                                                          \
    for (int p = 0; p < detail::kNumPools; ++p) out_pool[p] = out_bytes_pool_[p].load(std::memory_order_relaxed); \
    return current_values(caches_, out_pool, counters_, retired_allocs_, retired_frees_, retired_requested_, \
                          retired_total_allocated_);                                                   \
  }())

// At thread exit (retire_thread_cache): folds the exact sums over every
// thread cache into the peaks, and moves the exited thread's share into the
// hot path's bases.
void CachingAllocator::update_peaks_locked() {
  fold_peaks(peaks_, GENESIS_CURRENT_VALUES());
  for (int p = 0; p < detail::kNumPools; ++p) store_hot_bases(static_cast<detail::PoolId>(p));
}

MemoryStats CachingAllocator::stats_locked() const {
  const Current c = GENESIS_CURRENT_VALUES();
  MemoryStats s;
  std::int64_t peak_alloc[3];
  for (int i = 0; i < 3; ++i) {
    peak_alloc[i] = std::max(peaks_.allocated[i], c.allocated[i]);
    for (const ThreadCache* tc : caches_) {
      peak_alloc[i] = std::max(peak_alloc[i], tc->peak_candidate[i].get());
      peaks_.requested[i] = std::max(peaks_.requested[i], tc->peak_requested_candidate[i].get());
      peaks_.allocations[i] = std::max(peaks_.allocations[i], tc->peak_count_candidate[i].get());
    }
    peaks_.allocated[i] = peak_alloc[i];
  }
  fold_peaks(peaks_, c);  // what this read observes (monotone across reads)
  for (int i = 0; i < 3; ++i) {
    auto set = [&](Stat& st, std::int64_t cur, std::int64_t peak) {
      st.current = cur;
      st.peak = std::max(peak, cur);
    };
    set(s.allocated_bytes[i], c.allocated[i], peak_alloc[i]);
    s.allocated_bytes[i].allocated = c.total_alloc_cum[i] - baseline_.total_allocated[i];
    s.allocated_bytes[i].freed =
        s.allocated_bytes[i].allocated - (c.allocated[i] - baseline_.allocated_bytes[i]);
    set(s.requested_bytes[i], c.requested[i], peaks_.requested[i]);
    set(s.reserved_bytes[i], c.reserved[i], peaks_.reserved[i]);
    const std::int64_t ra = i == 0 ? counters_.reserved_allocated[0] + counters_.reserved_allocated[1]
                                   : counters_.reserved_allocated[i - 1];
    const std::int64_t rf = i == 0 ? counters_.reserved_freed[0] + counters_.reserved_freed[1]
                                   : counters_.reserved_freed[i - 1];
    s.reserved_bytes[i].allocated = ra - baseline_.reserved_allocated[i];
    s.reserved_bytes[i].freed = rf - baseline_.reserved_freed[i];
    set(s.active_bytes[i], c.active[i], std::max(peaks_.active[i], peak_alloc[i]));
    set(s.inactive_split_bytes[i], c.inactive[i], peaks_.inactive_split[i]);
    set(s.cached_bytes[i], c.cached[i], peaks_.cached[i]);
    set(s.allocation_count[i], c.allocations[i], peaks_.allocations[i]);
    s.allocation_count[i].allocated = c.allocs_cum[i] - baseline_.allocs[i];
    s.allocation_count[i].freed = c.frees_cum[i] - baseline_.frees[i];
    set(s.segment_count[i], c.segments[i], peaks_.segments[i]);
    set(s.inactive_split_count[i], c.inactive_count[i], c.inactive_count[i]);
  }
  s.num_allocs = c.allocs_cum[0] - baseline_.num_allocs;
  s.num_frees = c.frees_cum[0] - baseline_.num_frees;
  s.num_thread_cache_hits = c.thread_hits_cum - baseline_.num_thread_hits;
  s.num_cache_hits = counters_.num_hits + c.thread_hits_cum - baseline_.num_hits;
  s.num_cache_misses = counters_.num_misses - baseline_.num_misses;
  s.num_ooms = counters_.num_ooms - baseline_.num_ooms;
  s.num_upstream_allocs = counters_.num_upstream_allocs - baseline_.num_upstream_allocs;
  s.num_upstream_frees = counters_.num_upstream_frees - baseline_.num_upstream_frees;
  s.num_upstream_failures = counters_.num_upstream_failures - baseline_.num_upstream_failures;
  s.num_cache_flushes = counters_.num_cache_flushes - baseline_.num_cache_flushes;
  s.total_allocated = s.allocated_bytes[0].allocated;
  std::size_t largest = 0;
  if (expandable_segments_.empty()) {
    for (const auto& index : free_) largest = std::max(largest, index.largest());
  } else {
    // Address space of an expandable segment is not memory: count the mapped
    // pages inside each free block.
    for (const auto& index : free_) index.for_each([&](const Block* b) { largest = std::max(largest, mapped_in(b)); });
  }
  s.largest_free_block = largest;
  s.memory_limit = memory_limit_ == SIZE_MAX ? 0 : memory_limit_;
  s.cache_limit = options_.cache_size_limit == SIZE_MAX ? 0 : options_.cache_size_limit;
  return s;
}


void CachingAllocator::reset_peak_stats_arena() {
  Lock lock(mutex_);
  const Current c = GENESIS_CURRENT_VALUES();
  for (int i = 0; i < 3; ++i) {
    peaks_.allocated[i] = c.allocated[i];
    peaks_.reserved[i] = c.reserved[i];
    peaks_.active[i] = c.active[i];
    peaks_.requested[i] = c.requested[i];
    peaks_.cached[i] = c.cached[i];
    peaks_.segments[i] = c.segments[i];
    peaks_.allocations[i] = c.allocations[i];
    peaks_.inactive_split[i] = c.inactive[i];
    // A racing owner may overwrite these with fresh (valid) candidates.
    for (ThreadCache* tc : caches_) {
      tc->peak_candidate[i].set(c.allocated[i]);
      tc->peak_requested_candidate[i].set(c.requested[i]);
      tc->peak_count_candidate[i].set(c.allocations[i]);
    }
  }
}

void CachingAllocator::reset_memory_stats_arena() {
  {
    Lock lock(mutex_);
    const Current c = GENESIS_CURRENT_VALUES();
    baseline_.num_allocs = c.allocs_cum[0];
    baseline_.num_frees = c.frees_cum[0];
    baseline_.num_thread_hits = c.thread_hits_cum;
    baseline_.num_hits = counters_.num_hits + c.thread_hits_cum;
    baseline_.num_misses = counters_.num_misses;
    baseline_.num_ooms = counters_.num_ooms;
    baseline_.num_upstream_allocs = counters_.num_upstream_allocs;
    baseline_.num_upstream_frees = counters_.num_upstream_frees;
    baseline_.num_upstream_failures = counters_.num_upstream_failures;
    baseline_.num_cache_flushes = counters_.num_cache_flushes;
    for (int i = 0; i < 3; ++i) {
      baseline_.total_allocated[i] = c.total_alloc_cum[i];
      baseline_.allocated_bytes[i] = c.allocated[i];
      baseline_.allocs[i] = c.allocs_cum[i];
      baseline_.frees[i] = c.frees_cum[i];
      baseline_.reserved_allocated[i] = i == 0 ? counters_.reserved_allocated[0] + counters_.reserved_allocated[1]
                                               : counters_.reserved_allocated[i - 1];
      baseline_.reserved_freed[i] = i == 0 ? counters_.reserved_freed[0] + counters_.reserved_freed[1]
                                           : counters_.reserved_freed[i - 1];
    }
  }
  reset_peak_stats_arena();
}

namespace {

std::string fmt_bytes_cell(std::int64_t v) {
  if (v >= 0) return genesis::detail::format_bytes(static_cast<unsigned long long>(v));
  // insert(), not "-" + string: gcc 12 warns (-Wrestrict, a false positive)
  // about the inlined operator+ here.
  std::string s = genesis::detail::format_bytes(0ULL - static_cast<unsigned long long>(v));  // no overflow at INT64_MIN
  s.insert(s.begin(), '-');
  return s;
}

}  // namespace

std::string CachingAllocator::memory_summary() const {
  const MemoryStats s = stats();
  std::ostringstream os;
  char line[160];
  const char* rule = "|===========================================================================|\n";
  const char* thin = "|---------------------------------------------------------------------------|\n";
  os << rule;
  std::snprintf(line, sizeof line, "| %-73s |\n", ("Genesis memory summary: " + upstream_->name()).c_str());
  os << line;
  os << thin;
  std::snprintf(line, sizeof line, "| %-26s | %10s | %10s | %10s | %10s |\n", "Metric", "Cur Usage", "Peak Usage",
                "Tot Alloc", "Tot Freed");
  os << line << rule;
  auto bytes_rows = [&](const char* name, const StatArray& a, bool totals) {
    static const char* sub[3] = {"", "  from small pool", "  from large pool"};
    for (int i = 0; i < 3; ++i) {
      std::string label = i == 0 ? std::string(name) : std::string(sub[i]);
      std::snprintf(line, sizeof line, "| %-26s | %10s | %10s | %10s | %10s |\n", label.c_str(),
                    fmt_bytes_cell(a[i].current).c_str(), fmt_bytes_cell(a[i].peak).c_str(),
                    totals ? fmt_bytes_cell(a[i].allocated).c_str() : "", totals ? fmt_bytes_cell(a[i].freed).c_str() : "");
      os << line;
    }
    os << thin;
  };
  auto count_rows = [&](const char* name, const StatArray& a, bool totals) {
    static const char* sub[3] = {"", "  from small pool", "  from large pool"};
    for (int i = 0; i < 3; ++i) {
      std::string label = i == 0 ? std::string(name) : std::string(sub[i]);
      std::snprintf(line, sizeof line, "| %-26s | %10lld | %10lld | %10s | %10s |\n", label.c_str(),
                    static_cast<long long>(a[i].current), static_cast<long long>(a[i].peak),
                    totals ? std::to_string(a[i].allocated).c_str() : "", totals ? std::to_string(a[i].freed).c_str() : "");
      os << line;
    }
    os << thin;
  };
  bytes_rows("Allocated memory", s.allocated_bytes, true);
  bytes_rows("Active memory", s.active_bytes, false);
  bytes_rows("Requested memory", s.requested_bytes, false);
  bytes_rows("Reserved memory", s.reserved_bytes, true);
  bytes_rows("Cached (reserved-alloc)", s.cached_bytes, false);
  bytes_rows("Non-releasable memory", s.inactive_split_bytes, false);
  count_rows("Allocations", s.allocation_count, true);
  count_rows("Segments", s.segment_count, false);
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Cache hit rate",
                (std::to_string(s.cache_hit_rate() * 100.0).substr(0, 6) + " %").c_str());
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Fragmentation",
                (std::to_string(s.fragmentation_ratio() * 100.0).substr(0, 6) + " %").c_str());
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Allocs / frees",
                (std::to_string(s.num_allocs) + " / " + std::to_string(s.num_frees)).c_str());
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46lld |\n", "Thread-cache hits",
                static_cast<long long>(s.num_thread_cache_hits));
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Upstream allocs / frees",
                (std::to_string(s.num_upstream_allocs) + " / " + std::to_string(s.num_upstream_frees)).c_str());
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46lld |\n", "Out-of-memory errors", static_cast<long long>(s.num_ooms));
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Largest free cached block",
                genesis::detail::format_bytes(s.largest_free_block).c_str());
  os << line << rule;
  return os.str();
}

std::vector<SegmentInfo> CachingAllocator::snapshot_arena() const {  // mutex_ held
  std::vector<SegmentInfo> out;
  for (const Segment* seg = segments_; seg != nullptr; seg = seg->next_seg) {
    SegmentInfo si;
    si.address = seg->addr;
    si.size = seg->size;
    si.pool = seg->pool == detail::kSmallPool ? "small" : "large";
    si.stream = seg->stream;
    si.expandable = seg->expandable;
    si.mapped_bytes = seg->expandable ? seg->mapped_bytes : seg->size;
    for (const Block* b = seg->first; b != nullptr; b = b->next) {
      BlockInfo bi;
      bi.address = b->addr;
      bi.size = b->size;
      bi.stream = b->stream;
      switch (b->load_state()) {
        case BlockState::kAllocated:
          bi.state = "allocated";
          // requested is written by the owner on the hot path; read it only
          // for allocated blocks, where it is stable until the next free.
          bi.requested = b->get_requested();
          si.allocated_bytes += b->size;
          break;
        case BlockState::kFree: bi.state = "free"; break;
        case BlockState::kThreadCached: bi.state = "thread_cached"; break;
        case BlockState::kPending: bi.state = "pending"; break;
        case BlockState::kDead: bi.state = "dead"; break;
      }
      si.blocks.push_back(std::move(bi));
    }
    out.push_back(std::move(si));
  }
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

namespace {

AllocationInfo allocation_info_of(const Block& b) {
  AllocationInfo a;
  a.address = b.addr;
  a.size = b.size;
  a.requested = b.get_requested();
  a.stream = b.stream;
  a.alloc_time_ns = b.alloc_time_ns;
  if (b.get_location() != nullptr) {
    a.location = b.get_location();
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, b.addr);
    a.location = buf;
  }
  return a;
}

}  // namespace

std::optional<AllocationInfo> CachingAllocator::allocation_info(const void* ptr) const {
  std::optional<AllocationInfo> out;
  with_live_block(reinterpret_cast<std::uintptr_t>(ptr), [&](const Block& b) { out = allocation_info_of(b); });
  return out;
}

std::vector<AllocationInfo> CachingAllocator::large_allocations_arena(std::size_t min_size) const {
  std::vector<AllocationInfo> out;
  Lock lock(mutex_);
  for (const Segment* seg = segments_; seg != nullptr; seg = seg->next_seg) {
    for (const Block* b = seg->first; b != nullptr; b = b->next) {
      if (b->load_state() != BlockState::kAllocated || b->size < min_size) continue;
      out.push_back(allocation_info_of(*b));
    }
  }
  std::sort(out.begin(), out.end(), [](const AllocationInfo& a, const AllocationInfo& b) {
    return a.size != b.size ? a.size > b.size : a.address < b.address;
  });
  return out;
}

const char* intern_location(const std::string& text) {
  static std::mutex mu;
  static auto* strings = new std::set<std::string>();  // process lifetime, see header
  std::lock_guard<std::mutex> lock(mu);
  return strings->insert(text).first->c_str();
}

}  // namespace genesis::memory
