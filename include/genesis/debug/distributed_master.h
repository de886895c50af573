// What the master of the distributed memory monitor knows: every node that
// ever reported, up or down, and what the job looks like across them.
//
// Note [Node liveness]: a node is up while its latest report is at most
// `down_after_intervals` of its own reporting intervals old, and down after
// that. Nodes are never removed: a node that died stays visible (as down,
// with its last figures) until the master exits, and the same node
// reporting again is up again. A node is its name and rank together, so
// several ranks on one host are several nodes. The state is plain data
// driven by explicit times, so the rules are tested without a clock or a
// network (Note [Node reports] explains why a restarted master recovers).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "genesis/debug/memory_metrics.h"

namespace genesis::debug {

/// One node as the master sees it.
struct NodeState {
  NodeFigures figures;   ///< from its latest report
  std::string peer;      ///< address the latest report came from
  double first_seen_s = 0;
  double last_seen_s = 0;
  std::uint64_t reports = 0;
  bool up = false;
};

/// A device of a node, for the summary.
struct DevicePlace {
  std::string node;    ///< "gpu-07" or "gpu-07 rank 3"
  std::string device;
  double value = 0;    ///< utilisation percent, or seconds to OOM
};

/// The job across the nodes that are up.
struct JobSummary {
  std::size_t nodes = 0;
  std::size_t nodes_up = 0;
  std::size_t devices = 0;  ///< of nodes that are up
  std::uint64_t used = 0;
  std::uint64_t total = 0;
  /// Utilisation spread: max - min of used / total in percent over the
  /// devices of nodes that are up (0 with fewer than two).
  double imbalance_percent = 0;
  DevicePlace most_loaded;
  DevicePlace least_loaded;
  /// The device with the shortest predicted time to OOM, or else the
  /// highest risk and usage; value = seconds to OOM (negative: none).
  DevicePlace closest_to_oom;
  RiskLevel highest_risk = RiskLevel::low;
  /// Recent OOM warnings of every node, "node: warning".
  std::vector<std::string> warnings;
};

struct MasterOptions {
  double down_after_intervals = 3;  ///< Note [Node liveness]
  /// Nodes are never removed: a cap keeps a misbehaving (authenticated)
  /// sender from growing the master without bound.
  std::size_t max_nodes = 100000;
};

/// The nodes and the counters of a master. Thread-safe.
class MasterState {
 public:
  explicit MasterState(MasterOptions options = {});

  /// Records a report received at `now_s` (any monotonic clock in seconds).
  /// Returns false (and counts a "too_many_nodes" rejection) for a new node
  /// beyond max_nodes.
  bool accept(NodeFigures figures, double now_s, std::string peer = {});
  /// Counts a report turned away, by reason ("unauthorized", "too_large",
  /// "malformed", ...).
  void reject(const std::string& reason);
  /// Every node with `up` as of `now_s`, in name order.
  std::vector<NodeState> nodes(double now_s) const;
  JobSummary summary(double now_s) const;
  std::uint64_t reports_total() const;
  std::map<std::string, std::uint64_t> rejected() const;
  const MasterOptions& options() const noexcept { return options_; }

  // --- renderings (master_render.cpp) ---
  /// The Prometheus exposition: every node's genesis_memory_* series,
  /// genesis_node_up, and the master's own families.
  std::string metrics_text(double now_s) const;
  /// /status and the final report: nodes, devices, summary, counters.
  std::string status_json(double now_s) const;
  /// The live table for a terminal.
  std::string table(double now_s) const;
  /// Prometheus file-based service discovery: one target group per node
  /// that gave its metrics endpoint, labelled like its series.
  std::string service_discovery_json() const;

 private:
  static bool is_up(const NodeState& n, double now_s, double intervals) noexcept;

  MasterOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, NodeState> nodes_;  // key: node "\x1f" rank
  std::uint64_t reports_ = 0;
  std::map<std::string, std::uint64_t> rejected_;
};

/// "gpu-07", or "gpu-07 rank 3" when the node has a rank.
std::string node_display_name(const NodeIdentity& id);

}  // namespace genesis::debug
