// The master's HTTP server (Note [Master server] in distributed_monitor.h).
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include <httplib.h>

#include "genesis/core/error.h"
#include "genesis/core/fork.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/metrics.h"
#include "genesis/debug/node_report.h"
#include "genesis/debug/report_auth.h"
#include "http_util.h"

namespace genesis::debug {

struct MasterServer::Impl {
  MasterState& state;
  MasterServerOptions options;
  std::optional<ReportVerifier> verifier;
  httplib::Server server;
  std::thread thread;
  int owner_pid = static_cast<int>(getpid());  // the process whose thread serves (Note [Fork])
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int port = 0;

  Impl(MasterState& s, MasterServerOptions o) : state(s), options(std::move(o)) {}

  double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void reply(httplib::Response& res, int status, const std::string& reason, const std::string& message) {
    if (!reason.empty()) state.reject(reason);
    res.status = status;
    res.set_content("{\"error\": \"" + escape_label_value(message) + "\"}\n", "application/json");
  }

  void handle_report(const httplib::Request& req, httplib::Response& res) {
    if (req.body.size() > options.max_body_bytes) {
      reply(res, 413, "too_large", "report over " + std::to_string(options.max_body_bytes) + " bytes");
      res.set_header("X-Genesis-Counted", "1");
      return;
    }
    if (verifier) {
      const AuthResult r =
          verifier->check(req.get_header_value("X-Genesis-Timestamp"), req.get_header_value("X-Genesis-Nonce"),
                          req.get_header_value("X-Genesis-Signature"), req.body, unix_seconds_now());
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
    res.set_content("{\"ok\": true}\n", "application/json");
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

  httplib::Server& s = m.server;
  const int threads = o.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  s.set_read_timeout(o.read_timeout_s, 0);
  s.set_write_timeout(o.read_timeout_s, 0);
  s.set_keep_alive_timeout(o.read_timeout_s);
  // One more byte than the limit reaches the handler, which answers 413
  // itself (and counts it); larger bodies httplib turns away unread.
  s.set_payload_max_length(o.max_body_bytes + 1);
  s.set_logger([&m](const httplib::Request&, const httplib::Response& res) {
    if (res.status == 413 && !res.has_header("X-Genesis-Counted")) m.state.reject("too_large");
  });
  s.Post("/report", [&m](const httplib::Request& req, httplib::Response& res) { m.handle_report(req, res); });
  s.Get("/metrics", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(m.state.metrics_text(m.now_s()), kMetricsContentType);
  });
  s.Get("/status", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(m.state.status_json(m.now_s()), "application/json");
  });
  s.Get("/sd", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(m.state.service_discovery_json(), "application/json");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "<html><head><title>Genesis memory monitor</title></head><body><h1>Genesis memory monitor</h1>"
        "<p><a href=\"/metrics\">/metrics</a> <a href=\"/status\">/status</a> <a href=\"/sd\">/sd</a></p>"
        "</body></html>\n",
        "text/html");
  });
  // Only reports are posted; every other method and path is read-only.
  detail::refuse_unread_bodies(s, "/report");
  m.port = detail::bind_server(s, o.bind, o.port, "--port");
  detail::start_listening(m.server, m.thread);
}

MasterServer::~MasterServer() { stop(); }

int MasterServer::port() const noexcept { return impl_->port; }

double MasterServer::now_s() const { return impl_->now_s(); }

void MasterServer::stop() {
  // A forked child must not shut down the listening socket it shares with
  // the parent, nor join the parent's thread (Note [Fork]).
  if (!in_forked_child(impl_->owner_pid)) impl_->server.stop();
  join_or_forget(impl_->thread, impl_->owner_pid);
}

}  // namespace genesis::debug
