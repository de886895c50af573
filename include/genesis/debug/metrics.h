// A writer of the Prometheus text exposition format (version 0.0.4).
//
// Note [Metric families]: Prometheus wants every sample of one metric family
// together, after its `# HELP` and `# TYPE` lines, and each family once per
// exposition. The writer enforces this: family() opens a family, sample()
// adds to the open one, and a name written twice is an error rather than an
// exposition that promtool (and the scraper) rejects. Names follow the
// conventions: [a-zA-Z_:][a-zA-Z0-9_:]*, base units (bytes, seconds), and
// counters end in `_total`. Label values are escaped (backslash, quote,
// newline); values are written so that they read back exactly (integers up
// to 2^53 without an exponent, NaN, +Inf, -Inf).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genesis::debug {

/// Labels of one series, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { gauge, counter };

/// Builds one exposition (Note [Metric families]). Not thread-safe.
class MetricsWriter {
 public:
  /// Opens the family `name`: writes its HELP and TYPE lines. Throws
  /// InvalidArgumentError for a name outside the naming rules, a counter
  /// whose name does not end in `_total`, or a family opened before.
  void family(std::string_view name, std::string_view help, MetricType type);
  /// A sample of the open family. Throws InvalidArgumentError without an
  /// open family, or for a label name outside [a-zA-Z_][a-zA-Z0-9_]* (or
  /// starting with "__"), or a negative or NaN counter.
  void sample(const MetricLabels& labels, double value);
  /// The exposition so far.
  const std::string& text() const noexcept { return out_; }
  /// Hands the exposition over and starts a new one.
  std::string take();

 private:
  std::string out_;
  std::string current_;
  MetricType current_type_ = MetricType::gauge;
  std::set<std::string, std::less<>> seen_;
};

/// True when `name` is a valid metric name.
bool valid_metric_name(std::string_view name) noexcept;
/// True when `name` is a valid label name (not reserved "__...").
bool valid_label_name(std::string_view name) noexcept;
/// A label value inside its quotes: \\ \" and \n escaped.
std::string escape_label_value(std::string_view value);
/// HELP text: \\ and \n escaped.
std::string escape_help(std::string_view help);
/// A sample value: "NaN", "+Inf", "-Inf", integers without exponent (up
/// to 2^53), otherwise the shortest form that reads back exactly.
std::string format_metric_value(double value);

/// The content type of the exposition (HTTP Content-Type header).
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace genesis::debug
