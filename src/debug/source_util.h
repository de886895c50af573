// Helpers shared by the memory sources (memory_source.h): figures from an
// allocator, site grouping, waiting on the steady clock, device-id errors.
// Internal to src/debug.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/debug/memory_source.h"
#include "genesis/memory/publish.h"
#include "genesis/memory/stats.h"

namespace genesis::debug::source_util {

/// Nanoseconds of the steady clock (the live sources' clock).
std::uint64_t steady_now_ns() noexcept;

/// Sleeps until the steady clock reaches `time_ns`, waking at least every
/// 50 ms to look at `stop` (and at `keep_going()`, when given, which returns
/// false to end the wait early). Returns false when stopped or ended early.
template <class F>
bool sleep_until_steady(std::uint64_t time_ns, const StopFlag& stop, F&& keep_going);
bool sleep_until_steady(std::uint64_t time_ns, const StopFlag& stop);

/// Sleeps for at most `ns` nanoseconds (cut to kStopCheckNs).
void sleep_ns(std::uint64_t ns);

/// The longest sleep between two looks at a stop flag.
inline constexpr std::uint64_t kStopCheckNs = 50'000'000;

/// MemorySample::peak_allocated / peak_reserved: the highest values since
/// the source opened, from the allocator's own peaks (which see what no
/// sample caught) where they are known to lie after the opening. An
/// allocator's peak may predate the source; it does not once it has changed
/// since the first look (a new high, or reset_peak_stats(): both set it to a
/// value reached after the opening). Until then the highest current value
/// sampled stands in. Not thread-safe: one per device, under the source's
/// own serialisation.
class PeakTracker {
 public:
  /// Updates the tracker with one reading; writes the peaks into `s`.
  void observe(MemorySample& s, std::uint64_t allocated_peak, std::uint64_t reserved_peak);
  /// For an allocator no older than the source (a trace's, a child's): all
  /// its peaks count.
  void from_zero() noexcept { started_ = true; }

 private:
  struct One {
    bool moved = false;
    std::uint64_t base = 0;  // the allocator's peak at the first look
    std::uint64_t best = 0;  // the answer so far (monotone)
    std::uint64_t update(bool first, std::uint64_t current, std::uint64_t peak);
  };
  bool started_ = false;
  One allocated_, reserved_;
};

/// The exact fields of `sample` from an allocator's statistics (allocated,
/// reserved, active, cached, largest free block, OOMs, allocations; used =
/// reserved; the peaks through `peaks`), exact = true.
void fill_from_stats(MemorySample& sample, const memory::MemoryStats& stats, PeakTracker& peaks);

/// Blocks of a snapshot that are not allocated (free, cached by a thread,
/// pending other streams).
std::uint64_t count_free_blocks(const std::vector<memory::SegmentInfo>& segments);

/// Live allocations grouped by site (memory::group_by_site) as SiteStats.
std::vector<SiteStat> sites_of(const std::vector<memory::AllocationInfo>& allocations);
std::vector<SiteStat> sites_of(const std::vector<memory::PublishedSite>& sites);

/// Throws InvalidArgumentError: "unknown device 'x': <what> has 0, 1".
[[noreturn]] void throw_unknown_device(const std::string& device, const std::string& what,
                                       const std::vector<SourceDevice>& devices);

/// free = total - used (0 when used exceeds total).
inline void set_free(MemorySample& s) noexcept { s.free = s.total > s.used ? s.total - s.used : 0; }

// ---------------------------------------------------------------------------

template <class F>
bool sleep_until_steady(std::uint64_t time_ns, const StopFlag& stop, F&& keep_going) {
  while (true) {
    if (stop.load(std::memory_order_relaxed) || !keep_going()) return false;
    const std::uint64_t now = steady_now_ns();
    if (now >= time_ns) return true;
    sleep_ns(time_ns - now);
  }
}

}  // namespace genesis::debug::source_util
