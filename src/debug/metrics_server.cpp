// The read-only metrics endpoint (Note [Metrics endpoint]).
#include "genesis/debug/metrics_server.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "genesis/core/error.h"
#include "genesis/core/fork.h"
#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/metrics.h"
#include "genesis/memory/device_allocators.h"
#include "http_server.h"
#include "http_util.h"

namespace genesis::debug {

struct MetricsServer::Impl {
  detail::HttpServer server{detail::HttpServerOptions{}};
};

MetricsServer::MetricsServer(const std::string& bind, int port, Render render, std::string title, std::string hint)
    : impl_(std::make_unique<Impl>()), bind_(bind) {
  detail::check_port(port, true, hint.c_str());
  if (!render) GENESIS_THROW(InvalidArgumentError, "MetricsServer needs a render function");
  detail::HttpServer& s = impl_->server;
  s.get("/metrics", [render](const detail::HttpRequest&, detail::HttpResponse& res) {
    try {
      res.set(render(), kMetricsContentType);
    } catch (const std::exception& e) {
      res.status = 500;
      res.set(std::string("cannot render metrics: ") + e.what() + "\n", "text/plain");
    }
  });
  const std::string index = "<html><head><title>" + title + "</title></head><body><h1>" + title +
                            "</h1><p><a href=\"/metrics\">/metrics</a></p></body></html>\n";
  s.get("/", [index](const detail::HttpRequest&, detail::HttpResponse& res) { res.set(index, "text/html"); });
  port_ = s.bind(bind, port, hint);
  s.start();
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::stop() {
  if (!impl_) return;
  // In a forked child (Note [Fork]) the server leaves the parent's socket
  // and threads alone (Note [HTTP server]).
  impl_->server.stop();
}

std::string host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// --- this process's endpoint --------------------------------------------------

namespace {

struct ProcessEndpoint {
  std::unique_ptr<MemorySource> source;
  std::unique_ptr<MemoryDebugger> debugger;
  std::unique_ptr<FiguresCollector> collector;
  std::unique_ptr<MetricsServer> server;

  ~ProcessEndpoint() {
    // The server renders from the collector, the collector reads the
    // debugger, the debugger samples the source: stop in that order.
    if (server) server->stop();
    if (debugger) debugger->stop();
  }
};

std::mutex g_mutex;
std::unique_ptr<ProcessEndpoint> g_endpoint;
ProcessEndpoint* g_forgotten = nullptr;  // a parent's endpoint: reachable, never destroyed

// Note [Fork] (genesis/core/fork.h): the endpoint's threads (server,
// sampler) are the parent's, so a forked child leaks it; its exit would
// otherwise stop the parent's server and join threads that are not there.
// (The child keeps its copy of the listening socket open until it exits.)
void prepare_fork() { g_mutex.lock(); }
void parent_after_fork() { g_mutex.unlock(); }
void child_after_fork() {
  if (g_endpoint) g_forgotten = g_endpoint.release();
  g_mutex.unlock();
}
constexpr ForkHandlers kForkHandlers{&prepare_fork, &parent_after_fork, &child_after_fork};
// Installed at load, before any thread can take the locks (Note [Fork]).
[[maybe_unused]] const bool kForkRegistered = (register_fork_handlers(ForkRank::kMetrics, &kForkHandlers), true);

}  // namespace

int start_metrics_server(int port, const std::string& bind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_endpoint) {
    GENESIS_THROW(InvalidArgumentError, "a metrics server already runs in this process (port ",
                  g_endpoint->server->port(), ")");
  }
  auto e = std::make_unique<ProcessEndpoint>();
  std::vector<NamedAllocator> allocators = process_cuda_allocators();
  allocators.push_back(NamedAllocator{"host", "host (pageable)", &memory::host_allocator()});
  e->source = open_allocator_source(std::move(allocators));
  DebugOptions o;
  o.interval_s = 1;
  o.profile = false;
  o.fragment = false;
  o.tracking = false;
  e->debugger = std::make_unique<MemoryDebugger>(*e->source, o);
  e->collector = std::make_unique<FiguresCollector>(*e->debugger, NodeIdentity::from_environment(), true);
  FiguresCollector* collector = e->collector.get();
  e->server = std::make_unique<MetricsServer>(
      bind, port,
      [collector] {
        const NodeFigures n = collector->figures();
        MetricsWriter w;
        write_memory_metrics(w, {&n});
        return w.take();
      },
      "Genesis memory metrics", "port=");
  e->debugger->start();
  // The first sample is taken at once; waiting for it means a scrape right
  // after this returns finds every device (a stuck source delays the start
  // by at most two seconds and is then served as it comes).
  e->collector->wait_for_samples(std::chrono::seconds(2));
  const int got = e->server->port();
  g_endpoint = std::move(e);
  return got;
}

void stop_metrics_server() {
  std::unique_ptr<ProcessEndpoint> e;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    e = std::move(g_endpoint);
  }
}

int metrics_server_port() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_endpoint ? g_endpoint->server->port() : 0;
}

int start_metrics_server_from_environment() {
  const char* value = std::getenv("GENESIS_METRICS_PORT");
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long port = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || port < 0 || port > 65535) {
    GENESIS_THROW(InvalidArgumentError, "GENESIS_METRICS_PORT=", value, ": expected a port number 0..65535");
  }
  if (metrics_server_port() != 0) return metrics_server_port();
  const char* bind = std::getenv("GENESIS_METRICS_BIND");
  return start_metrics_server(static_cast<int>(port), bind != nullptr && *bind != '\0' ? bind : "127.0.0.1");
}

}  // namespace genesis::debug
