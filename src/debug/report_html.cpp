// The self-contained HTML report: inline CSS and SVG drawn here, no scripts
// and no external resources, so the file can be mailed or archived as is.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "genesis/core/error.h"
#include "genesis/debug/reports.h"
#include "report_util.h"

namespace genesis::debug {

namespace {

constexpr std::size_t kChartPoints = 600;

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int digits = 1) { return detail::format_fixed(v, digits); }

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (seconds, value)
};

// Digits after the point that keep four equal steps of `step` apart.
int digits_for_step(double step) { return step >= 10 ? 0 : step >= 1 ? 1 : step >= 0.1 ? 2 : 3; }

// A line chart of `series` in an inline SVG; `unit` labels the y axis. A
// chart of bytes in "GiB" whose values stay below one GiB is drawn in MiB
// (or KiB) instead, and the time axis in ms or us for a run shorter than a
// second, so that a small or short job's axis labels are not all "0.00".
std::string svg_chart(const std::string& title, std::vector<Series> series, std::string unit) {
  constexpr double W = 880, H = 260, L = 70, R = 20, T = 30, B = 40;
  double xmax = 0, ymax = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      xmax = std::max(xmax, x);
      ymax = std::max(ymax, y);
    }
  }
  if (unit == "GiB") {
    for (const char* smaller : {"MiB", "KiB"}) {
      if (ymax <= 0 || ymax >= 1) break;
      for (Series& s : series)
        for (auto& point : s.points) point.second *= 1024;
      ymax *= 1024;
      unit = smaller;
    }
  }
  // A single instant (every point at 0 s) still gets an axis: one second.
  if (xmax <= 0) xmax = 1;
  if (ymax <= 0) ymax = 1;
  ymax *= 1.05;
  const double x_scale = xmax >= 1 ? 1 : xmax >= 1e-3 ? 1e3 : 1e6;
  const char* x_unit = x_scale == 1 ? " s" : x_scale == 1e3 ? " ms" : " us";
  const int x_digits = digits_for_step(xmax * x_scale / 4);
  const int y_digits = digits_for_step(ymax / 4);
  auto px = [&](double x) { return L + (W - L - R) * x / xmax; };
  auto py = [&](double y) { return H - B - (H - T - B) * y / ymax; };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 "
     << W << ' ' << H << "\" role=\"img\">\n";
  os << "<text x=\"" << L << "\" y=\"18\" class=\"ct\">" << escape(title) << "</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double y = ymax * i / 4;
    os << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << num(py(y)) << "\" y2=\"" << num(py(y))
       << "\" class=\"grid\"/><text x=\"" << L - 6 << "\" y=\"" << num(py(y) + 4) << "\" class=\"ax\" text-anchor=\"end\">"
       << num(y, y_digits) << "</text>\n";
    const double x = xmax * i / 4;
    os << "<text x=\"" << num(px(x)) << "\" y=\"" << H - B + 16 << "\" class=\"ax\" text-anchor=\"middle\">"
       << num(x * x_scale, x_digits) << x_unit << "</text>\n";
  }
  os << "<text x=\"12\" y=\"" << num(T + (H - T - B) / 2) << "\" class=\"ax\" transform=\"rotate(-90 12 "
     << num(T + (H - T - B) / 2) << ")\" text-anchor=\"middle\">" << escape(unit) << "</text>\n";
  double lx = W - R - 10.0 * static_cast<double>(series.size()) * 11;
  for (const Series& s : series) {
    if (!s.points.empty()) {
      os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\" points=\"";
      for (const auto& [x, y] : s.points) os << num(px(x)) << ',' << num(py(y)) << ' ';
      os << "\"/>\n";
    }
    os << "<rect x=\"" << num(lx) << "\" y=\"10\" width=\"10\" height=\"10\" fill=\"" << s.color << "\"/><text x=\""
       << num(lx + 14) << "\" y=\"19\" class=\"ax\">" << escape(s.name) << "</text>\n";
    lx += 110;
  }
  os << "</svg>\n";
  return os.str();
}

double since(std::uint64_t t, std::uint64_t first) {
  return t >= first ? static_cast<double>(t - first) * 1e-9 : 0.0;
}

void memory_section(std::ostringstream& os, const MemoryProfiler& p) {
  os << "<h2>Memory over time</h2>\n";
  for (const std::string& id : p.devices()) {
    const SampleHistory& h = p.history(id);
    Series alloc{"allocated", "#1f77b4", {}}, res{"reserved", "#ff7f0e", {}}, total{"total", "#555555", {}};
    for (const SampleBucket& b : detail::thin_buckets(h.buckets(), kChartPoints)) {
      const double t = since(b.mid_ns(), h.first_ns());
      alloc.points.emplace_back(t, b.mean_allocated() / detail::kGiB);
      res.points.emplace_back(t, b.mean_reserved() / detail::kGiB);
      total.points.emplace_back(t, static_cast<double>(b.total) / detail::kGiB);
    }
    os << "<h3>Device " << escape(id) << ": " << escape(p.device(id).name) << "</h3>\n";
    os << "<p>" << h.count() << " samples over " << num(h.duration_seconds()) << " s; peak allocated "
       << escape(genesis::detail::format_bytes(h.peak_allocated())) << ", peak reserved "
       << escape(genesis::detail::format_bytes(h.peak_reserved())) << ", average utilization "
       << num(h.avg_utilization_percent()) << "%.</p>\n";
    os << svg_chart("Device " + id + " memory", {alloc, res, total}, "GiB");
  }
}

