// Synthetic memory streams and a scripted MemorySource for the debugger's
// analysis tests: they run without a device, a trace or another process.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/debug/memory_source.h"

namespace genesis::debug::testing {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kTotal = 80 * kGiB;

inline std::uint64_t ns(double seconds) { return static_cast<std::uint64_t>(std::llround(seconds * 1e9)); }

/// An allocator-style sample at `t` seconds with `allocated` live bytes and
/// `reserved` bytes held (used = reserved, as allocator sources report).
inline MemorySample make_sample(double t, double allocated, double reserved, std::uint64_t total = kTotal) {
  MemorySample s;
  s.time_ns = ns(t);
  s.total = total;
  s.allocated = static_cast<std::uint64_t>(allocated);
  s.reserved = static_cast<std::uint64_t>(std::max(allocated, reserved));
  s.used = s.reserved;
  s.free = total > s.used ? total - s.used : 0;
  s.active = s.allocated;
  s.cached = s.reserved - s.allocated;
  s.largest_free_block = s.cached / 2;
  s.free_blocks = s.cached > 0 ? 3 : 0;
  s.exact = true;
  return s;
}

/// A training job: a sawtooth of `step` bytes every `period` seconds over
/// troughs at base + leak_per_s * t; reserved holds the peak plus 256 MiB.
struct SawtoothJob {
  double base = 20.0 * kGiB;
  double step = 2.0 * kGiB;
  double period = 2.0;
  double leak_per_s = 0;  ///< trough growth in bytes per second

  double trough(double t) const { return base + leak_per_s * t; }
  MemorySample at(double t) const {
    const double phase = std::fmod(t, period) / period;
    const double allocated = trough(t) + step * phase;
    return make_sample(t, allocated, trough(t) + step + 256.0 * kMiB);
  }
};

/// A scripted source: samples come from a function of time; advance_to
/// just sets the clock (no sleeping), and the source ends at `end_s`
/// (0: never).
class FakeSource : public MemorySource {
 public:
  FakeSource(std::function<MemorySample(double)> fn, double end_s,
             std::function<std::vector<SiteStat>(double)> sites = {})
      : fn_(std::move(fn)), sites_(std::move(sites)), end_ns_(ns(end_s)) {}

  std::string describe() const override { return "fake"; }
  std::vector<SourceDevice> devices() const override { return {{"0", "fake device", kTotal}}; }
  MemorySample sample(const std::string& device) override {
    if (device != "0") GENESIS_THROW(InvalidArgumentError, "unknown device ", device);
    MemorySample s = fn_(static_cast<double>(now_) * 1e-9);
    s.time_ns = now_;
    return s;
  }
  bool has_sites() const override { return static_cast<bool>(sites_); }
  std::vector<SiteStat> sites(const std::string&) override {
    return sites_ ? sites_(static_cast<double>(now_) * 1e-9) : std::vector<SiteStat>{};
  }
  std::uint64_t now_ns() const override { return now_; }
  bool advance_to(std::uint64_t time_ns, const StopFlag& stop) override {
    if (stop.load()) return false;
    if (end_ns_ != 0 && time_ns >= end_ns_) {
      now_ = end_ns_;
      ended_ = true;
      return false;
    }
    now_ = std::max(now_, time_ns);
    return true;
  }
  bool ended() const override { return ended_; }
  std::string end_reason() const override { return ended_ ? "script finished" : ""; }

 private:
  std::function<MemorySample(double)> fn_;
  std::function<std::vector<SiteStat>(double)> sites_;
  std::uint64_t end_ns_;
  std::uint64_t now_ = 0;
  bool ended_ = false;
};

}  // namespace genesis::debug::testing
