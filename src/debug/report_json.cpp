#include <ctime>

#include <nlohmann/json.hpp>

#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/reports.h"
#include "report_util.h"

namespace genesis::debug {

using nlohmann::json;

namespace detail {

std::vector<SampleBucket> thin_buckets(const std::vector<SampleBucket>& buckets, std::size_t max_points) {
  if (max_points == 0 || buckets.size() <= max_points) return buckets;
  std::vector<SampleBucket> out;
  out.reserve(max_points);
  const std::size_t n = buckets.size();
  for (std::size_t g = 0; g < max_points; ++g) {
    const std::size_t begin = g * n / max_points;
    const std::size_t end = (g + 1) * n / max_points;
    SampleBucket b = buckets[begin];
    for (std::size_t j = begin + 1; j < end; ++j) b.merge(buckets[j]);
    out.push_back(b);
  }
  return out;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string json_text(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace detail

namespace {

constexpr double kMiB = 1048576.0;

double seconds_since(std::uint64_t t_ns, std::uint64_t first_ns) {
  return t_ns >= first_ns ? static_cast<double>(t_ns - first_ns) * 1e-9 : 0.0;
}

json history_point(const SampleBucket& b, std::uint64_t first_ns) {
  return {{"t", seconds_since(b.mid_ns(), first_ns)},
          {"count", b.count},
          {"allocated", static_cast<std::uint64_t>(b.mean_allocated())},
          {"reserved", static_cast<std::uint64_t>(b.mean_reserved())},
          {"used", static_cast<std::uint64_t>(b.mean_used())},
          {"total", b.total},
          {"allocated_max", b.allocated.max},
          {"reserved_max", b.reserved.max},
          {"used_max", b.used.max},
          {"allocated_min", b.allocated.min},
          {"fragmentation", 100.0 * b.mean_fragmentation()},
          {"host_rss_max", b.max_host_rss}};
}

json profile_device(const MemoryProfiler& profiler, const std::string& id, std::size_t max_points) {
  const SampleHistory& h = profiler.history(id);
  const MemorySample& s = h.last();
  json history = json::array();
  for (const SampleBucket& b : detail::thin_buckets(h.buckets(), max_points)) {
    history.push_back(history_point(b, h.first_ns()));
  }
  return {{"name", profiler.device(id).name},
          {"current_memory",
           {{"allocated", s.allocated},
            {"free", s.free},
            {"total", s.total},
            {"used", s.used},
            {"utilization", s.utilization_percent()},
            {"reserved", s.reserved},
            {"cached", s.cached},
            {"active", s.active},
            {"largest_free_block", s.largest_free_block},
            {"free_blocks", s.free_blocks},
            {"num_ooms", s.num_ooms},
            {"num_allocs", s.num_allocs},
            {"host_rss", s.host_rss},
            {"exact", s.exact}}},
          {"peak_memory", h.peak_allocated()},
          {"peaks", {{"allocated", h.peak_allocated()}, {"used", h.peak_used()}, {"reserved", h.peak_reserved()}}},
          {"statistics",
           {{"avg_utilization", h.avg_utilization_percent()},
            {"max_utilization", h.max_utilization_percent()},
            {"avg_fragmentation", 100.0 * h.avg_fragmentation()},
            {"max_fragmentation", 100.0 * h.max_fragmentation()},
            {"num_snapshots", h.count()},
            {"merged_snapshots", h.merged()},
            {"history_bytes", h.bytes()},
            {"duration_seconds", h.duration_seconds()}}},
          {"history", std::move(history)}};
}

json profile_json(const MemoryProfiler& profiler, const std::string& source, std::size_t max_points) {
  json devices = json::object();
  double total = 0;
  double used = 0;
  double duration = 0;
  std::size_t n = 0;
  for (const std::string& id : profiler.devices()) {
    const SampleHistory& h = profiler.history(id);
    devices[id] = profile_device(profiler, id, max_points);
    ++n;
    const std::uint64_t cap = h.empty() ? profiler.device(id).total : h.last().total;
    total += static_cast<double>(cap);
    used += static_cast<double>(h.last().used);
    duration = std::max(duration, h.duration_seconds());
  }
  return {{"timestamp", detail::utc_timestamp()},
          {"source", source},
          {"devices", std::move(devices)},
          {"summary",
           {{"total_devices", n},
            {"total_memory_gb", total / detail::kGiB},
            {"overall_utilization", total > 0 ? 100.0 * used / total : 0.0},
            {"duration_seconds", duration}}}};
}

json oom_json(const OOMDetector& detector) {
  json devices = json::object();
  for (const std::string& id : detector.devices()) {
    const OOMPrediction p = detector.predict(id);
    json warnings = json::array();
    for (const OOMWarning& w : detector.warnings(id)) {
      warnings.push_back({{"time_ns", w.time_ns}, {"risk_level", risk_level_name(w.level)}, {"message", w.message}});
    }
    devices[id] = {
        {"risk_assessment",
         {{"risk_level", risk_level_name(p.risk_level)},
          {"confidence", p.confidence},
          {"current_usage_percent", p.current_usage_percent},
          {"growth_rate_mb_per_sec", p.growth_rate_bytes_per_sec / kMiB},
          {"growth_rate_bytes_per_sec", p.growth_rate_bytes_per_sec},
          {"predicted_oom_time_seconds", p.predicted_oom_seconds},
          {"steady_growth", steady_growth(p)},
          {"ooms", p.ooms},
          {"recommendation", p.recommendations.empty() ? std::string() : p.recommendations.front()},
          {"recommendations", p.recommendations}}},
        {"threshold_percent", detector.options().threshold_percent},
        {"warnings", std::move(warnings)}};
  }
  return {{"devices", std::move(devices)}};
}

json leak_json(const LeakDetector& detector) {
  json devices = json::object();
  for (const std::string& id : detector.devices()) {
    const LeakReport r = detector.report(id);
    json sites = json::array();
    for (const LeakSite& s : r.sites) {
      sites.push_back({{"site", s.site},
                       {"frames", s.frames},
                       {"growth_bytes", s.growth_bytes},
                       {"growth_rate_mb_per_min", s.growth_rate_mb_per_min},
                       {"bytes", s.bytes},
                       {"count", s.count}});
    }
    devices[id] = {{"leak_detected", r.leak_detected},
                   {"verdict", r.verdict()},
                   {"growth_rate_mb_per_min", r.growth_rate_mb_per_min},
                   {"confidence", r.confidence},
                   {"threshold_mb_per_min", r.threshold_mb_per_min},
                   {"window_seconds", r.window_seconds},
                   {"warmup_seconds", r.warmup_seconds},
                   {"duration_seconds", r.duration_seconds},
                   {"tracking", r.tracking},
                   {"sites", std::move(sites)}};
  }
  return {{"devices", std::move(devices)}};
}

json fragment_json(const FragmentationAnalyzer& analyzer, std::size_t max_samples) {
  json devices = json::object();
  for (const std::string& id : analyzer.devices()) {
    const FragmentationSummary f = analyzer.summary(id);
    const SampleHistory& h = analyzer.history(id);
    json samples = json::array();
    for (const SampleBucket& b : detail::thin_buckets(h.buckets(), max_samples)) {
      const double cached = std::max(0.0, b.mean_cached());
      samples.push_back({{"t", seconds_since(b.mid_ns(), h.first_ns())},
                         {"count", b.count},
                         {"fragmentation", 100.0 * b.mean_fragmentation()},
                         {"max_fragmentation", 100.0 * b.fragmentation_max},
                         {"cached", static_cast<std::uint64_t>(cached)},
                         {"reserved", static_cast<std::uint64_t>(b.mean_reserved())},
                         {"allocated", static_cast<std::uint64_t>(b.mean_allocated())},
                         {"largest_free_block", b.min_largest_free_block},
                         {"free_blocks", b.max_free_blocks},
                         {"external_fragmentation",
                          100.0 * external_fragmentation(b.min_largest_free_block, static_cast<std::uint64_t>(cached))}});
    }
    devices[id] = {{"samples", std::move(samples)},
                   {"num_samples", f.samples},
                   {"current_fragmentation", 100.0 * f.current_fragmentation},
                   {"avg_fragmentation", 100.0 * f.avg_fragmentation},
                   {"max_fragmentation", 100.0 * f.max_fragmentation},
                   {"current_external_fragmentation", 100.0 * f.current_external},
                   {"avg_external_fragmentation", 100.0 * f.avg_external},
                   {"max_external_fragmentation", 100.0 * f.max_external},
                   {"current_cached", f.current_cached},
                   {"avg_cached", f.avg_cached},
                   {"max_cached", f.max_cached},
                   {"largest_free_block", f.current_largest_free_block},
                   {"free_blocks", f.current_free_blocks},
                   {"max_free_blocks", f.max_free_blocks}};
  }
  return {{"devices", std::move(devices)}};
}

}  // namespace

std::string profile_report_json(const MemoryProfiler& profiler, const std::string& source_description,
                                std::size_t max_history_points) {
  return detail::json_text(profile_json(profiler, source_description, max_history_points), 2);
}

std::string oom_report_json(const OOMDetector& detector) { return detail::json_text(oom_json(detector), 2); }
std::string leak_report_json(const LeakDetector& detector) { return detail::json_text(leak_json(detector), 2); }
std::string fragment_report_json(const FragmentationAnalyzer& analyzer, std::size_t max_samples) {
  return detail::json_text(fragment_json(analyzer, max_samples), 2);
}

std::string status_report_json(const MemoryDebugger& d) {
  // A status report is asked for while the job runs: keep it small.
  constexpr std::size_t kStatusPoints = 200;
  const std::string& source = d.source_description();
  const SamplerCost& c = d.cost_unlocked();
  json out = {{"timestamp", detail::utc_timestamp()},
              {"source", source},
              {"running", d.running()},
              {"end_reason", d.end_reason_unlocked()},
              {"sampler",
               {{"interval_seconds", d.options().interval_s},
                {"rounds", c.rounds},
                {"sampling_cpu_seconds", static_cast<double>(c.sampling_cpu_ns) * 1e-9},
                {"thread_cpu_seconds", static_cast<double>(c.thread_cpu_ns) * 1e-9},
                {"percent_of_core", c.percent_of_core()}}},
              {"elapsed_seconds", static_cast<double>(c.source_elapsed_ns) * 1e-9}};
  if (d.profiler()) out["profile"] = profile_json(*d.profiler(), source, kStatusPoints);
  if (d.oom_detector()) out["oom"] = oom_json(*d.oom_detector());
  if (d.leak_detector()) out["leak"] = leak_json(*d.leak_detector());
  if (d.fragmentation()) out["fragment"] = fragment_json(*d.fragmentation(), kStatusPoints);
  return detail::json_text(out, 2);
}

}  // namespace genesis::debug
