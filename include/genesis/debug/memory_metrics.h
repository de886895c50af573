// The memory figures that the exporter and the distributed monitor publish,
// per node and device, and their Prometheus families.
//
// Note [Memory metrics]: one set of families serves the exporter (one node),
// the metrics endpoint inside a Genesis process, and the master of the
// distributed monitor (every node), so dashboards and rules work on either.
// Series are labelled device, node (the host name unless named otherwise),
// and rank, local_rank, world_size when the launcher set RANK, LOCAL_RANK,
// WORLD_SIZE (torchrun, mpirun wrappers, Slurm scripts). Conventions:
//   genesis_memory_predicted_oom_seconds  +Inf when no OOM is predicted, so
//       that `< 120` alerts need no special case and the series never
//       disappears (a missing series reads as "no data", not "safe").
//   genesis_memory_oom_risk_level         0 low, 1 medium, 2 high, 3 critical;
//       genesis_memory_oom_risk{level=...} is the same as a state set (1 for
//       the current level, 0 for the others).
//   genesis_memory_leak_growth_bytes_per_second  the leak detector's growth
//       of the troughs (Note [Leak troughs]), whether or not it counts as a
//       leak yet; genesis_memory_leak_detected says whether it does.
//   genesis_memory_host_resident_bytes    per node; absent when unknown.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "genesis/debug/memory_source.h"
#include "genesis/debug/metrics.h"
#include "genesis/debug/oom_detector.h"

namespace genesis::debug {

class MemoryDebugger;

/// Who a process is in a job.
struct NodeIdentity {
  std::string node;        ///< host name, or a name given by the user
  std::string rank;        ///< empty when the launcher did not set it
  std::string local_rank;
  std::string world_size;
  /// node, then rank, local_rank, world_size where set.
  MetricLabels labels() const;
  /// The host name and RANK / LOCAL_RANK / WORLD_SIZE of the environment
  /// (values that are not non-negative integers are ignored).
  static NodeIdentity from_environment();
};

/// This machine's host name ("localhost" when it has none).
std::string host_name();

/// What the metrics show about one device.
struct DeviceFigures {
  std::string device;  ///< "0", "host", ...
  std::string name;
  MemorySample sample;
  RiskLevel risk_level = RiskLevel::low;
  double usage_percent = 0;
  double predicted_oom_seconds = -1;  ///< negative: none predicted
  double growth_bytes_per_second = 0;  ///< of the OOM predictor's peaks
  double leak_growth_bytes_per_second = 0;
  bool leak_detected = false;
  std::string recommendation;  ///< the OOM predictor's most urgent one
};

/// What the metrics show about one node (process) of a job.
struct NodeFigures {
  NodeIdentity identity;
  std::vector<DeviceFigures> devices;
  std::uint64_t host_rss = 0;   ///< 0: unknown
  double interval_s = 1;        ///< how often the node reports
  std::string metrics_endpoint;  ///< "host:port" of its own /metrics; empty: none
  std::string source;            ///< what it watches
  std::int64_t pid = 0;
  std::vector<std::string> warnings;  ///< OOM warnings so far (newest last, bounded)
};

/// Writes every genesis_memory_* family (Note [Memory metrics]) for `nodes`,
/// each family once with the samples of every node.
void write_memory_metrics(MetricsWriter& writer, const std::vector<const NodeFigures*>& nodes);

/// Keeps the latest sample of each device of a debugger and turns it, with
/// the OOM and leak detectors' findings, into NodeFigures. Thread-safe.
class FiguresCollector {
 public:
  /// Registers a sample listener and an OOM warning callback on `debugger`
  /// (call before debugger.start()). `self_rss`: report this process's
  /// resident memory (in-process endpoints) when samples carry none.
  FiguresCollector(MemoryDebugger& debugger, NodeIdentity identity, bool self_rss = false);
  /// The figures now (devices sampled so far; the debugger's lock is held
  /// while the detectors are asked).
  NodeFigures figures() const;
  /// Waits until every device of the debugger has been sampled once, at
  /// most `timeout`; true when they have. An endpoint that starts serving
  /// before would answer its first scrapes with no device at all.
  bool wait_for_samples(std::chrono::milliseconds timeout) const;
  const NodeIdentity& identity() const noexcept { return identity_; }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable sampled;  // notified on every sample
    std::unordered_map<std::string, MemorySample> latest;
    std::vector<std::string> warnings;
  };
  MemoryDebugger& debugger_;
  NodeIdentity identity_;
  bool self_rss_ = false;
  std::shared_ptr<State> state_;  // shared with the listeners
};

/// Resident memory of this process in bytes (0 where /proc is missing).
std::uint64_t self_resident_bytes();

}  // namespace genesis::debug
