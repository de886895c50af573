// The two roles of the distributed memory monitor, ready to run: what
// `genesis-mem distributed` and genesis.tools.memory.DistributedMemoryMonitor
// start (Note [Master server], Note [Worker backoff] in
// distributed_monitor.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/fork.h"
#include "genesis/debug/distributed_monitor.h"

namespace genesis::debug {

class MemoryDebugger;
class MetricsServer;

struct MasterConfig {
  MasterServerOptions server;
  MasterOptions state;
  /// Prometheus file-based service discovery, rewritten (atomically, by
  /// rename) by tick() when the workers' endpoints change. Empty: none.
  std::string sd_file;
};

/// The master: a MasterState behind a MasterServer. Thread-safe.
class DistributedMaster {
 public:
  /// Throws what MasterServer throws, and InvalidArgumentError when the
  /// SD file cannot be written.
  explicit DistributedMaster(MasterConfig config);
  ~DistributedMaster();
  int port() const noexcept;
  std::string status_json() const;
  std::string metrics_text() const;
  std::string table() const;
  /// Rewrites the SD file if its content changed.
  void tick();
  /// Stops serving. The renderings then describe the moment of the stop
  /// (closing idle connections takes a moment that is no node's fault).
  void stop();
  MasterState& state() noexcept { return state_; }

 private:
  MasterConfig config_;
  MasterState state_;
  std::unique_ptr<MasterServer> server_;
  std::atomic<double> stopped_at_{-1};
  std::mutex sd_mutex_;
  std::string sd_written_;

  double now_s() const;
};

struct WorkerConfig {
  WorkerOptions report;
  std::string node_name;     ///< empty: the host name
  std::vector<std::string> devices;  ///< empty: every device of the source
  int metrics_port = -1;     ///< its own /metrics: -1 none, 0 any free port
  std::string metrics_bind = "127.0.0.1";
};

/// A worker: a MemoryDebugger over a source, reporting to the master in a
/// background thread until stop() or the source ends (then one last report
/// goes out). The source must outlive the worker. Thread-safe.
class DistributedWorker {
 public:
  using Log = std::function<void(const std::string&)>;
  /// Throws InvalidArgumentError for bad options or a metrics port in use.
  DistributedWorker(MemorySource& source, WorkerConfig config, Log log = {});
  ~DistributedWorker();
  void start();
  /// Asks it to stop and joins. Safe more than once.
  void stop();
  /// Blocks until it stopped (stop() or the source ended).
  void wait();
  /// False in a forked child (Note [Fork] in genesis/core/fork.h): the
  /// threads are the parent's; there stop() and wait() return at once.
  bool running() const noexcept { return running_.load() && !in_forked_child(owner_pid_); }
  std::uint64_t reports_sent() const noexcept { return sent_.load(); }
  /// Port of its own /metrics, 0 when it has none.
  int metrics_port() const noexcept;
  /// "host:port" it gives the master, empty when none.
  const std::string& metrics_endpoint() const noexcept { return endpoint_; }

 private:
  MemorySource& source_;
  WorkerConfig config_;
  Log log_;
  std::unique_ptr<MemoryDebugger> debugger_;
  std::unique_ptr<FiguresCollector> collector_;
  std::unique_ptr<MetricsServer> metrics_;
  std::string endpoint_;
  StopFlag stop_{false};
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> sent_{0};
  int owner_pid_ = 0;  // the process that started thread_
  std::thread thread_;
  std::mutex join_mutex_;
};

}  // namespace genesis::debug
