// Node reports as JSON, checked field by field (Note [Node reports]).
#include "genesis/debug/node_report.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "genesis/core/error.h"

namespace genesis::debug {

namespace {

using json = nlohmann::json;

const json& field(const json& obj, const char* name, const char* where) {
  auto it = obj.find(name);
  if (it == obj.end()) GENESIS_THROW(InvalidArgumentError, where, ": missing field '", name, "'");
  return *it;
}

std::string get_string(const json& obj, const char* name, const char* where, const NodeReportLimits& lim,
                       bool required = false) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    if (required) GENESIS_THROW(InvalidArgumentError, where, ": missing field '", name, "'");
    return {};
  }
  if (!it->is_string()) GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be a string");
  std::string s = it->get<std::string>();
  if (s.size() > lim.max_string) {
    GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' longer than ", lim.max_string, " bytes");
  }
  return s;
}

std::uint64_t get_bytes(const json& obj, const char* name, const char* where) {
  auto it = obj.find(name);
  if (it == obj.end()) return 0;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0)) {
    GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be a non-negative integer");
  }
  return it->get<std::uint64_t>();
}

double get_number(const json& obj, const char* name, const char* where, double fallback) {
  auto it = obj.find(name);
  if (it == obj.end()) return fallback;
  if (!it->is_number()) GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be finite");
  return v;
}

// An index label: digits only (RANK and friends), so that labels stay sane.
std::string get_index(const json& obj, const char* name, const char* where, const NodeReportLimits& lim) {
  std::string s = get_string(obj, name, where, lim);
  if (s.size() > 9) GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be a small integer");
  for (char c : s) {
    if (c < '0' || c > '9') GENESIS_THROW(InvalidArgumentError, where, ": '", name, "' must be digits");
  }
  return s;
}

}  // namespace

