// Memory figures per node and device, and their Prometheus families
// (Note [Memory metrics] in memory_metrics.h).
#include "genesis/debug/memory_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "genesis/core/error.h"
#include "genesis/debug/memory_debugger.h"

namespace genesis::debug {

namespace {

constexpr std::size_t kMaxWarnings = 20;

std::string env_index(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0' || std::strlen(v) > 9) return {};
  for (const char* p = v; *p != '\0'; ++p) {
    if (!std::isdigit(static_cast<unsigned char>(*p))) return {};
  }
  return v;
}

MetricLabels device_labels(const NodeFigures& n, const DeviceFigures& d) {
  MetricLabels l = n.identity.labels();
  l.emplace_back("device", d.device);
  return l;
}

// One family with a sample per device of every node.
template <typename Get>
void per_device(MetricsWriter& w, const std::vector<const NodeFigures*>& nodes, const char* name,
                const char* help, MetricType type, Get get) {
  w.family(name, help, type);
  for (const NodeFigures* n : nodes) {
    for (const DeviceFigures& d : n->devices) w.sample(device_labels(*n, d), get(d));
  }
}

}  // namespace

MetricLabels NodeIdentity::labels() const {
  MetricLabels l;
  l.emplace_back("node", node);
  if (!rank.empty()) l.emplace_back("rank", rank);
  if (!local_rank.empty()) l.emplace_back("local_rank", local_rank);
  if (!world_size.empty()) l.emplace_back("world_size", world_size);
  return l;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

NodeIdentity NodeIdentity::from_environment() {
  NodeIdentity id;
  id.node = host_name();
  id.rank = env_index("RANK");
  id.local_rank = env_index("LOCAL_RANK");
  id.world_size = env_index("WORLD_SIZE");
  return id;
}

std::uint64_t self_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<std::uint64_t>(resident) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

void write_memory_metrics(MetricsWriter& w, const std::vector<const NodeFigures*>& nodes) {
  using T = MetricType;
  auto u = [](std::uint64_t v) { return static_cast<double>(v); };
  per_device(w, nodes, "genesis_memory_allocated_bytes", "Bytes in live allocations.", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.allocated); });
  per_device(w, nodes, "genesis_memory_reserved_bytes", "Bytes the allocator took from the driver.", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.reserved); });
  per_device(w, nodes, "genesis_memory_active_bytes",
             "Allocated bytes plus freed blocks still in use by other streams.", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.active); });
  per_device(w, nodes, "genesis_memory_cached_bytes", "Reserved bytes not allocated (the cache).", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.cached); });
  per_device(w, nodes, "genesis_memory_total_bytes", "Device capacity.", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.total); });
  per_device(w, nodes, "genesis_memory_used_bytes", "Bytes the device counts as in use.", T::gauge,
             [&](const DeviceFigures& d) { return u(d.sample.used); });
  per_device(w, nodes, "genesis_memory_fragmentation_ratio", "(reserved - allocated) / reserved, 0 to 1.", T::gauge,
             [&](const DeviceFigures& d) { return d.sample.fragmentation(); });
  per_device(w, nodes, "genesis_memory_largest_free_block_bytes", "Largest free block inside the reserved memory.",
             T::gauge, [&](const DeviceFigures& d) { return u(d.sample.largest_free_block); });
  per_device(w, nodes, "genesis_memory_ooms_total", "Out-of-memory errors so far.", T::counter,
             [&](const DeviceFigures& d) { return u(d.sample.num_ooms); });
  per_device(w, nodes, "genesis_memory_allocations_total", "Allocations so far.", T::counter,
             [&](const DeviceFigures& d) { return u(d.sample.num_allocs); });
  per_device(w, nodes, "genesis_memory_usage_ratio", "Usage the OOM predictor judges (0 to 1 of capacity).",
             T::gauge, [&](const DeviceFigures& d) { return d.usage_percent / 100.0; });
  per_device(w, nodes, "genesis_memory_oom_risk_level", "OOM risk: 0 low, 1 medium, 2 high, 3 critical.", T::gauge,
             [&](const DeviceFigures& d) { return static_cast<double>(d.risk_level); });
  w.family("genesis_memory_oom_risk", "1 for the current OOM risk level of the device, 0 for the others.",
           T::gauge);
  for (const NodeFigures* n : nodes) {
    for (const DeviceFigures& d : n->devices) {
      for (RiskLevel level : {RiskLevel::low, RiskLevel::medium, RiskLevel::high, RiskLevel::critical}) {
        MetricLabels l = device_labels(*n, d);
        l.emplace_back("level", std::string(risk_level_name(level)));
        w.sample(l, d.risk_level == level ? 1 : 0);
      }
    }
  }
  per_device(w, nodes, "genesis_memory_predicted_oom_seconds",
             "Seconds until the device runs out of memory at the current growth; +Inf when none is predicted.",
             T::gauge, [&](const DeviceFigures& d) {
               return d.predicted_oom_seconds >= 0 ? d.predicted_oom_seconds
                                                   : std::numeric_limits<double>::infinity();
             });
  per_device(w, nodes, "genesis_memory_growth_bytes_per_second", "Growth of the peaks of memory use.", T::gauge,
             [&](const DeviceFigures& d) { return d.growth_bytes_per_second; });
  per_device(w, nodes, "genesis_memory_leak_growth_bytes_per_second",
             "Steady growth of the troughs of live memory after warm-up (leak detector).", T::gauge,
             [&](const DeviceFigures& d) { return d.leak_growth_bytes_per_second; });
  per_device(w, nodes, "genesis_memory_leak_detected", "1 when the growth counts as a leak.", T::gauge,
             [&](const DeviceFigures& d) { return d.leak_detected ? 1.0 : 0.0; });
  w.family("genesis_memory_host_resident_bytes", "Resident host memory of the watched process.", T::gauge);
  for (const NodeFigures* n : nodes) {
    if (n->host_rss > 0) w.sample(n->identity.labels(), u(n->host_rss));
  }
}

