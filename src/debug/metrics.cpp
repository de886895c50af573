// The Prometheus text format writer (Note [Metric families] in metrics.h).
#include "genesis/debug/metrics.h"

#include <charconv>
#include <cmath>

#include "genesis/core/error.h"

namespace genesis::debug {

namespace {

bool name_char(char c, bool first, bool colon) noexcept {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

bool valid_name(std::string_view name, bool colon) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i], i == 0, colon)) return false;
  }
  return true;
}

}  // namespace

bool valid_metric_name(std::string_view name) noexcept { return valid_name(name, true); }

bool valid_label_name(std::string_view name) noexcept {
  return valid_name(name, false) && name.substr(0, 2) != "__";
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Byte counts are the common case: whole numbers, written as such so that
  // the text is readable and exact.
  if (value == std::floor(value) && std::fabs(value) <= 9007199254740992.0) {
    return std::to_string(static_cast<long long>(value));
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

void MetricsWriter::family(std::string_view name, std::string_view help, MetricType type) {
  if (!valid_metric_name(name)) GENESIS_THROW(InvalidArgumentError, "invalid metric name '", name, "'");
  if (type == MetricType::counter && (name.size() < 6 || name.substr(name.size() - 6) != "_total")) {
    GENESIS_THROW(InvalidArgumentError, "counter '", name, "' must end in _total");
  }
  if (seen_.count(name) != 0) GENESIS_THROW(InvalidArgumentError, "metric family '", name, "' written twice");
  seen_.emplace(name);
  current_ = std::string(name);
  current_type_ = type;
  // The TYPE line of a counter names the family without its _total suffix in
  // OpenMetrics; the 0.0.4 text format names the sample itself, which is
  // what promtool and Prometheus 2 expect here.
  out_ += "# HELP " + current_ + ' ' + escape_help(help) + '\n';
  out_ += "# TYPE " + current_ + (type == MetricType::counter ? " counter\n" : " gauge\n");
}

void MetricsWriter::sample(const MetricLabels& labels, double value) {
  if (current_.empty()) GENESIS_THROW(InvalidArgumentError, "metric sample without a family");
  if (current_type_ == MetricType::counter && !(value >= 0)) {
    GENESIS_THROW(InvalidArgumentError, "counter '", current_, "' given ", value, ": counters are >= 0");
  }
  out_ += current_;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [name, v] : labels) {
      if (!valid_label_name(name)) GENESIS_THROW(InvalidArgumentError, "invalid label name '", name, "'");
      if (!first) out_ += ',';
      first = false;
      out_ += name;
      out_ += "=\"";
      out_ += escape_label_value(v);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_metric_value(value);
  out_ += '\n';
}

std::string MetricsWriter::take() {
  std::string out = std::move(out_);
  out_.clear();
  current_.clear();
  seen_.clear();
  return out;
}

}  // namespace genesis::debug
