// A read-only HTTP endpoint for Prometheus: GET /metrics and a small index.
//
// Note [Metrics endpoint]: the endpoint only reads: /metrics renders the
// latest figures on each scrape (no state changes, any other method is 405),
// so exposing it costs nothing but the figures themselves. It listens on
// 127.0.0.1 unless told otherwise. Inside a Genesis process,
// start_metrics_server() watches the process's own allocators (every CUDA
// device's and the host allocator) with a MemoryDebugger sampling once a
// second; the Python module starts it on import when GENESIS_METRICS_PORT is
// set (GENESIS_METRICS_BIND for the address), and a C++ program calls
// start_metrics_server() or start_metrics_server_from_environment().
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace genesis::debug {

/// Serves /metrics from `render` and / in a background thread
/// (Note [Metrics endpoint]). Thread-safe.
class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  /// Binds and starts serving. `port` 0 picks a free port. Throws
  /// InvalidArgumentError for a port in use ("port 9464 on 127.0.0.1 is in
  /// use: choose another with --port"; `hint` names the option) or an
  /// address that cannot be bound.
  MetricsServer(const std::string& bind, int port, Render render, std::string title = "Genesis memory metrics",
                std::string hint = "--port");
  /// Stops serving and joins the thread.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const noexcept { return port_; }
  const std::string& bind_address() const noexcept { return bind_; }
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string bind_;
  int port_ = 0;
};

/// "host:port" as URLs and Prometheus targets write it: an IPv6 address in
/// brackets ("[::1]:9464"), since its colons would otherwise run into the
/// port's.
std::string host_port(const std::string& host, int port);

/// Starts this process's metrics endpoint (Note [Metrics endpoint]) and
/// returns its port (useful with `port` 0). Throws InvalidArgumentError
/// when one already runs, or for a port in use.
int start_metrics_server(int port = 9464, const std::string& bind = "127.0.0.1");
/// Stops it (no-op when none runs).
void stop_metrics_server();
/// The port of this process's endpoint, or 0 when none runs.
int metrics_server_port();
/// Starts the endpoint when GENESIS_METRICS_PORT is set and none runs yet
/// (GENESIS_METRICS_BIND: the address, default 127.0.0.1). Returns the port,
/// 0 when the variable is unset. Throws InvalidArgumentError for a value
/// that is not a port, or what start_metrics_server throws.
int start_metrics_server_from_environment();

}  // namespace genesis::debug
