// The distributed memory monitor over HTTP: the master's server and the
// worker's reporting loop (the state they share is distributed_master.h,
// the report node_report.h, the signatures report_auth.h).
//
// Note [Master server]: one HTTP server (Note [HTTP server] in
// src/debug/http_server.h) on one port:
//   POST /report    a worker's report (signed when a token is set)
//   GET  /metrics   every node's series plus genesis_node_up (read-only)
//   GET  /status    JSON: nodes, devices, the job summary, counters
//   GET  /sd        the Prometheus service-discovery JSON
// Requests run on a pool of server threads; a request must arrive whole
// within the read timeout and its head is bounded, so a slow, silent or
// flooding client holds one thread for at most the timeout and never
// blocks the others. Rejections: 413 for a body over the limit, 401 for a
// missing or wrong signature, a stale timestamp or a replayed nonce, 400 for
// malformed JSON or wrong types; each is counted and served on, never a
// crash. Without a token the master listens on loopback only.
//
// Note [Worker backoff]: a worker whose report fails (master down,
// restarting, unreachable) waits min(cap, interval * 2^k) times a random
// factor in [0.5, 1] before the next try, k counting consecutive failures,
// so that many workers that lost their master do not come back in lockstep.
// The first report that gets through resets k, and carries the full state
// (Note [Node reports]), so a restarted master is whole again.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "genesis/debug/distributed_master.h"
#include "genesis/debug/memory_source.h"

namespace genesis::debug {

class FiguresCollector;

struct MasterServerOptions {
  std::string bind = "127.0.0.1";
  int port = 29500;  ///< 0: any free port
  std::string token;  ///< empty: reports unsigned, loopback only
  std::size_t max_body_bytes = std::size_t{1} << 20;
  std::int64_t signature_window_s = 300;
  int read_timeout_s = 5;
  int threads = 32;
};

/// The master's HTTP server over a MasterState (Note [Master server]).
class MasterServer {
 public:
  /// Binds and serves in background threads. Throws InvalidArgumentError
  /// for a port in use, a non-loopback address without a token, or bad
  /// options.
  MasterServer(MasterState& state, MasterServerOptions options);
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;
  int port() const noexcept;
  /// Seconds on the master's clock (steady, from construction): the `now_s`
  /// of the state's renderings.
  double now_s() const;
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct WorkerOptions {
  std::string master_host = "127.0.0.1";
  int port = 29500;
  std::string token;            ///< empty: unsigned reports
  double interval_s = 5;
  double max_backoff_s = 30;    ///< Note [Worker backoff]
  double timeout_s = 5;         ///< connect and read timeouts of one report
};

/// What happened to one report.
struct SendResult {
  bool ok = false;
  int status = 0;          ///< HTTP status; 0 when no answer came
  std::string error;       ///< why it failed, for people
};

/// Posts signed reports to a master. Not thread-safe.
class ReportClient {
 public:
  explicit ReportClient(WorkerOptions options);
  ~ReportClient();
  SendResult send(const std::string& body);
  const WorkerOptions& options() const noexcept { return options_; }

 private:
  struct Impl;
  WorkerOptions options_;
  std::unique_ptr<Impl> impl_;
};

/// The wait before the next try after `failures` consecutive failures
/// (Note [Worker backoff]); `unit` in [0, 1) is the random draw.
double backoff_seconds(const WorkerOptions& options, int failures, double unit);

/// Reports `collector`'s figures to the master every interval until `stop`
/// (Note [Worker backoff]); `extra` fills in what the collector does not
/// know (the metrics endpoint). `log` gets one line per change of
/// connection state. Returns the number of reports that got through; `sent`,
/// when given, holds that count while it runs (a live figure for callers).
std::uint64_t run_worker(const FiguresCollector& collector, const WorkerOptions& options, const StopFlag& stop,
                         const std::function<void(NodeFigures&)>& extra,
                         const std::function<void(const std::string&)>& log,
                         std::atomic<std::uint64_t>* sent = nullptr);

}  // namespace genesis::debug
