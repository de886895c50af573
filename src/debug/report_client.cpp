// The worker side of the distributed monitor: signed reports and the
// reporting loop with backoff (Note [Worker backoff]).
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include <httplib.h>

#include "genesis/core/error.h"
#include "genesis/debug/distributed_monitor.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/node_report.h"
#include "genesis/debug/report_auth.h"
#include "http_util.h"

namespace genesis::debug {

struct ReportClient::Impl {
  httplib::Client client;
  Impl(const std::string& host, int port) : client(host, port) {}
};

ReportClient::ReportClient(WorkerOptions options) : options_(std::move(options)) {
  if (options_.master_host.empty()) GENESIS_THROW(InvalidArgumentError, "--master-host is empty");
  detail::check_port(options_.port, false, "--port");
  if (!(options_.interval_s > 0)) GENESIS_THROW(InvalidArgumentError, "--interval must be > 0 seconds");
  if (!(options_.timeout_s > 0) || !(options_.max_backoff_s > 0)) {
    GENESIS_THROW(InvalidArgumentError, "timeouts and the backoff cap must be > 0 seconds");
  }
  impl_ = std::make_unique<Impl>(options_.master_host, options_.port);
  const auto sec = static_cast<time_t>(options_.timeout_s);
  const auto usec = static_cast<time_t>((options_.timeout_s - static_cast<double>(sec)) * 1e6);
  impl_->client.set_connection_timeout(sec, usec);
  impl_->client.set_read_timeout(sec, usec);
  impl_->client.set_write_timeout(sec, usec);
  impl_->client.set_keep_alive(true);
}

ReportClient::~ReportClient() = default;

SendResult ReportClient::send(const std::string& body) {
  httplib::Headers headers;
  if (!options_.token.empty()) {
    const std::string ts = std::to_string(unix_seconds_now());
    const std::string nonce = make_nonce();
    headers.emplace("X-Genesis-Timestamp", ts);
    headers.emplace("X-Genesis-Nonce", nonce);
    headers.emplace("X-Genesis-Signature", sign_report(options_.token, ts, nonce, body));
  }
  SendResult r;
  httplib::Result res = impl_->client.Post("/report", headers, body, "application/json");
  if (!res) {
    const httplib::Error e = res.error();
    // httplib reports a host name that does not resolve as a failed
    // connection; "is it running?" would send people to the wrong machine.
    std::string unresolved;
    if (e == httplib::Error::Connection) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      const int gai = ::getaddrinfo(options_.master_host.c_str(), nullptr, &hints, &found);
      if (found != nullptr) ::freeaddrinfo(found);
      if (gai != 0) {
        unresolved = std::string("the host name does not resolve (") + ::gai_strerror(gai) + "): check --master-host";
      }
    }
    const std::string why = !unresolved.empty()                 ? unresolved
                            : e == httplib::Error::Connection ? "connection refused or timed out (is it running?)"
                            : e == httplib::Error::Read     ? "no answer (read timed out or connection closed)"
                            : e == httplib::Error::Write    ? "cannot send (connection closed)"
                                                            : httplib::to_string(e);
    r.error = "cannot reach the master at " + options_.master_host + ":" + std::to_string(options_.port) + ": " + why;
    return r;
  }
  r.status = res->status;
  r.ok = res->status >= 200 && res->status < 300;
  if (!r.ok) {
    std::string why = res->body.substr(0, 300);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    r.error = "the master answered " + std::to_string(res->status) + ": " + why;
  }
  return r;
}

double backoff_seconds(const WorkerOptions& o, int failures, double unit) {
  const double base = std::min(o.interval_s, o.max_backoff_s);
  const double grown = base * std::pow(2.0, std::min(failures, 30));
  return std::min(o.max_backoff_s, grown) * (0.5 + 0.5 * std::clamp(unit, 0.0, 1.0));
}

std::uint64_t run_worker(const FiguresCollector& collector, const WorkerOptions& options, const StopFlag& stop,
                         const std::function<void(NodeFigures&)>& extra,
                         const std::function<void(const std::string&)>& log,
                         std::atomic<std::uint64_t>* sent_count) {
  ReportClient client(options);
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uint64_t sent = 0;
  int failures = 0;
  std::string last_error;
  auto sleep_until_stop = [&stop](double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!stop.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  while (!stop.load()) {
    NodeFigures figures = collector.figures();
    figures.interval_s = options.interval_s;
    if (extra) extra(figures);
    const SendResult r = client.send(node_report_json(figures));
    if (r.ok) {
      if (failures > 0 && log) log("reporting to the master again after " + std::to_string(failures) + " failed tries");
      else if (sent == 0 && log) log("reporting to the master at " + options.master_host + ":" + std::to_string(options.port));
      failures = 0;
      last_error.clear();
      ++sent;
      if (sent_count != nullptr) sent_count->store(sent);
      sleep_until_stop(options.interval_s);
      continue;
    }
    ++failures;
    const double wait = backoff_seconds(options, failures - 1, unit(rng));
    if (log && r.error != last_error) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "; retrying in %.1f s (backing off up to %g s)", wait, options.max_backoff_s);
      log(r.error + buf);
    }
    last_error = r.error;
    sleep_until_stop(wait);
  }
  return sent;
}

}  // namespace genesis::debug
