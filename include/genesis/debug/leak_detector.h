// Leak detection: steady growth of live memory, told apart from a training
// step's sawtooth and from a one-time warm-up.
//
// Note [Leak troughs]: live bytes of a healthy training job rise within a
// step and fall back at its end, so the peaks say little; a leak raises the
// troughs. The detector keeps the minimum of allocated bytes per bin of
// window/6 (bins widen by merging pairs, so memory stays bounded over any run)
// and fits a Theil-Sen line through the bin minima (Note [Robust growth] in
// src/debug/robust_fit.h). Warm-up (the first steps allocate optimizer state,
// caches, ...) is ignored: the fit starts after max(one window, 10% of the
// run). Theil-Sen also tolerates a warm-up that runs a little past that cut.
// A leak is reported when the troughs grow at least threshold MiB/min with a
// confidence of at least 0.5. "MB" in names and reports is 2^20 bytes.
//
// Sites: when tracking is on, the sites a source reports are kept as
// snapshots at a bounded number of points in time (older ones thinned out),
// so that report() ranks the sites that grew over the last window and diff()
// compares two points in time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "genesis/debug/memory_source.h"

namespace genesis::debug {

struct LeakOptions {
  double threshold_mb_per_min = 10;  ///< troughs growing at least this fast are a leak
  double window_seconds = 60;        ///< site growth is measured over this window
  bool tracking = true;              ///< keep site snapshots
  std::size_t max_site_snapshots = 64;  ///< per device
};

/// A site whose live bytes grew over the window.
struct LeakSite {
  std::string site;
  std::vector<std::string> frames;  ///< `site` split on '\n'
  std::int64_t growth_bytes = 0;
  double growth_rate_mb_per_min = 0;
  std::uint64_t bytes = 0;  ///< held now
  std::uint64_t count = 0;  ///< live allocations now
};

struct LeakReport {
  std::string device;
  bool leak_detected = false;
  double growth_rate_mb_per_min = 0;  ///< of the troughs, after warm-up
  double confidence = 0;              ///< in [0, 1]
  double window_seconds = 0;
  double warmup_seconds = 0;          ///< source time ignored at the start
  double duration_seconds = 0;        ///< source time observed
  double threshold_mb_per_min = 0;
  bool tracking = false;
  /// Sites that grew over the last window, largest growth first.
  std::vector<LeakSite> sites;

  /// "leak" (leak_detected); "possible" when the troughs grew at least the
  /// threshold but too little of the run backs it (confidence below 0.5: a
  /// short run, few troughs after the warm-up, or erratic ones), so that a
  /// fast growth seen briefly is not reported as no leak; else "none".
  const char* verdict() const noexcept {
    if (leak_detected) return "leak";
    return growth_rate_mb_per_min >= threshold_mb_per_min ? "possible" : "none";
  }
};

/// Bytes and count of one site between two points in time.
struct SiteDelta {
  std::string site;
  std::vector<std::string> frames;
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
  std::int64_t bytes_delta = 0;
  std::int64_t count_delta = 0;
};

/// Leak detection for any number of devices (Note [Leak troughs]). Not
/// thread-safe. The constructor throws InvalidArgumentError for a threshold
/// or window that is not positive.
class LeakDetector {
 public:
  explicit LeakDetector(const LeakOptions& options = {});
  LeakDetector(double threshold_mb_per_min, double window_seconds, bool tracking = true);

  void add(const std::string& device, const MemorySample& sample);
  /// A snapshot of the live sites of `device` (ignored when tracking is off).
  void add_sites(const std::string& device, std::uint64_t time_ns, const std::vector<SiteStat>& sites);
  /// Throws InvalidArgumentError for a device that was never added.
  LeakReport report(const std::string& device) const;
  /// Per-site changes between the snapshots at (or last before) t0_ns and
  /// t1_ns, largest growth first; sites unchanged are left out. Throws
  /// InvalidArgumentError for an unknown device or t1_ns < t0_ns.
  std::vector<SiteDelta> diff(const std::string& device, std::uint64_t t0_ns, std::uint64_t t1_ns) const;
  std::vector<std::string> devices() const { return order_; }
  const LeakOptions& options() const noexcept { return options_; }

 private:
  struct Bin {
    std::int64_t index = 0;
    double t = 0;    ///< seconds since the first sample, of the minimum
    double min = 0;  ///< allocated bytes
  };
  struct SiteEntry {
    std::uint32_t id = 0;
    std::uint64_t bytes = 0;
    std::uint64_t count = 0;
  };
  struct Snapshot {
    std::uint64_t time_ns = 0;
    std::vector<SiteEntry> sites;  ///< sorted by id
  };
  struct DeviceState {
    std::vector<Bin> bins;
    double bin_width = 0;
    std::uint64_t first_ns = 0;
    std::uint64_t last_ns = 0;
    bool any = false;
    std::vector<std::string> site_names;
    std::unordered_map<std::string, std::uint32_t> site_ids;
    std::deque<Snapshot> snapshots;
  };

  DeviceState& state(const std::string& device);
  const DeviceState& existing(const std::string& device) const;
  static const Snapshot* at_or_before(const DeviceState& st, std::uint64_t t_ns);

  LeakOptions options_;
  std::map<std::string, DeviceState> devices_;
  std::vector<std::string> order_;
};

/// "a.py:3 in f\nb.py:9 in g" -> {"a.py:3 in f", "b.py:9 in g"}.
std::vector<std::string> split_frames(const std::string& site);

}  // namespace genesis::debug
