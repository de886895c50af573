// Out-of-memory prediction from a device's samples.
//
// Note [OOM risk]: the predictor judges growth by the peaks of memory use
// (Note [Robust growth] in src/debug/robust_fit.h): the recent horizon is cut
// into windows, the maximum of each is kept and a Theil-Sen line is fitted
// through them, so a training step's sawtooth is judged by its peaks and one
// spike is not a trend. Usage is reserved/total for allocator figures
// (exact samples: what the allocator holds cannot go to anyone else) and
// used/total for the driver's figures. Time to OOM = (total - peak)/slope,
// with `peak` the highest usage of the latest window; it is predicted only
// for a positive slope. The risk level, with T the threshold percent:
//   critical  usage >= T + 10, or OOM predicted in under 30 s
//   high      usage >= T,      or OOM predicted in under 120 s
//   medium    usage >= T - 15, or OOM predicted in under 600 s
//   low       otherwise
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genesis/debug/memory_source.h"

namespace genesis::debug {

enum class RiskLevel { low = 0, medium = 1, high = 2, critical = 3 };

/// "low", "medium", "high", "critical".
std::string_view risk_level_name(RiskLevel level) noexcept;

struct OOMPrediction {
  std::string device;
  std::uint64_t time_ns = 0;  ///< source time of the latest sample
  RiskLevel risk_level = RiskLevel::low;
  double confidence = 0;  ///< in [0, 1]: agreement of the fit times its coverage
  double current_usage_percent = 0;
  double growth_rate_bytes_per_sec = 0;  ///< of the peaks; negative when shrinking
  double predicted_oom_seconds = -1;     ///< negative: no OOM predicted; 0: out of memory already
  std::uint64_t ooms = 0;                ///< allocations that failed with out of memory so far
  /// Built from the figures, most urgent first; never empty after a sample.
  std::vector<std::string> recommendations;
};

/// True when the prediction found the peaks growing steadily: a positive
/// growth rate fitted with enough confidence to predict from. A rate fitted
/// with less is noise and reports do not call it growth.
bool steady_growth(const OOMPrediction& p) noexcept;

struct OOMPredictorOptions {
  double threshold_percent = 85;
  double horizon_seconds = 120;  ///< recent source time the growth is fitted over
  std::size_t windows = 12;      ///< windows of the horizon whose maxima are fitted
};

/// Predicts OOM for one device (Note [OOM risk]). Memory stays bounded:
/// the maxima of short slots of the horizon, not every sample. Not
/// thread-safe. Throws InvalidArgumentError for a threshold outside
/// (0, 100], a horizon <= 0 or fewer than 3 windows.
class OOMPredictor {
 public:
  explicit OOMPredictor(double threshold_percent = 85, std::string device = "0");
  OOMPredictor(const OOMPredictorOptions& options, std::string device);

  void add(const MemorySample& sample);
  /// Records where memory is held now; predict() names the sites that grew
  /// across the horizon.
  void add_sites(std::uint64_t time_ns, const std::vector<SiteStat>& sites);
  /// The prediction at the latest sample. `sites`: the current sites (empty:
  /// the latest add_sites()).
  OOMPrediction predict(const std::vector<SiteStat>& sites = {}) const;

  const OOMPredictorOptions& options() const noexcept { return options_; }
  const std::string& device() const noexcept { return device_; }
  bool empty() const noexcept { return count_ == 0; }

 private:
  struct Slot {
    double t = 0;       ///< seconds since the first sample, of the slot's maximum
    double max = 0;     ///< usage bytes
    std::int64_t index = 0;
  };
  struct SiteSnapshot {
    std::uint64_t time_ns = 0;
    std::vector<SiteStat> sites;
  };

  double usage_bytes(const MemorySample& s) const noexcept;
  void recommend(OOMPrediction& p, const std::vector<SiteStat>& sites) const;

  OOMPredictorOptions options_;
  std::string device_;
  std::deque<Slot> slots_;
  std::deque<SiteSnapshot> site_snapshots_;
  MemorySample last_;
  std::uint64_t first_ns_ = 0;
  std::uint64_t count_ = 0;
};

/// A warning the detector raised.
struct OOMWarning {
  std::uint64_t time_ns = 0;
  RiskLevel level = RiskLevel::low;
  std::string message;  ///< "high OOM risk on device 0: 91.2% used, OOM in 45 s"
};

struct OOMDetectorOptions {
  double threshold_percent = 85;
  /// Warnings start at this level (high: usage at the threshold or an OOM
  /// predicted within two minutes).
  RiskLevel warn_level = RiskLevel::high;
  /// Source seconds between two warnings of one device at the same level;
  /// a rise in level warns at once.
  double min_warning_interval_s = 30;
  /// Source seconds between two predictions (not every sample).
  double evaluate_interval_s = 1;
  double horizon_seconds = 120;
  std::size_t max_warnings = 100;  ///< per device; the oldest are dropped
};

/// One OOMPredictor per device plus rate-limited warnings. Not thread-safe;
/// callbacks run on the thread that calls add().
class OOMDetector {
 public:
  using WarningCallback = std::function<void(const std::string& device, const OOMPrediction&)>;

  /// Throws InvalidArgumentError for bad options (see OOMPredictor).
  explicit OOMDetector(const OOMDetectorOptions& options = {});

  /// Feeds a sample; returns the prediction when it raised a warning (the
  /// callbacks have then been called with it).
  std::optional<OOMPrediction> add(const std::string& device, const MemorySample& sample);
  void add_sites(const std::string& device, std::uint64_t time_ns, const std::vector<SiteStat>& sites);
  /// Throws InvalidArgumentError for a device that was never added.
  OOMPrediction predict(const std::string& device) const;
  /// Devices in the order they were first added.
  std::vector<std::string> devices() const { return order_; }
  /// Warnings raised for `device`, oldest first (empty for an unknown one).
  std::vector<OOMWarning> warnings(const std::string& device) const;
  void on_warning(WarningCallback callback) { callbacks_.push_back(std::move(callback)); }
  const OOMDetectorOptions& options() const noexcept { return options_; }

 private:
  struct DeviceState {
    OOMPredictor predictor;
    std::deque<OOMWarning> warnings;
    std::uint64_t last_eval_ns = 0;
    std::uint64_t last_warning_ns = 0;
    RiskLevel last_warned = RiskLevel::low;
    bool evaluated = false;
    bool warned = false;
  };
  DeviceState& state(const std::string& device);

  OOMDetectorOptions options_;
  std::map<std::string, DeviceState> devices_;
  std::vector<std::string> order_;
  std::vector<WarningCallback> callbacks_;
};

}  // namespace genesis::debug