void fragmentation_section(std::ostringstream& os, const FragmentationAnalyzer& f) {
  os << "<h2>Fragmentation</h2>\n";
  for (const std::string& id : f.devices()) {
    const SampleHistory& h = f.history(id);
    const FragmentationSummary s = f.summary(id);
    Series ratio{"fragmentation", "#d62728", {}}, ext{"external", "#9467bd", {}};
    for (const SampleBucket& b : detail::thin_buckets(h.buckets(), kChartPoints)) {
      const double t = since(b.mid_ns(), h.first_ns());
      ratio.points.emplace_back(t, 100.0 * b.mean_fragmentation());
      const double cached = std::max(0.0, b.mean_cached());
      ext.points.emplace_back(t, 100.0 * external_fragmentation(b.min_largest_free_block,
                                                                 static_cast<std::uint64_t>(cached)));
    }
    os << "<p>Device " << escape(id) << ": average " << num(100 * s.avg_fragmentation) << "%, maximum "
       << num(100 * s.max_fragmentation) << "%, external now " << num(100 * s.current_external) << "% ("
       << s.current_free_blocks << " free blocks).</p>\n";
    os << svg_chart("Device " + id + " fragmentation", {ratio, ext}, "percent");
  }
}

void oom_section(std::ostringstream& os, const OOMDetector& d) {
  os << "<h2>OOM risk</h2>\n<table><tr><th>device</th><th>risk</th><th>confidence</th><th>usage</th>"
        "<th>growth</th><th>OOM in</th><th>recommendations</th></tr>\n";
  for (const std::string& id : d.devices()) {
    const OOMPrediction p = d.predict(id);
    os << "<tr><td>" << escape(id) << "</td><td class=\"risk-" << risk_level_name(p.risk_level) << "\">"
       << risk_level_name(p.risk_level) << "</td><td>" << num(p.confidence, 2) << "</td><td>"
       << num(p.current_usage_percent) << "%</td><td>" << num(p.growth_rate_bytes_per_sec / 1048576.0, 2)
       << " MiB/s</td><td>" << (p.predicted_oom_seconds < 0 ? std::string("-") : num(p.predicted_oom_seconds, 0) + " s")
       << "</td><td><ul>";
    for (const std::string& r : p.recommendations) os << "<li>" << escape(r) << "</li>";
    os << "</ul></td></tr>\n";
  }
  os << "</table>\n";
}

void leak_section(std::ostringstream& os, const LeakDetector& d) {
  os << "<h2>Leaks</h2>\n";
  for (const std::string& id : d.devices()) {
    const LeakReport r = d.report(id);
    const std::string verdict = r.leak_detected ? "<b>leak detected</b>"
                                : std::string(r.verdict()) == "possible"
                                    ? "<b>possible leak</b> (growth above the threshold, too little of the run to be sure)"
                                    : "no leak detected";
    os << "<p>Device " << escape(id) << ": " << verdict
       << "; troughs grow " << num(r.growth_rate_mb_per_min, 2) << " MiB/min (confidence "
       << num(r.confidence, 2) << ", first " << num(r.warmup_seconds, 0) << " s ignored as warm-up).</p>\n";
    if (r.sites.empty()) continue;
    os << "<table><tr><th>site</th><th>growth</th><th>rate</th><th>held</th><th>count</th></tr>\n";
    for (const LeakSite& s : r.sites) {
      os << "<tr><td><pre>" << escape(s.site) << "</pre></td><td>"
         << escape(genesis::detail::format_bytes(static_cast<unsigned long long>(s.growth_bytes))) << "</td><td>"
         << num(s.growth_rate_mb_per_min, 2) << " MiB/min</td><td>" << escape(genesis::detail::format_bytes(s.bytes))
         << "</td><td>" << s.count << "</td></tr>\n";
    }
    os << "</table>\n";
  }
}

}  // namespace

std::string html_report(const HtmlReportInput& in) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape(in.title)
     << "</title>\n<style>\n"
        "body{font-family:sans-serif;margin:2em;color:#222}h1{font-size:1.5em}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left;vertical-align:top}td ul{margin:0;padding-left:1.2em}pre{margin:0;font-size:0.85em}"
        ".grid{stroke:#e5e5e5}.ax{font-size:11px;fill:#555}.ct{font-size:13px;font-weight:bold}"
        ".risk-low{color:#2a7}.risk-medium{color:#c80}.risk-high{color:#d40}.risk-critical{color:#c00;"
        "font-weight:bold}\n</style></head><body>\n";
  os << "<h1>" << escape(in.title) << "</h1>\n<p>Source: " << escape(in.source) << "<br>Generated "
     << detail::utc_timestamp() << "</p>\n";
  if (in.profiler) memory_section(os, *in.profiler);
  if (in.fragmentation) fragmentation_section(os, *in.fragmentation);
  if (in.oom) oom_section(os, *in.oom);
  if (in.leak) leak_section(os, *in.leak);
  os << "</body></html>\n";
  return os.str();
}

}  // namespace genesis::debug
