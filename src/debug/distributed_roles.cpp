// The master and worker roles (distributed_roles.h).
#include "genesis/debug/distributed_roles.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "genesis/core/error.h"
#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/metrics.h"
#include "genesis/debug/metrics_server.h"
#include "genesis/debug/reports.h"

namespace genesis::debug {

DistributedMaster::DistributedMaster(MasterConfig config) : config_(std::move(config)), state_(config_.state) {
  // Fail before serving, not at the first tick.
  if (!config_.sd_file.empty()) write_report(config_.sd_file, "[]\n");
  sd_written_ = "[]\n";
  server_ = std::make_unique<MasterServer>(state_, config_.server);
}

DistributedMaster::~DistributedMaster() { stop(); }

int DistributedMaster::port() const noexcept { return server_->port(); }

double DistributedMaster::now_s() const {
  const double stopped = stopped_at_.load();
  return stopped >= 0 ? stopped : server_->now_s();
}

std::string DistributedMaster::status_json() const { return state_.status_json(now_s()); }

std::string DistributedMaster::metrics_text() const { return state_.metrics_text(now_s()); }

std::string DistributedMaster::table() const { return state_.table(now_s()); }

void DistributedMaster::tick() {
  if (config_.sd_file.empty()) return;
  std::string sd = state_.service_discovery_json();
  std::lock_guard<std::mutex> lock(sd_mutex_);
  if (sd == sd_written_) return;
  // Prometheus watches the file: it must never see half of one.
  const std::string tmp = config_.sd_file + ".tmp";
  write_report(tmp, sd);
  if (std::rename(tmp.c_str(), config_.sd_file.c_str()) != 0) {
    GENESIS_THROW(InvalidArgumentError, "cannot replace '", config_.sd_file, "'");
  }
  sd_written_ = std::move(sd);
}

void DistributedMaster::stop() {
  if (!server_) return;
  double expected = -1;
  stopped_at_.compare_exchange_strong(expected, server_->now_s());
  server_->stop();
}

DistributedWorker::DistributedWorker(MemorySource& source, WorkerConfig config, Log log)
    : source_(source), config_(std::move(config)), log_(std::move(log)) {
  // Check what the client checks now, not in the thread.
  { ReportClient probe(config_.report); }
  DebugOptions o;
  o.interval_s = config_.report.interval_s;
  o.devices = config_.devices;
  o.profile = false;
  o.fragment = false;
  o.tracking = false;
  debugger_ = std::make_unique<MemoryDebugger>(source_, o);
  NodeIdentity id = NodeIdentity::from_environment();
  if (!config_.node_name.empty()) id.node = config_.node_name;
  collector_ = std::make_unique<FiguresCollector>(*debugger_, id);
  if (config_.metrics_port >= 0) {
    FiguresCollector* c = collector_.get();
    metrics_ = std::make_unique<MetricsServer>(
        config_.metrics_bind, config_.metrics_port,
        [c] {
          const NodeFigures n = c->figures();
          MetricsWriter w;
          write_memory_metrics(w, {&n});
          return w.take();
        },
        "Genesis memory metrics", "--metrics-port");
    // A wildcard address is no address to scrape: give the host's name.
    const std::string& b = config_.metrics_bind;
    const std::string host = (b == "0.0.0.0" || b == "::") ? host_name() : b;
    endpoint_ = host_port(host, metrics_->port());
  }
}

DistributedWorker::~DistributedWorker() { stop(); }

int DistributedWorker::metrics_port() const noexcept { return metrics_ ? metrics_->port() : 0; }

void DistributedWorker::start() {
  if (running_.exchange(true)) GENESIS_THROW(InvalidArgumentError, "the worker was started before");
  owner_pid_ = static_cast<int>(getpid());
  debugger_->start();
  thread_ = std::thread([this] {
    StopFlag reporting{false};
    // The source ending (a trace replayed, a command exited) stops the
    // worker after one more interval, so the final figures go out.
    std::thread watch([this, &reporting] {
      while (!stop_.load() && debugger_->running()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!stop_.load()) {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration<double>(config_.report.interval_s * 1.5);
        while (!stop_.load() && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      reporting.store(true);
    });
    const std::string endpoint = endpoint_;
    try {
      sent_ = run_worker(*collector_, config_.report, reporting,
                         [&endpoint](NodeFigures& n) { n.metrics_endpoint = endpoint; }, log_, &sent_);
    } catch (const std::exception& e) {
      if (log_) log_(std::string("worker stopped: ") + e.what());
      reporting.store(true);
    }
    watch.join();
    running_.store(false);
  });
}

void DistributedWorker::stop() {
  if (in_forked_child(owner_pid_)) {  // Note [Fork]: the threads are the parent's
    stop_.store(true);
    if (thread_.joinable()) thread_.detach();
    if (debugger_) debugger_->stop();
    if (metrics_) metrics_->stop();
    return;
  }
  std::lock_guard<std::mutex> lock(join_mutex_);
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (debugger_) debugger_->stop();
  if (metrics_) metrics_->stop();
  running_.store(false);
}

void DistributedWorker::wait() {
  if (in_forked_child(owner_pid_)) return;
  while (running_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::lock_guard<std::mutex> lock(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

}  // namespace genesis::debug