std::string node_report_json(const NodeFigures& n) {
  json j;
  j["version"] = 1;
  j["node"] = n.identity.node;
  if (!n.identity.rank.empty()) j["rank"] = n.identity.rank;
  if (!n.identity.local_rank.empty()) j["local_rank"] = n.identity.local_rank;
  if (!n.identity.world_size.empty()) j["world_size"] = n.identity.world_size;
  j["pid"] = n.pid;
  j["interval_s"] = n.interval_s;
  j["source"] = n.source;
  j["metrics_endpoint"] = n.metrics_endpoint;
  j["host_rss"] = n.host_rss;
  j["warnings"] = n.warnings;
  json devices = json::array();
  for (const DeviceFigures& d : n.devices) {
    const MemorySample& s = d.sample;
    devices.push_back({{"id", d.device},
                       {"name", d.name},
                       {"total", s.total},
                       {"used", s.used},
                       {"allocated", s.allocated},
                       {"reserved", s.reserved},
                       {"active", s.active},
                       {"cached", s.cached},
                       {"largest_free_block", s.largest_free_block},
                       {"num_ooms", s.num_ooms},
                       {"num_allocs", s.num_allocs},
                       {"exact", s.exact},
                       {"risk_level", static_cast<int>(d.risk_level)},
                       {"usage_percent", d.usage_percent},
                       {"predicted_oom_seconds", d.predicted_oom_seconds},
                       {"growth_bytes_per_second", d.growth_bytes_per_second},
                       {"leak_growth_bytes_per_second", d.leak_growth_bytes_per_second},
                       {"leak_detected", d.leak_detected},
                       {"recommendation", d.recommendation}});
  }
  j["devices"] = std::move(devices);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

NodeFigures parse_node_report(std::string_view body, const NodeReportLimits& lim) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) GENESIS_THROW(InvalidArgumentError, "report: malformed JSON");
  if (!j.is_object()) GENESIS_THROW(InvalidArgumentError, "report: expected a JSON object");
  const char* where = "report";
  const json& version = field(j, "version", where);
  if (!version.is_number_integer() || version.get<std::int64_t>() != 1) {
    GENESIS_THROW(InvalidArgumentError, "report: unsupported 'version' (expected 1)");
  }
  NodeFigures n;
  n.identity.node = get_string(j, "node", where, lim, true);
  if (n.identity.node.empty()) GENESIS_THROW(InvalidArgumentError, "report: 'node' is empty");
  n.identity.rank = get_index(j, "rank", where, lim);
  n.identity.local_rank = get_index(j, "local_rank", where, lim);
  n.identity.world_size = get_index(j, "world_size", where, lim);
  n.pid = static_cast<std::int64_t>(get_bytes(j, "pid", where));
  n.interval_s = get_number(j, "interval_s", where, 1);
  if (!(n.interval_s > 0 && n.interval_s <= 3600)) {
    GENESIS_THROW(InvalidArgumentError, "report: 'interval_s' must be in (0, 3600]");
  }
  n.source = get_string(j, "source", where, lim);
  n.metrics_endpoint = get_string(j, "metrics_endpoint", where, lim);
  n.host_rss = get_bytes(j, "host_rss", where);
  if (auto it = j.find("warnings"); it != j.end()) {
    if (!it->is_array()) GENESIS_THROW(InvalidArgumentError, "report: 'warnings' must be a list");
    if (it->size() > lim.max_warnings) GENESIS_THROW(InvalidArgumentError, "report: too many warnings");
    for (const json& w : *it) {
      if (!w.is_string()) GENESIS_THROW(InvalidArgumentError, "report: 'warnings' must hold strings");
      std::string s = w.get<std::string>();
      if (s.size() > lim.max_string) GENESIS_THROW(InvalidArgumentError, "report: a warning is too long");
      n.warnings.push_back(std::move(s));
    }
  }
  const json& devices = field(j, "devices", where);
  if (!devices.is_array()) GENESIS_THROW(InvalidArgumentError, "report: 'devices' must be a list");
  if (devices.size() > lim.max_devices) {
    GENESIS_THROW(InvalidArgumentError, "report: more than ", lim.max_devices, " devices");
  }
  for (const json& dj : devices) {
    const char* dw = "report device";
    if (!dj.is_object()) GENESIS_THROW(InvalidArgumentError, "report: each device must be an object");
    DeviceFigures d;
    d.device = get_string(dj, "id", dw, lim, true);
    if (d.device.empty()) GENESIS_THROW(InvalidArgumentError, "report device: 'id' is empty");
    for (const DeviceFigures& other : n.devices) {
      if (other.device == d.device) GENESIS_THROW(InvalidArgumentError, "report: device '", d.device, "' twice");
    }
    d.name = get_string(dj, "name", dw, lim);
    MemorySample& s = d.sample;
    s.total = get_bytes(dj, "total", dw);
    s.used = get_bytes(dj, "used", dw);
    s.free = s.total > s.used ? s.total - s.used : 0;
    s.allocated = get_bytes(dj, "allocated", dw);
    s.reserved = get_bytes(dj, "reserved", dw);
    s.active = get_bytes(dj, "active", dw);
    s.cached = get_bytes(dj, "cached", dw);
    s.largest_free_block = get_bytes(dj, "largest_free_block", dw);
    s.num_ooms = get_bytes(dj, "num_ooms", dw);
    s.num_allocs = get_bytes(dj, "num_allocs", dw);
    if (auto it = dj.find("exact"); it != dj.end()) {
      if (!it->is_boolean()) GENESIS_THROW(InvalidArgumentError, "report device: 'exact' must be true or false");
      s.exact = it->get<bool>();
    }
    const double risk = get_number(dj, "risk_level", dw, 0);
    if (risk != 0 && risk != 1 && risk != 2 && risk != 3) {
      GENESIS_THROW(InvalidArgumentError, "report device: 'risk_level' must be 0, 1, 2 or 3");
    }
    d.risk_level = static_cast<RiskLevel>(static_cast<int>(risk));
    d.usage_percent = get_number(dj, "usage_percent", dw, s.utilization_percent());
    d.predicted_oom_seconds = get_number(dj, "predicted_oom_seconds", dw, -1);
    d.growth_bytes_per_second = get_number(dj, "growth_bytes_per_second", dw, 0);
    d.leak_growth_bytes_per_second = get_number(dj, "leak_growth_bytes_per_second", dw, 0);
    if (auto it = dj.find("leak_detected"); it != dj.end()) {
      if (!it->is_boolean()) GENESIS_THROW(InvalidArgumentError, "report device: 'leak_detected' must be true or false");
      d.leak_detected = it->get<bool>();
    }
    d.recommendation = get_string(dj, "recommendation", dw, lim);
    n.devices.push_back(std::move(d));
  }
  return n;
}

}  // namespace genesis::debug
