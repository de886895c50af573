// The memory source interface (Note [Memory sources] in memory_source.h):
// MemorySample's derived figures, the base class, parse_speed, and the
// helpers the sources share (source_util.h).
#include "genesis/debug/memory_source.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <thread>

#include "source_util.h"
#include "genesis/core/error.h"

namespace genesis::debug {

double MemorySample::fragmentation() const noexcept {
  if (reserved == 0) return 0.0;
  if (allocated >= reserved) return 0.0;
  return static_cast<double>(reserved - allocated) / static_cast<double>(reserved);
}

double MemorySample::utilization_percent() const noexcept {
  if (total == 0) return 0.0;
  return 100.0 * static_cast<double>(used) / static_cast<double>(total);
}

MemorySource::~MemorySource() = default;

std::vector<SiteStat> MemorySource::sites(const std::string& /*device*/) { return {}; }

std::vector<memory::MemoryEvent> MemorySource::events(const std::string& /*device*/) { return {}; }

double parse_speed(const std::string& text) {
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  if (t == "max" || t == "MAX" || t == "Max") return 0.0;
  // "10" or "10x" (as reports write it).
  if (!t.empty() && (t.back() == 'x' || t.back() == 'X')) t.remove_suffix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v) || v <= 0) {
    GENESIS_THROW(InvalidArgumentError, "invalid speed '", text,
                  "': expected 'max' (as fast as possible) or a positive number of times real speed "
                  "(1 = real time, 10 = ten times faster, 0.5 = half speed)");
  }
  return v;
}

namespace source_util {

std::uint64_t steady_now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void sleep_ns(std::uint64_t ns) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(ns, kStopCheckNs)));
}

bool sleep_until_steady(std::uint64_t time_ns, const StopFlag& stop) {
  return sleep_until_steady(time_ns, stop, [] { return true; });
}

std::uint64_t PeakTracker::One::update(bool first, std::uint64_t current, std::uint64_t peak) {
  if (first) base = peak;
  if (peak != base) moved = true;
  best = std::max({best, current, moved ? peak : std::uint64_t{0}});
  return best;
}

void PeakTracker::observe(MemorySample& s, std::uint64_t allocated_peak, std::uint64_t reserved_peak) {
  const bool first = !started_;
  started_ = true;
  s.peak_allocated = allocated_.update(first, s.allocated, allocated_peak);
  s.peak_reserved = reserved_.update(first, s.reserved, reserved_peak);
}

void fill_from_stats(MemorySample& s, const memory::MemoryStats& st, PeakTracker& peaks) {
  auto u = [](std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : std::uint64_t{0}; };
  s.allocated = u(st.allocated_bytes[memory::kStatAggregate].current);
  s.reserved = u(st.reserved_bytes[memory::kStatAggregate].current);
  s.active = u(st.active_bytes[memory::kStatAggregate].current);
  s.cached = s.reserved > s.allocated ? s.reserved - s.allocated : 0;
  s.largest_free_block = st.largest_free_block;
  s.num_ooms = u(st.num_ooms);
  s.num_allocs = u(st.num_allocs);
  s.used = s.reserved;
  s.exact = true;
  peaks.observe(s, u(st.allocated_bytes[memory::kStatAggregate].peak), u(st.reserved_bytes[memory::kStatAggregate].peak));
}

std::uint64_t count_free_blocks(const std::vector<memory::SegmentInfo>& segments) {
  std::uint64_t n = 0;
  for (const memory::SegmentInfo& seg : segments)
    for (const memory::BlockInfo& b : seg.blocks) n += b.state != "allocated" ? 1 : 0;
  return n;
}

std::vector<SiteStat> sites_of(const std::vector<memory::PublishedSite>& sites) {
  std::vector<SiteStat> out;
  out.reserve(sites.size());
  for (const memory::PublishedSite& s : sites) out.push_back(SiteStat{s.site, s.bytes, s.count});
  return out;
}

std::vector<SiteStat> sites_of(const std::vector<memory::AllocationInfo>& allocations) {
  return sites_of(memory::group_by_site(allocations));
}

void throw_unknown_device(const std::string& device, const std::string& what,
                          const std::vector<SourceDevice>& devices) {
  std::string ids;
  for (const SourceDevice& d : devices) ids += (ids.empty() ? "" : ", ") + d.id;
  GENESIS_THROW(InvalidArgumentError, "unknown device '", device, "': ", what, " has ",
                ids.empty() ? std::string("no devices") : ids);
}

}  // namespace source_util
}  // namespace genesis::debug
