// The master's nodes, liveness and job summary (Note [Node liveness]).
#include "genesis/debug/distributed_master.h"

#include <algorithm>

#include "genesis/core/error.h"

namespace genesis::debug {

namespace {

constexpr std::size_t kMaxSummaryWarnings = 50;

double utilisation(const DeviceFigures& d) {
  return d.sample.total > 0 ? 100.0 * static_cast<double>(d.sample.used) / static_cast<double>(d.sample.total) : 0;
}

}  // namespace

std::string node_display_name(const NodeIdentity& id) {
  return id.rank.empty() ? id.node : id.node + " rank " + id.rank;
}

MasterState::MasterState(MasterOptions options) : options_(options) {
  if (!(options_.down_after_intervals > 0)) {
    GENESIS_THROW(InvalidArgumentError, "down_after_intervals must be > 0");
  }
  if (options_.max_nodes == 0) GENESIS_THROW(InvalidArgumentError, "max_nodes must be > 0");
}

bool MasterState::is_up(const NodeState& n, double now_s, double intervals) noexcept {
  return now_s - n.last_seen_s <= intervals * n.figures.interval_s;
}

bool MasterState::accept(NodeFigures figures, double now_s, std::string peer) {
  std::string key = figures.identity.node + '\x1f' + figures.identity.rank;
  std::lock_guard<std::mutex> lock(mutex_);
  if (nodes_.size() >= options_.max_nodes && nodes_.count(key) == 0) {
    ++rejected_["too_many_nodes"];
    return false;
  }
  ++reports_;
  auto [it, fresh] = nodes_.try_emplace(std::move(key));
  NodeState& n = it->second;
  if (fresh) n.first_seen_s = now_s;
  n.figures = std::move(figures);
  n.peer = std::move(peer);
  n.last_seen_s = now_s;
  ++n.reports;
  return true;
}

void MasterState::reject(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++rejected_[reason];
}

std::vector<NodeState> MasterState::nodes(double now_s) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<NodeState> out;
  out.reserve(nodes_.size());
  for (const auto& [key, n] : nodes_) {
    out.push_back(n);
    out.back().up = is_up(n, now_s, options_.down_after_intervals);
  }
  return out;
}

JobSummary MasterState::summary(double now_s) const {
  JobSummary s;
  std::lock_guard<std::mutex> lock(mutex_);
  double lo = 0, hi = 0;
  bool any = false;
  double best_oom = -1;
  int best_rank = -1;
  double best_usage = -1;
  s.nodes = nodes_.size();
  for (const auto& [key, n] : nodes_) {
    const std::string name = node_display_name(n.figures.identity);
    for (const std::string& w : n.figures.warnings) {
      s.warnings.push_back(name + ": " + w);
    }
    if (!is_up(n, now_s, options_.down_after_intervals)) continue;
    ++s.nodes_up;
    for (const DeviceFigures& d : n.figures.devices) {
      ++s.devices;
      s.used += d.sample.used;
      s.total += d.sample.total;
      const double u = utilisation(d);
      if (!any || u > hi) {
        hi = u;
        s.most_loaded = {name, d.device, u};
      }
      if (!any || u < lo) {
        lo = u;
        s.least_loaded = {name, d.device, u};
      }
      any = true;
      s.highest_risk = std::max(s.highest_risk, d.risk_level);
      // Closest to OOM: a predicted time beats none; among predictions the
      // shortest; without any, the highest risk, then the highest usage.
      const bool predicted = d.predicted_oom_seconds >= 0;
      bool better = false;
      if (predicted) {
        better = best_oom < 0 || d.predicted_oom_seconds < best_oom;
      } else if (best_oom < 0) {
        const int r = static_cast<int>(d.risk_level);
        better = r > best_rank || (r == best_rank && d.usage_percent > best_usage);
      }
      if (better) {
        best_oom = predicted ? d.predicted_oom_seconds : -1;
        best_rank = static_cast<int>(d.risk_level);
        best_usage = d.usage_percent;
        s.closest_to_oom = {name, d.device, best_oom};
      }
    }
  }
  if (s.devices >= 2) s.imbalance_percent = hi - lo;
  if (s.warnings.size() > kMaxSummaryWarnings) {
    s.warnings.erase(s.warnings.begin(), s.warnings.end() - kMaxSummaryWarnings);
  }
  return s;
}

std::uint64_t MasterState::reports_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reports_;
}

std::map<std::string, std::uint64_t> MasterState::rejected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rejected_;
}

}  // namespace genesis::debug
