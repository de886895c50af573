// genesis-mem exporter: serve a source's memory figures to Prometheus.
//
// A MemoryDebugger samples the source the shared flags name
// (source_options.h) every --interval seconds; GET /metrics renders the
// latest figures (Note [Memory metrics]). It runs until Ctrl-C. When the
// source ends (a trace replayed, a command exited) the last figures stay
// served, so a scrape after the end still sees them.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "genesis/core/error.h"
#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/memory_metrics.h"
#include "genesis/debug/metrics.h"
#include "genesis/debug/metrics_server.h"
#include "interrupt.h"
#include "source_options.h"

namespace genesis::tools {

namespace {

struct ExporterArgs {
  SourceArgs source;
  int port = 9464;
  std::string bind = "127.0.0.1";
  double interval = 1;
  std::string node_name;
  bool quiet = false;
};

int run_exporter(const ExporterArgs& a) {
  if (!(a.interval > 0)) GENESIS_THROW(InvalidArgumentError, "--interval ", a.interval, ": expected seconds > 0");
  std::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<debug::MemorySource> source = open_source(a.source);
  debug::DebugOptions o;
  o.interval_s = a.interval;
  o.devices = pick_devices(*source, a.source.devices);
  o.profile = false;
  o.fragment = false;
  o.tracking = false;
  debug::MemoryDebugger debugger(*source, o);
  debug::NodeIdentity id = debug::NodeIdentity::from_environment();
  if (!a.node_name.empty()) id.node = a.node_name;
  debug::FiguresCollector collector(debugger, id);
  debug::MetricsServer server(a.bind, a.port, [&collector] {
    const debug::NodeFigures n = collector.figures();
    debug::MetricsWriter w;
    debug::write_memory_metrics(w, {&n});
    return w.take();
  });
  debug::StopFlag& interrupted = install_interrupt_handler();
  debugger.start();
  if (!a.quiet) {
    std::fprintf(stderr, "genesis-mem exporter: serving http://%s/metrics for %s every %g s; Ctrl-C stops\n",
                 debug::host_port(a.bind, server.port()).c_str(), source->describe().c_str(), a.interval);
  }
  bool said_end = false;
  while (!interrupted.load()) {
    if (!debugger.running() && !said_end && !a.quiet) {
      std::fprintf(stderr, "genesis-mem exporter: the source ended; serving its last figures until Ctrl-C\n");
      said_end = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  server.stop();
  debugger.stop();
  remove_interrupt_handler();
  debugger.wait();
  return 0;
}

}  // namespace

Command add_exporter_command(CLI::App& app) {
  auto a = std::make_shared<ExporterArgs>();
  CLI::App* sub = app.add_subcommand("exporter", "serve memory figures to Prometheus (GET /metrics)");
  add_source_options(sub, a->source);
  sub->add_option("--port", a->port, "port to listen on")->capture_default_str();
  sub->add_option("--bind", a->bind, "address to listen on (anything but loopback exposes the figures)")
      ->capture_default_str();
  sub->add_option("--interval", a->interval, "seconds between samples")->capture_default_str();
  sub->add_option("--node-name", a->node_name, "the node label (default: the host name)");
  sub->add_flag("--quiet,-q", a->quiet, "no start-up line");
  return {sub, [a] { return run_exporter(*a); }};
}

}  // namespace genesis::tools
