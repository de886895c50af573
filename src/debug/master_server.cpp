// The master's HTTP server (Note [Master server] in distributed_monitor.h).
#include <chrono>
#include <optional>
#include <memory>

#include "genesis/core/error.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/metrics.h"
#include "genesis/debug/node_report.h"
#include "genesis/debug/report_auth.h"
#include "http_server.h"
#include "http_util.h"

namespace genesis::debug {

struct MasterServer::Impl {
  MasterState& state;
  MasterServerOptions options;
  std::optional<ReportVerifier> verifier;
  std::unique_ptr<detail::HttpServer> server;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int port = 0;

  Impl(MasterState& s, MasterServerOptions o) : state(s), options(std::move(o)) {}

  double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void reply(detail::HttpResponse& res, int status, const std::string& reason, const std::string& message) {
    if (!reason.empty()) state.reject(reason);
    res.status = status;
    res.set("{\"error\": \"" + escape_label_value(message) + "\"}\n", "application/json");
  }

  void handle_report(const detail::HttpRequest& req, detail::HttpResponse& res) {
    if (req.body.size() > options.max_body_bytes) {
      reply(res, 413, "too_large", "report over " + std::to_string(options.max_body_bytes) + " bytes");
      return;
    }
    if (verifier) {
      const AuthResult r =
          verifier->check(req.header("X-Genesis-Timestamp"), req.header("X-Genesis-Nonce"),
                          req.header("X-Genesis-Signature"), req.body, unix_seconds_now());
      if (r != AuthResult::ok) {
        const char* reason = r == AuthResult::replayed ? "replayed" : r == AuthResult::stale ? "stale" : "unauthorized";
        reply(res, 401, reason, auth_result_text(r));
        return;
      }
    }
    NodeFigures figures;
    try {
      figures = parse_node_report(req.body);
    } catch (const InvalidArgumentError& e) {
      reply(res, 400, "malformed", e.message());
      return;
    }
    if (!state.accept(std::move(figures), now_s(), req.remote_addr)) {
      reply(res, 429, "", "too many nodes: the master keeps at most " + std::to_string(state.options().max_nodes));
      return;
    }
    res.set("{\"ok\": true}\n", "application/json");
  }
};

MasterServer::MasterServer(MasterState& state, MasterServerOptions options)
    : impl_(std::make_unique<Impl>(state, std::move(options))) {
  Impl& m = *impl_;
  const MasterServerOptions& o = m.options;
  detail::check_port(o.port, true, "--port");
  if (o.max_body_bytes == 0) GENESIS_THROW(InvalidArgumentError, "the body limit must be > 0");
  if (o.read_timeout_s <= 0 || o.threads <= 0) {
    GENESIS_THROW(InvalidArgumentError, "read timeout and threads must be > 0");
  }
  if (o.token.empty() && !detail::is_loopback_address(o.bind)) {
    GENESIS_THROW(InvalidArgumentError, "refusing to listen on ", o.bind,
                  " without a token: anyone who reaches it could send reports. Set --token or "
                  "GENESIS_MEM_TOKEN (the workers need the same), or keep the default --bind 127.0.0.1");
  }
  if (!o.token.empty()) m.verifier.emplace(o.token, o.signature_window_s);

  detail::HttpServerOptions http;
  http.threads = o.threads;
  http.request_timeout_s = o.read_timeout_s;
  http.post_path = "/report";
  http.max_body_bytes = o.max_body_bytes;
  http.on_refused = [&m](int status) {
    if (status == 413) m.state.reject("too_large");
  };
  m.server = std::make_unique<detail::HttpServer>(std::move(http));
  detail::HttpServer& s = *m.server;
  s.post([&m](const detail::HttpRequest& req, detail::HttpResponse& res) { m.handle_report(req, res); });
  s.get("/metrics", [&m](const detail::HttpRequest&, detail::HttpResponse& res) {
    res.set(m.state.metrics_text(m.now_s()), kMetricsContentType);
  });
  s.get("/status", [&m](const detail::HttpRequest&, detail::HttpResponse& res) {
    res.set(m.state.status_json(m.now_s()), "application/json");
  });
  s.get("/sd", [&m](const detail::HttpRequest&, detail::HttpResponse& res) {
    res.set(m.state.service_discovery_json(), "application/json");
  });
  s.get("/", [](const detail::HttpRequest&, detail::HttpResponse& res) {
    res.set(
        "<html><head><title>Genesis memory monitor</title></head><body><h1>Genesis memory monitor</h1>"
        "<p><a href=\"/metrics\">/metrics</a> <a href=\"/status\">/status</a> <a href=\"/sd\">/sd</a></p>"
        "</body></html>\n",
        "text/html");
  });
  m.port = s.bind(o.bind, o.port, "--port");
  s.start();
}

MasterServer::~MasterServer() { stop(); }

int MasterServer::port() const noexcept { return impl_->port; }

double MasterServer::now_s() const { return impl_->now_s(); }

void MasterServer::stop() {
  // In a forked child the server leaves the parent's socket and threads
  // alone (Note [HTTP server]).
  impl_->server->stop();
}

}  // namespace genesis::debug
