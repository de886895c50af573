// The master's renderings: Prometheus exposition, /status JSON, the live
// table and the service-discovery file.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "genesis/debug/distributed_master.h"
#include "genesis/debug/metrics.h"

namespace genesis::debug {

namespace {

using json = nlohmann::json;

std::string bytes_text(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string seconds_text(double s) {
  if (s < 0) return "-";
  char buf[32];
  if (s < 120) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 7200) std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

// Names come from the workers: no control characters reach the terminal.
std::string printable(std::string text, std::size_t width) {
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return text.substr(0, width);
}

json place_json(const DevicePlace& p) { return {{"node", p.node}, {"device", p.device}, {"value", p.value}}; }

}  // namespace

std::string MasterState::metrics_text(double now_s) const {
  const std::vector<NodeState> all = nodes(now_s);
  const JobSummary s = summary(now_s);
  MetricsWriter w;
  // Memory series of nodes that are up only: the last figures of a node
  // that stopped reporting would read as live. genesis_node_up keeps it
  // visible (Note [Node liveness]).
  std::vector<const NodeFigures*> up;
  for (const NodeState& n : all) {
    if (n.up) up.push_back(&n.figures);
  }
  write_memory_metrics(w, up);
  w.family("genesis_node_up", "1 while the node reports, 0 once it missed 3 intervals.", MetricType::gauge);
  for (const NodeState& n : all) w.sample(n.figures.identity.labels(), n.up ? 1 : 0);
  w.family("genesis_node_last_report_age_seconds", "Seconds since the node's latest report.", MetricType::gauge);
  for (const NodeState& n : all) w.sample(n.figures.identity.labels(), now_s - n.last_seen_s);
  w.family("genesis_distributed_nodes", "Nodes that ever reported.", MetricType::gauge);
  w.sample({}, static_cast<double>(s.nodes));
  w.family("genesis_distributed_nodes_up", "Nodes that report.", MetricType::gauge);
  w.sample({}, static_cast<double>(s.nodes_up));
  w.family("genesis_memory_imbalance_ratio",
           "Spread (max - min) of used / total over the devices of the nodes that report.", MetricType::gauge);
  w.sample({}, s.imbalance_percent / 100.0);
  w.family("genesis_distributed_reports_total", "Reports accepted.", MetricType::counter);
  w.sample({}, static_cast<double>(reports_total()));
  w.family("genesis_distributed_rejected_reports_total", "Reports turned away, by reason.", MetricType::counter);
  std::map<std::string, std::uint64_t> counts = rejected();
  for (const char* reason : {"unauthorized", "replayed", "stale", "too_large", "malformed", "too_many_nodes"}) {
    counts.try_emplace(reason, 0);
  }
  for (const auto& [reason, count] : counts) w.sample({{"reason", reason}}, static_cast<double>(count));
  return w.take();
}

std::string MasterState::status_json(double now_s) const {
  const std::vector<NodeState> all = nodes(now_s);
  const JobSummary s = summary(now_s);
  json nodes_json = json::array();
  for (const NodeState& n : all) {
    const NodeFigures& f = n.figures;
    json devices = json::array();
    for (const DeviceFigures& d : f.devices) {
      const MemorySample& m = d.sample;
      devices.push_back({{"id", d.device},
                         {"name", d.name},
                         {"used", m.used},
                         {"total", m.total},
                         {"allocated", m.allocated},
                         {"reserved", m.reserved},
                         {"active", m.active},
                         {"cached", m.cached},
                         {"largest_free_block", m.largest_free_block},
                         {"num_ooms", m.num_ooms},
                         {"num_allocs", m.num_allocs},
                         {"utilization_percent", m.utilization_percent()},
                         {"usage_percent", d.usage_percent},
                         {"risk_level", std::string(risk_level_name(d.risk_level))},
                         {"predicted_oom_seconds",
                          d.predicted_oom_seconds >= 0 ? json(d.predicted_oom_seconds) : json(nullptr)},
                         {"growth_bytes_per_second", d.growth_bytes_per_second},
                         {"leak_growth_bytes_per_second", d.leak_growth_bytes_per_second},
                         {"leak_detected", d.leak_detected},
                         {"recommendation", d.recommendation}});
    }
    json node = {{"node", f.identity.node},
                 {"name", node_display_name(f.identity)},
                 {"up", n.up},
                 {"last_report_age_s", now_s - n.last_seen_s},
                 {"reports", n.reports},
                 {"peer", n.peer},
                 {"pid", f.pid},
                 {"interval_s", f.interval_s},
                 {"source", f.source},
                 {"metrics_endpoint", f.metrics_endpoint},
                 {"host_rss", f.host_rss},
                 {"warnings", f.warnings},
                 {"devices", std::move(devices)}};
    if (!f.identity.rank.empty()) node["rank"] = f.identity.rank;
    if (!f.identity.local_rank.empty()) node["local_rank"] = f.identity.local_rank;
    if (!f.identity.world_size.empty()) node["world_size"] = f.identity.world_size;
    nodes_json.push_back(std::move(node));
  }
  json summary_json = {{"nodes", s.nodes},
                       {"nodes_up", s.nodes_up},
                       {"devices", s.devices},
                       {"used", s.used},
                       {"total", s.total},
                       {"imbalance_percent", s.imbalance_percent},
                       {"most_loaded", place_json(s.most_loaded)},
                       {"least_loaded", place_json(s.least_loaded)},
                       {"closest_to_oom", place_json(s.closest_to_oom)},
                       {"highest_risk", std::string(risk_level_name(s.highest_risk))},
                       {"warnings", s.warnings}};
  json out = {{"nodes", std::move(nodes_json)},
              {"summary", std::move(summary_json)},
              {"reports_total", reports_total()},
              {"rejected", rejected()}};
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string MasterState::table(double now_s) const {
  const std::vector<NodeState> all = nodes(now_s);
  const JobSummary s = summary(now_s);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%zu node%s (%zu up), %zu device%s up, %s used of %s; imbalance %.1f%%\n",
                s.nodes, s.nodes == 1 ? "" : "s", s.nodes_up, s.devices, s.devices == 1 ? "" : "s",
                bytes_text(s.used).c_str(), bytes_text(s.total).c_str(), s.imbalance_percent);
  out += line;
  std::snprintf(line, sizeof line, "%-24s %-6s %11s %11s %6s %-8s %8s %s\n", "NODE", "DEVICE", "USED", "TOTAL",
                "UTIL", "RISK", "OOM IN", "STATE");
  out += line;
  for (const NodeState& n : all) {
    const std::string name = printable(node_display_name(n.figures.identity), 24);
    for (const DeviceFigures& d : n.figures.devices) {
      std::snprintf(line, sizeof line, "%-24s %-6s %11s %11s %5.1f%% %-8s %8s %s\n", name.c_str(),
                    printable(d.device, 6).c_str(), bytes_text(d.sample.used).c_str(),
                    bytes_text(d.sample.total).c_str(), d.sample.utilization_percent(),
                    std::string(risk_level_name(d.risk_level)).c_str(), seconds_text(d.predicted_oom_seconds).c_str(),
                    n.up ? "up" : "DOWN");
      out += line;
    }
    if (n.figures.devices.empty()) {
      std::snprintf(line, sizeof line, "%-24s %-6s %11s %11s %6s %-8s %8s %s\n", name.c_str(), "-", "-", "-", "-",
                    "-", "-", n.up ? "up" : "DOWN");
      out += line;
    }
  }
  if (s.devices >= 2) {
    std::snprintf(line, sizeof line, "most loaded: %s device %s (%.1f%%); least loaded: %s device %s (%.1f%%)\n",
                  printable(s.most_loaded.node, 80).c_str(), printable(s.most_loaded.device, 16).c_str(),
                  s.most_loaded.value, printable(s.least_loaded.node, 80).c_str(),
                  printable(s.least_loaded.device, 16).c_str(), s.least_loaded.value);
    out += line;
  }
  if (s.devices >= 1) {
    std::snprintf(line, sizeof line, "closest to OOM: %s device %s (%s)\n",
                  printable(s.closest_to_oom.node, 80).c_str(), printable(s.closest_to_oom.device, 16).c_str(),
                  s.closest_to_oom.value >= 0 ? ("OOM in " + seconds_text(s.closest_to_oom.value)).c_str()
                                              : "no OOM predicted");
    out += line;
  }
  const std::size_t first = s.warnings.size() > 5 ? s.warnings.size() - 5 : 0;
  for (std::size_t i = first; i < s.warnings.size(); ++i) out += "warning: " + printable(s.warnings[i], 300) + '\n';
  return out;
}

std::string MasterState::service_discovery_json() const {
  std::vector<NodeState> all = nodes(0);
  json groups = json::array();
  for (const NodeState& n : all) {
    if (n.figures.metrics_endpoint.empty()) continue;
    json labels = json::object();
    for (const auto& [k, v] : n.figures.identity.labels()) labels[k] = v;
    groups.push_back({{"targets", json::array({n.figures.metrics_endpoint})}, {"labels", std::move(labels)}});
  }
  return groups.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace genesis::debug
