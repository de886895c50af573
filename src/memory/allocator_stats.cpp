// Caching allocator: statistics of the arena, summaries and snapshots.
// How the numbers are kept: Note [Statistics] in
// genesis/memory/detail/allocator_statistics.h.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using genesis::detail::format_address;

using detail::Block;
using detail::BlockState;
using detail::Segment;
using detail::ThreadCache;

MemoryStats detail::Arena::stats_locked() const {
  MemoryStats s = stats_.report(caches_, pool_.inactive_split());
  std::size_t largest = 0;
  if (expandable_.segments().empty()) {
    for (int p = 0; p < detail::kNumPools; ++p) largest = std::max(largest, pool_.free_index(p).largest());
  } else {
    // Address space of an expandable segment is not memory: count the mapped
    // pages inside each free block.
    for (int p = 0; p < detail::kNumPools; ++p)
      pool_.free_index(p).for_each([&](const Block* b) { largest = std::max(largest, expandable_.mapped_in(b)); });
  }
  s.largest_free_block = largest;
  s.memory_limit = memory_limit_ == SIZE_MAX ? 0 : memory_limit_;
  s.cache_limit = options_.cache_size_limit == SIZE_MAX ? 0 : options_.cache_size_limit;
  return s;
}

void detail::Arena::reset_peak_stats_arena() {
  Lock lock(mutex_);
  stats_.reset_peaks(caches_, pool_.inactive_split());
}

void detail::Arena::reset_memory_stats_arena(bool peaks) {
  Lock lock(mutex_);
  stats_.reset(caches_, pool_.inactive_split(), peaks);
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
  std::snprintf(line, sizeof line, "| %-73s |\n", ("Genesis memory summary: " + arena0_.upstream_->name()).c_str());
  os << line;
  os << thin;
  std::snprintf(line, sizeof line, "| %-26s | %10s | %10s | %10s | %10s |\n", "Metric", "Cur Usage", "Peak Usage",
                "Tot Alloc", "Tot Freed");
  os << line << rule;
  auto bytes_rows = [&](const char* name, const StatArray& a) {
    static const char* sub[3] = {"", "  from small pool", "  from large pool"};
    for (int i = 0; i < 3; ++i) {
      std::string label = i == 0 ? std::string(name) : std::string(sub[i]);
      std::snprintf(line, sizeof line, "| %-26s | %10s | %10s | %10s | %10s |\n", label.c_str(),
                    fmt_bytes_cell(a[i].current).c_str(), fmt_bytes_cell(a[i].peak).c_str(),
                    fmt_bytes_cell(a[i].allocated).c_str(), fmt_bytes_cell(a[i].freed).c_str());
      os << line;
    }
    os << thin;
  };
  auto count_rows = [&](const char* name, const StatArray& a) {
    static const char* sub[3] = {"", "  from small pool", "  from large pool"};
    for (int i = 0; i < 3; ++i) {
      std::string label = i == 0 ? std::string(name) : std::string(sub[i]);
      std::snprintf(line, sizeof line, "| %-26s | %10lld | %10lld | %10s | %10s |\n", label.c_str(),
                    static_cast<long long>(a[i].current), static_cast<long long>(a[i].peak),
                    std::to_string(a[i].allocated).c_str(), std::to_string(a[i].freed).c_str());
      os << line;
    }
    os << thin;
  };
  bytes_rows("Allocated memory", s.allocated_bytes);
  bytes_rows("Active memory", s.active_bytes);
  bytes_rows("Requested memory", s.requested_bytes);
  bytes_rows("Reserved memory", s.reserved_bytes);
  bytes_rows("Cached (reserved-alloc)", s.cached_bytes);
  bytes_rows("Non-releasable memory", s.inactive_split_bytes);
  count_rows("Allocations", s.allocation_count);
  count_rows("Segments", s.segment_count);
  count_rows("Non-releasable allocs", s.inactive_split_count);
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
  std::snprintf(line, sizeof line, "| %-26s | %46lld |\n", "Blocks lent across streams",
                static_cast<long long>(s.num_stream_borrows));
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46lld |\n", "Out-of-memory errors", static_cast<long long>(s.num_ooms));
  os << line;
  std::snprintf(line, sizeof line, "| %-26s | %46s |\n", "Largest free cached block",
                genesis::detail::format_bytes(s.largest_free_block).c_str());
  os << line << rule;
  return os.str();
}

std::vector<SegmentInfo> detail::Arena::snapshot_arena() const {  // mutex_ held
  std::vector<SegmentInfo> out;
  for (const Segment* seg = pool_.segments(); seg != nullptr; seg = seg->next_seg) {
    SegmentInfo si;
    si.address = seg->addr;
    si.size = seg->size;
    si.pool = seg->pool == detail::kSmallPool ? "small" : "large";
    si.stream = seg->stream;
    si.expandable = seg->expandable;
    si.mapped_bytes = seg->expandable ? seg->mapped_bytes : seg->size;
    if (seg->expandable) {
      const std::size_t page = expandable_.page_size();
      for (std::size_t i = 0; i < seg->mapped_limit;) {
        if (seg->mapped[i] == 0) {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < seg->mapped_limit && seg->mapped[j] != 0) ++j;
        si.mapped_ranges.emplace_back(seg->addr + i * page, (j - i) * page);
        i = j;
      }
    }
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
    a.location = format_address(b.addr);
  }
  return a;
}

}  // namespace

std::optional<AllocationInfo> CachingAllocator::allocation_info(const void* ptr) const {
  std::optional<AllocationInfo> out;
  arenas_.with_live_block(reinterpret_cast<std::uintptr_t>(ptr), [&](const Block& b) { out = allocation_info_of(b); });
  return out;
}

std::vector<AllocationInfo> detail::Arena::large_allocations_arena(std::size_t min_size) const {
  std::vector<AllocationInfo> out;
  Lock lock(mutex_);
  for (const Segment* seg = pool_.segments(); seg != nullptr; seg = seg->next_seg) {
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
