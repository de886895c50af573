#include "genesis/debug/leak_detector.h"

#include <algorithm>
#include <cmath>

#include "genesis/core/error.h"
#include "robust_fit.h"

namespace genesis::debug {

namespace {

constexpr double kMiB = 1048576.0;
constexpr std::size_t kBinsPerWindow = 6;
constexpr std::size_t kMaxBins = 2048;     // then bins double in width
constexpr std::size_t kMaxFitPoints = 64;  // Theil-Sen is quadratic in points

// Groups consecutive points into at most `n`, keeping each group's minimum.
std::vector<detail::TimedValue> group_minima(const std::vector<detail::TimedValue>& pts, std::size_t n) {
  if (pts.size() <= n) return pts;
  std::vector<detail::TimedValue> out;
  const std::size_t per = (pts.size() + n - 1) / n;
  for (std::size_t i = 0; i < pts.size(); i += per) {
    detail::TimedValue m = pts[i];
    for (std::size_t j = i + 1; j < std::min(pts.size(), i + per); ++j) {
      if (pts[j].y < m.y) m = pts[j];
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace

std::vector<std::string> split_frames(const std::string& site) {
  std::vector<std::string> frames;
  std::size_t start = 0;
  while (start <= site.size()) {
    const std::size_t end = site.find('\n', start);
    const std::size_t stop = end == std::string::npos ? site.size() : end;
    if (stop > start) frames.push_back(site.substr(start, stop - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return frames;
}

LeakDetector::LeakDetector(const LeakOptions& options) : options_(options) {
  GENESIS_CHECK(options_.threshold_mb_per_min > 0, "leak threshold must be positive, got ",
                options_.threshold_mb_per_min, " MiB/min");
  GENESIS_CHECK(options_.window_seconds > 0, "leak window must be positive, got ", options_.window_seconds, " s");
  GENESIS_CHECK(options_.max_site_snapshots >= 4, "leak detector needs at least 4 site snapshots, got ",
                options_.max_site_snapshots);
}

LeakDetector::LeakDetector(double threshold_mb_per_min, double window_seconds, bool tracking)
    : LeakDetector(LeakOptions{threshold_mb_per_min, window_seconds, tracking}) {}

LeakDetector::DeviceState& LeakDetector::state(const std::string& device) {
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    it = devices_.emplace(device, DeviceState{}).first;
    it->second.bin_width = options_.window_seconds / kBinsPerWindow;
    order_.push_back(device);
  }
  return it->second;
}

const LeakDetector::DeviceState& LeakDetector::existing(const std::string& device) const {
  const auto it = devices_.find(device);
  GENESIS_CHECK(it != devices_.end(), "leak detector: no samples of device '", device, "'");
  return it->second;
}

void LeakDetector::add(const std::string& device, const MemorySample& s) {
  DeviceState& st = state(device);
  if (!st.any) {
    st.first_ns = s.time_ns;
    st.any = true;
  }
  st.last_ns = std::max(st.last_ns, s.time_ns);
  const double t = s.time_ns >= st.first_ns ? static_cast<double>(s.time_ns - st.first_ns) * 1e-9 : 0.0;
  const auto index = static_cast<std::int64_t>(t / st.bin_width);
  const double y = static_cast<double>(s.allocated);
  if (!st.bins.empty() && st.bins.back().index >= index) {
    if (y < st.bins.back().min) st.bins.back() = {st.bins.back().index, t, y};
    return;
  }
  st.bins.push_back({index, t, y});
  if (st.bins.size() > kMaxBins) {
    // Double the bin width: bins 2i and 2i+1 become bin i, keeping the minimum.
    st.bin_width *= 2;
    std::size_t out = 0;
    for (std::size_t i = 0; i < st.bins.size(); ++i) {
      Bin b = st.bins[i];
      b.index /= 2;
      if (out > 0 && st.bins[out - 1].index == b.index) {
        if (b.min < st.bins[out - 1].min) st.bins[out - 1] = b;
      } else {
        st.bins[out++] = b;
      }
    }
    st.bins.resize(out);
  }
}

void LeakDetector::add_sites(const std::string& device, std::uint64_t time_ns, const std::vector<SiteStat>& sites) {
  if (!options_.tracking) return;
  DeviceState& st = state(device);
  Snapshot snap;
  snap.time_ns = time_ns;
  snap.sites.reserve(sites.size());
  for (const SiteStat& s : sites) {
    auto [it, fresh] = st.site_ids.try_emplace(s.site, static_cast<std::uint32_t>(st.site_names.size()));
    if (fresh) st.site_names.push_back(s.site);
    snap.sites.push_back({it->second, s.bytes, s.count});
  }
  std::sort(snap.sites.begin(), snap.sites.end(), [](const SiteEntry& a, const SiteEntry& b) { return a.id < b.id; });
  st.snapshots.push_back(std::move(snap));
  if (st.snapshots.size() > options_.max_site_snapshots) {
    // Drop the snapshot whose neighbours are closest together, so the kept
    // ones stay spread over the run; the first (baseline), the last, and
    // those of the latest window (site growth is measured over it) are
    // dropped only when nothing older is left to drop.
    const auto window_ns = static_cast<std::uint64_t>(options_.window_seconds * 1e9);
    const std::uint64_t recent = time_ns > window_ns ? time_ns - window_ns : 0;
    const auto& v = st.snapshots;
    std::size_t drop = 0;
    for (int pass = 0; pass < 2 && drop == 0; ++pass) {
      std::uint64_t best_gap = UINT64_MAX;
      for (std::size_t i = 1; i + 1 < v.size(); ++i) {
        if (pass == 0 && v[i].time_ns >= recent) break;
        const std::uint64_t gap = v[i + 1].time_ns - v[i - 1].time_ns;
        if (gap < best_gap) {
          best_gap = gap;
          drop = i;
        }
      }
    }
    st.snapshots.erase(st.snapshots.begin() + static_cast<std::ptrdiff_t>(drop));
  }
}

const LeakDetector::Snapshot* LeakDetector::at_or_before(const DeviceState& st, std::uint64_t t_ns) {
  if (st.snapshots.empty()) return nullptr;
  const Snapshot* best = &st.snapshots.front();
  for (const Snapshot& s : st.snapshots) {
    if (s.time_ns <= t_ns) best = &s;
  }
  return best;
}

LeakReport LeakDetector::report(const std::string& device) const {
  const DeviceState& st = existing(device);
  LeakReport r;
  r.device = device;
  r.window_seconds = options_.window_seconds;
  r.threshold_mb_per_min = options_.threshold_mb_per_min;
  r.tracking = options_.tracking;
  r.duration_seconds = static_cast<double>(st.last_ns - st.first_ns) * 1e-9;
  r.warmup_seconds = std::max(options_.window_seconds, 0.1 * r.duration_seconds);

  std::vector<detail::TimedValue> troughs;
  for (const Bin& b : st.bins) {
    // Only whole bins after the warm-up: a bin cut short by the end of the
    // run has not seen its trough yet.
    const double bin_start = static_cast<double>(b.index) * st.bin_width;
    if (bin_start >= r.warmup_seconds && bin_start + st.bin_width <= r.duration_seconds + 1e-9) {
      troughs.push_back({b.t, b.min});
    }
  }
  troughs = group_minima(troughs, kMaxFitPoints);
  const double threshold_bps = options_.threshold_mb_per_min * kMiB / 60.0;
  const detail::RobustSlope fit = detail::theil_sen(troughs, 0.1 * threshold_bps);
  const double span = troughs.size() >= 2 ? troughs.back().t - troughs.front().t : 0.0;
  r.growth_rate_mb_per_min = fit.slope * 60.0 / kMiB;
  r.confidence = std::clamp(fit.consistency * std::min(1.0, static_cast<double>(troughs.size()) / 8.0) *
                                std::min(1.0, span / (2 * options_.window_seconds)),
                            0.0, 1.0);
  r.leak_detected = r.growth_rate_mb_per_min >= options_.threshold_mb_per_min && r.confidence >= 0.5;

  if (st.snapshots.size() >= 2) {
    const Snapshot& now = st.snapshots.back();
    const auto window_ns = static_cast<std::uint64_t>(options_.window_seconds * 1e9);
    // The snapshot nearest to one window ago: thinning may have left none
    // close before it, and growth over a much longer span would be reported
    // as the window's.
    const std::uint64_t target = now.time_ns >= window_ns ? now.time_ns - window_ns : 0;
    const auto distance = [target](const Snapshot& x) {
      return x.time_ns > target ? x.time_ns - target : target - x.time_ns;
    };
    const Snapshot* then = &st.snapshots.front();
    for (const Snapshot& s : st.snapshots) {
      if (&s != &now && distance(s) < distance(*then)) then = &s;
    }
    if (then != &now) {
      // A rate per minute over at least a second: growth seen over a few
      // microseconds (a short trace replayed at full speed) would otherwise
      // be extrapolated to gigabytes a minute.
      const double minutes = std::max(static_cast<double>(now.time_ns - then->time_ns) * 1e-9, 1.0) / 60.0;
      std::unordered_map<std::uint32_t, std::uint64_t> before;
      for (const SiteEntry& e : then->sites) before[e.id] = e.bytes;
      for (const SiteEntry& e : now.sites) {
        const auto it = before.find(e.id);
        const std::int64_t grew = static_cast<std::int64_t>(e.bytes) -
                                  static_cast<std::int64_t>(it == before.end() ? 0 : it->second);
        if (grew <= 0) continue;
        LeakSite ls;
        ls.site = st.site_names[e.id];
        ls.frames = split_frames(ls.site);
        ls.growth_bytes = grew;
        ls.growth_rate_mb_per_min = minutes > 0 ? static_cast<double>(grew) / kMiB / minutes : 0.0;
        ls.bytes = e.bytes;
        ls.count = e.count;
        r.sites.push_back(std::move(ls));
      }
      std::sort(r.sites.begin(), r.sites.end(),
                [](const LeakSite& a, const LeakSite& b) { return a.growth_bytes > b.growth_bytes; });
    }
  }
  return r;
}

std::vector<SiteDelta> LeakDetector::diff(const std::string& device, std::uint64_t t0_ns, std::uint64_t t1_ns) const {
  GENESIS_CHECK(t1_ns >= t0_ns, "leak diff: end time ", t1_ns, " ns is before start time ", t0_ns, " ns");
  const DeviceState& st = existing(device);
  const Snapshot* a = at_or_before(st, t0_ns);
  const Snapshot* b = at_or_before(st, t1_ns);
  std::vector<SiteDelta> out;
  if (a == nullptr || a == b) return out;
  std::map<std::uint32_t, std::pair<const SiteEntry*, const SiteEntry*>> joined;
  for (const SiteEntry& e : a->sites) joined[e.id].first = &e;
  for (const SiteEntry& e : b->sites) joined[e.id].second = &e;
  for (const auto& [id, pair] : joined) {
    SiteDelta d;
    d.site = st.site_names[id];
    d.bytes_before = pair.first ? pair.first->bytes : 0;
    d.bytes_after = pair.second ? pair.second->bytes : 0;
    d.bytes_delta = static_cast<std::int64_t>(d.bytes_after) - static_cast<std::int64_t>(d.bytes_before);
    d.count_delta = static_cast<std::int64_t>(pair.second ? pair.second->count : 0) -
                    static_cast<std::int64_t>(pair.first ? pair.first->count : 0);
    if (d.bytes_delta == 0 && d.count_delta == 0) continue;
    d.frames = split_frames(d.site);
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const SiteDelta& x, const SiteDelta& y) { return x.bytes_delta > y.bytes_delta; });
  return out;
}

}  // namespace genesis::debug
