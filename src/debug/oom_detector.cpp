#include "genesis/debug/oom_detector.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "genesis/core/error.h"
#include "report_util.h"
#include "robust_fit.h"

namespace genesis::debug {

namespace {
// Below this confidence a fitted growth rate predicts nothing (Note [OOM risk]).
constexpr double kPredictConfidence = 0.3;
}  // namespace

bool steady_growth(const OOMPrediction& p) noexcept {
  // The confidence from which predict() names a time to OOM.
  return p.growth_rate_bytes_per_sec > 0 && p.confidence >= kPredictConfidence;
}

std::string_view risk_level_name(RiskLevel level) noexcept {
  switch (level) {
    case RiskLevel::low: return "low";
    case RiskLevel::medium: return "medium";
    case RiskLevel::high: return "high";
    case RiskLevel::critical: return "critical";
  }
  return "unknown";
}

namespace {

constexpr std::size_t kSlotsPerWindow = 20;
constexpr std::size_t kMaxSiteSnapshots = 16;
constexpr std::size_t kMaxGrowingSites = 3;

std::string bytes_text(double b) { return genesis::detail::format_bytes(static_cast<unsigned long long>(std::max(0.0, b))); }

std::string first_frame(const std::string& site) { return site.substr(0, site.find('\n')); }

void check_options(const OOMPredictorOptions& o) {
  GENESIS_CHECK(o.threshold_percent > 0 && o.threshold_percent <= 100,
                "OOM threshold must be in (0, 100] percent, got ", o.threshold_percent);
  GENESIS_CHECK(o.horizon_seconds > 0, "OOM horizon must be positive, got ", o.horizon_seconds, " s");
  GENESIS_CHECK(o.windows >= 3, "OOM prediction needs at least 3 windows, got ", o.windows);
}

}  // namespace

OOMPredictor::OOMPredictor(double threshold_percent, std::string device)
    : OOMPredictor(OOMPredictorOptions{threshold_percent}, std::move(device)) {}

OOMPredictor::OOMPredictor(const OOMPredictorOptions& options, std::string device)
    : options_(options), device_(std::move(device)) {
  check_options(options_);
}

double OOMPredictor::usage_bytes(const MemorySample& s) const noexcept {
  return static_cast<double>(s.exact ? s.reserved : s.used);
}

void OOMPredictor::add(const MemorySample& s) {
  if (count_ == 0) first_ns_ = s.time_ns;
  ++count_;
  last_ = s;
  const double t = s.time_ns >= first_ns_ ? static_cast<double>(s.time_ns - first_ns_) * 1e-9 : 0.0;
  const double slot_width = options_.horizon_seconds / static_cast<double>(options_.windows * kSlotsPerWindow);
  const auto index = static_cast<std::int64_t>(t / slot_width);
  const double y = usage_bytes(s);
  if (!slots_.empty() && slots_.back().index >= index) {
    if (y > slots_.back().max) {
      slots_.back().max = y;
      slots_.back().t = t;
    }
  } else {
    slots_.push_back({t, y, index});
  }
  // Keep one slot before the horizon so the first window is never empty.
  while (slots_.size() > 1 && slots_[1].t < t - options_.horizon_seconds) slots_.pop_front();
}

void OOMPredictor::add_sites(std::uint64_t time_ns, const std::vector<SiteStat>& sites) {
  site_snapshots_.push_back({time_ns, sites});
  const auto horizon_ns = static_cast<std::uint64_t>(options_.horizon_seconds * 1e9);
  while (site_snapshots_.size() > 2 && site_snapshots_[1].time_ns + horizon_ns < time_ns) {
    site_snapshots_.pop_front();
  }
  // Bounded: thin the middle, keeping the oldest (the baseline) and the
  // newest. Not the second oldest: that one is what moves the baseline up to
  // the horizon's start above, and erasing it each time would pin the
  // baseline at the first snapshot for good.
  if (site_snapshots_.size() > kMaxSiteSnapshots) {
    site_snapshots_.erase(site_snapshots_.begin() + static_cast<std::ptrdiff_t>(site_snapshots_.size() / 2));
  }
}

OOMPrediction OOMPredictor::predict(const std::vector<SiteStat>& sites) const {
  OOMPrediction p;
  p.device = device_;
  if (count_ == 0) return p;
  p.time_ns = last_.time_ns;
  const double total = static_cast<double>(last_.total);
  p.current_usage_percent = total > 0 ? 100.0 * usage_bytes(last_) / total : 0.0;

  std::vector<detail::TimedValue> points;
  points.reserve(slots_.size());
  for (const Slot& s : slots_) points.push_back({s.t, s.max});
  const double now = points.back().t;
  const double begin = std::max(points.front().t, now - options_.horizon_seconds);
  const auto maxima = detail::window_extremes(points, begin, now, options_.windows, true);
  const double peak = maxima.empty() ? usage_bytes(last_) : maxima.back().y;
  // Slopes below a ten-millionth of the device per second are noise.
  const double tolerance = std::max(1.0, total * 1e-7);
  detail::RobustSlope fit = detail::theil_sen(maxima, tolerance);
  // Growth that speeds up (a job that starts growing after a quiet start,
  // a leak that sets in) is judged by the recent half of the windows when
  // they grow faster: a prediction of OOM must not lag behind the job. Six
  // windows still let Theil-Sen ignore a spike.
  if (maxima.size() >= 8) {
    const std::vector<detail::TimedValue> recent(maxima.end() - static_cast<std::ptrdiff_t>(maxima.size() / 2),
                                                 maxima.end());
    const detail::RobustSlope late = detail::theil_sen(recent, tolerance);
    if (late.slope > fit.slope && late.consistency >= 0.5) fit = late;
  }
  const double span = now - begin;
  const double coverage = std::min(1.0, static_cast<double>(maxima.size()) / static_cast<double>(options_.windows));
  // How much of the run backs an extrapolation: a quarter of the horizon,
  // or the time the growth needs to fill the device when that is shorter. A
  // job that fills its GPU in 20 s is predicted once a few seconds of it are
  // seen, not only after 30 s (when it has long run out); a slow growth
  // still needs the quarter horizon.
  double backing = 0.25 * options_.horizon_seconds;
  if (fit.slope > tolerance && total > peak) backing = std::min(backing, (total - peak) / fit.slope);
  const double span_factor = std::min(1.0, span / std::max(backing, 1e-9));
  p.confidence = std::clamp(fit.consistency * coverage * span_factor, 0.0, 1.0);
  p.growth_rate_bytes_per_sec = fit.slope;
  if (total > 0) {
    if (peak >= total) {
      p.predicted_oom_seconds = 0;
    } else if (fit.slope > tolerance && p.confidence >= kPredictConfidence) {
      p.predicted_oom_seconds = (total - peak) / fit.slope;
    }
  }

  // Allocations that already failed: whatever the trend, the job has run
  // out of memory (a cap or the device), which is the most urgent news.
  p.ooms = last_.num_ooms;
  if (p.ooms > 0) p.predicted_oom_seconds = 0;

  const double th = options_.threshold_percent;
  const double u = p.current_usage_percent;
  const double eta = p.predicted_oom_seconds;
  const bool oom = eta >= 0;
  if (p.ooms > 0 || u >= th + 10 || (oom && eta < 30)) {
    p.risk_level = RiskLevel::critical;
  } else if (u >= th || (oom && eta < 120)) {
    p.risk_level = RiskLevel::high;
  } else if (u >= th - 15 || (oom && eta < 600)) {
    p.risk_level = RiskLevel::medium;
  }
  recommend(p, sites.empty() && !site_snapshots_.empty() ? site_snapshots_.back().sites : sites);
  return p;
}

void OOMPredictor::recommend(OOMPrediction& p, const std::vector<SiteStat>& sites) const {
  const MemorySample& s = last_;
  const double total = static_cast<double>(s.total);
  auto& out = p.recommendations;
  const bool steady = p.predicted_oom_seconds > 0 && p.confidence >= 0.5;
  if (p.ooms > 0) {
    out.push_back(std::to_string(p.ooms) + (p.ooms == 1 ? " allocation has" : " allocations have") +
                  " failed with out of memory (usage " + detail::format_fixed(p.current_usage_percent, 1) + "% of " +
                  bytes_text(total) + "): the job needs more than the device or its memory cap gives; reduce the "
                  "batch size, or use activation checkpointing or lower precision");
  } else if (p.risk_level == RiskLevel::low && p.predicted_oom_seconds < 0) {
    out.push_back("No action needed: usage is " + detail::format_fixed(p.current_usage_percent, 1) + "% of " +
                  bytes_text(total) + " and the peaks are not growing steadily");
  }
  if (steady) {
    out.push_back("Peak memory grows steadily by " + bytes_text(p.growth_rate_bytes_per_sec) +
                  "/s: at this rate the device is full in " + detail::format_fixed(p.predicted_oom_seconds, 0) +
                  " s. Free what piles up between steps, or reduce the batch size");
  } else if (p.predicted_oom_seconds == 0 && p.ooms == 0) {
    out.push_back("Usage has reached the device's capacity (" + bytes_text(total) +
                  "): the next allocation that needs a new segment fails; reduce the batch size");
  }

  // Sites that grew since the oldest snapshot of the horizon.
  if (!sites.empty() && !site_snapshots_.empty() && site_snapshots_.front().time_ns < s.time_ns) {
    std::unordered_map<std::string, std::uint64_t> before;
    for (const SiteStat& st : site_snapshots_.front().sites) before[st.site] = st.bytes;
    std::vector<std::pair<double, const SiteStat*>> growing;
    for (const SiteStat& st : sites) {
      const auto it = before.find(st.site);
      const double grew = static_cast<double>(st.bytes) - (it == before.end() ? 0.0 : static_cast<double>(it->second));
      if (grew > 0) growing.emplace_back(grew, &st);
    }
    std::sort(growing.begin(), growing.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const double minutes = static_cast<double>(s.time_ns - site_snapshots_.front().time_ns) * 1e-9 / 60.0;
    for (std::size_t i = 0; i < growing.size() && i < kMaxGrowingSites; ++i) {
      out.push_back("Growing site " + first_frame(growing[i].second->site) + ": +" + bytes_text(growing[i].first) +
                    " in " + detail::format_fixed(minutes * 60.0, 0) + " s (" +
                    detail::format_fixed(growing[i].first / 1048576.0 / std::max(minutes, 1e-9), 1) + " MiB/min), " +
                    bytes_text(static_cast<double>(growing[i].second->bytes)) + " held now");
    }
  }

  if (s.exact && s.reserved >= s.allocated) {
    const double cached = static_cast<double>(s.reserved - s.allocated);
    const double worth = std::max(total / 100.0, 64.0 * 1048576.0);
    if (cached >= worth) {
      out.push_back(bytes_text(cached) + " is cached but unused: empty_cache() returns it");
      if (static_cast<double>(s.largest_free_block) < cached / 2) {
        out.push_back("Fragmentation: the largest free block is " +
                      bytes_text(static_cast<double>(s.largest_free_block)) + " of " + bytes_text(cached) +
                      " cached in " + std::to_string(s.free_blocks) + " free blocks, so a request above " +
                      bytes_text(static_cast<double>(s.largest_free_block)) +
                      " needs a new segment; expandable segments or fewer distinct sizes help");
      }
    }
  }
  if (p.risk_level >= RiskLevel::high && !steady && p.current_usage_percent < options_.threshold_percent &&
      p.predicted_oom_seconds > 0) {
    // The risk comes from a time to OOM that too little of the run backs:
    // say that, not that usage is over a threshold it is far below.
    out.push_back("Peak memory grew by " + bytes_text(p.growth_rate_bytes_per_sec) + "/s, which would fill the " +
                  "device in " + detail::format_fixed(p.predicted_oom_seconds, 0) + " s, but over too short or " +
                  "uneven a stretch to be sure (confidence " + detail::format_fixed(p.confidence, 2) + "); usage is " +
                  detail::format_fixed(p.current_usage_percent, 1) + "% of " + bytes_text(total) +
                  ": watch longer, and free what piles up between steps if it keeps growing");
  } else if (p.risk_level >= RiskLevel::high && !steady) {
    out.push_back("Usage is " + detail::format_fixed(p.current_usage_percent, 1) + "% of " + bytes_text(total) +
                  " (threshold " + detail::format_fixed(options_.threshold_percent, 0) +
                  "%): reduce the batch size, or use activation checkpointing or lower precision");
  }
  if (out.empty()) {
    out.push_back("Usage is " + detail::format_fixed(p.current_usage_percent, 1) + "% of " + bytes_text(total) +
                  ": watch the growth before it reaches " + detail::format_fixed(options_.threshold_percent, 0) + "%");
  }
}

// --- OOMDetector --------------------------------------------------------------

OOMDetector::OOMDetector(const OOMDetectorOptions& options) : options_(options) {
  check_options({options.threshold_percent, options.horizon_seconds, 12});
  GENESIS_CHECK(options.min_warning_interval_s >= 0 && options.evaluate_interval_s >= 0,
                "OOM detector intervals must not be negative");
}

OOMDetector::DeviceState& OOMDetector::state(const std::string& device) {
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    OOMPredictorOptions po;
    po.threshold_percent = options_.threshold_percent;
    po.horizon_seconds = options_.horizon_seconds;
    it = devices_.emplace(device, DeviceState{OOMPredictor(po, device), {}, 0, 0, RiskLevel::low, false, false}).first;
    order_.push_back(device);
  }
  return it->second;
}

std::optional<OOMPrediction> OOMDetector::add(const std::string& device, const MemorySample& sample) {
  DeviceState& st = state(device);
  st.predictor.add(sample);
  const auto interval_ns = static_cast<std::uint64_t>(options_.evaluate_interval_s * 1e9);
  if (st.evaluated && sample.time_ns < st.last_eval_ns + interval_ns) return std::nullopt;
  st.evaluated = true;
  st.last_eval_ns = sample.time_ns;
  OOMPrediction p = st.predictor.predict();
  if (p.risk_level < options_.warn_level) {
    st.last_warned = RiskLevel::low;  // a later rise warns again at once
    return std::nullopt;
  }
  const auto quiet_ns = static_cast<std::uint64_t>(options_.min_warning_interval_s * 1e9);
  const bool rose = !st.warned || p.risk_level > st.last_warned;
  if (!rose && sample.time_ns < st.last_warning_ns + quiet_ns) return std::nullopt;
  st.warned = true;
  st.last_warned = p.risk_level;
  st.last_warning_ns = sample.time_ns;
  std::string msg = std::string(risk_level_name(p.risk_level)) + " OOM risk on device " + device + ": " +
                    detail::format_fixed(p.current_usage_percent, 1) + "% used";
  if (p.predicted_oom_seconds >= 0) msg += ", OOM in " + detail::format_fixed(p.predicted_oom_seconds, 0) + " s";
  st.warnings.push_back({sample.time_ns, p.risk_level, std::move(msg)});
  while (st.warnings.size() > options_.max_warnings) st.warnings.pop_front();
  for (const auto& cb : callbacks_) cb(device, p);
  return p;
}

void OOMDetector::add_sites(const std::string& device, std::uint64_t time_ns, const std::vector<SiteStat>& sites) {
  state(device).predictor.add_sites(time_ns, sites);
}

OOMPrediction OOMDetector::predict(const std::string& device) const {
  const auto it = devices_.find(device);
  GENESIS_CHECK(it != devices_.end(), "OOM detector: no samples of device '", device, "'");
  return it->second.predictor.predict();
}

std::vector<OOMWarning> OOMDetector::warnings(const std::string& device) const {
  const auto it = devices_.find(device);
  if (it == devices_.end()) return {};
  return {it->second.warnings.begin(), it->second.warnings.end()};
}

}  // namespace genesis::debug