FiguresCollector::FiguresCollector(MemoryDebugger& debugger, NodeIdentity identity, bool self_rss)
    : debugger_(debugger), identity_(std::move(identity)), self_rss_(self_rss), state_(std::make_shared<State>()) {
  std::shared_ptr<State> state = state_;
  debugger.on_sample([state](const std::string& device, const MemorySample& s) {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->latest[device] = s;
    }
    state->sampled.notify_all();
  });
  if (debugger.oom_detector() != nullptr) {
    debugger.on_oom_warning([state](const std::string& device, const OOMPrediction& p) {
      std::string text = std::string(risk_level_name(p.risk_level)) + " OOM risk on device " + device + ": " +
                         std::to_string(static_cast<int>(p.current_usage_percent + 0.5)) + "% used";
      if (p.predicted_oom_seconds >= 0) {
        text += ", OOM in " + std::to_string(static_cast<long long>(p.predicted_oom_seconds)) + " s";
      }
      std::lock_guard<std::mutex> lock(state->mutex);
      state->warnings.push_back(std::move(text));
      if (state->warnings.size() > kMaxWarnings) state->warnings.erase(state->warnings.begin());
    });
  }
}

bool FiguresCollector::wait_for_samples(std::chrono::milliseconds timeout) const {
  const std::vector<SourceDevice> devices = debugger_.devices();
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->sampled.wait_for(lock, timeout, [&] {
    for (const SourceDevice& d : devices)
      if (state_->latest.count(d.id) == 0) return false;
    return true;
  });
}

NodeFigures FiguresCollector::figures() const {
  NodeFigures n;
  n.identity = identity_;
  n.interval_s = debugger_.options().interval_s;
  n.source = debugger_.source_description();
  n.pid = static_cast<std::int64_t>(getpid());
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (const SourceDevice& sd : debugger_.devices()) {
      auto it = state_->latest.find(sd.id);
      if (it == state_->latest.end()) continue;
      DeviceFigures d;
      d.device = sd.id;
      d.name = sd.name;
      d.sample = it->second;
      d.usage_percent = d.sample.utilization_percent();
      n.host_rss = std::max(n.host_rss, d.sample.host_rss);
      n.devices.push_back(std::move(d));
    }
    n.warnings = state_->warnings;
  }
  {
    std::unique_lock<std::mutex> lock = debugger_.lock();
    const OOMDetector* oom = debugger_.oom_detector();
    const LeakDetector* leak = debugger_.leak_detector();
    const std::vector<std::string> oom_devices = oom != nullptr ? oom->devices() : std::vector<std::string>{};
    const std::vector<std::string> leak_devices = leak != nullptr ? leak->devices() : std::vector<std::string>{};
    for (DeviceFigures& d : n.devices) {
      if (std::find(oom_devices.begin(), oom_devices.end(), d.device) != oom_devices.end()) {
        const OOMPrediction p = oom->predict(d.device);
        d.risk_level = p.risk_level;
        d.usage_percent = p.current_usage_percent;
        d.predicted_oom_seconds = p.predicted_oom_seconds;
        d.growth_bytes_per_second = p.growth_rate_bytes_per_sec;
        if (!p.recommendations.empty()) d.recommendation = p.recommendations.front();
      }
      if (std::find(leak_devices.begin(), leak_devices.end(), d.device) != leak_devices.end()) {
        const LeakReport r = leak->report(d.device);
        d.leak_growth_bytes_per_second = r.growth_rate_mb_per_min * 1048576.0 / 60.0;
        d.leak_detected = r.leak_detected;
      }
    }
  }
  if (n.host_rss == 0 && self_rss_) n.host_rss = self_resident_bytes();
  return n;
}

}  // namespace genesis::debug
