// genesis-mem distributed --role master|worker: one master collects the
// memory figures of every node of a job (Note [Master server] in
// distributed_monitor.h).
//
// The master prints a live table every --table-every seconds when standard
// output is a terminal, keeps the --sd-file current, and writes --output at
// the end (--duration elapsed or Ctrl-C). A worker samples its source and
// reports every --interval seconds until Ctrl-C or the source ends.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "command.h"
#include "genesis/core/error.h"
#include "genesis/debug/distributed_roles.h"
#include "genesis/debug/metrics_server.h"
#include "genesis/debug/reports.h"
#include "interrupt.h"
#include "report_outputs.h"
#include "source_options.h"

namespace genesis::tools {

namespace {

struct DistributedArgs {
  std::string role;
  int port = 29500;
  std::string bind = "127.0.0.1";
  std::string token;
  // master
  std::string output;
  std::string sd_file;
  double duration = 0;
  double table_every = 2;
  // worker
  std::string master_host;
  SourceArgs source;
  double interval = 5;
  int metrics_port = -1;
  std::string metrics_bind = "127.0.0.1";
  std::string node_name;
  double max_backoff = 30;
  bool quiet = false;
};

std::string token_of(const DistributedArgs& a) {
  if (!a.token.empty()) return a.token;
  const char* env = std::getenv("GENESIS_MEM_TOKEN");
  return env != nullptr ? env : "";
}

int run_master(const DistributedArgs& a) {
  if (!(a.duration >= 0)) GENESIS_THROW(InvalidArgumentError, "--duration must be >= 0 seconds (0: until Ctrl-C)");
  if (!(a.table_every > 0)) GENESIS_THROW(InvalidArgumentError, "--table-every must be > 0 seconds");
  GENESIS_CHECK(a.source.trace.empty() && a.source.pid == 0 && a.source.command.empty() && a.source.devices.empty(),
                "--trace, --pid, --devices and -- CMD choose what a worker watches: a master (--role master) only "
                "collects the workers' reports");
  GENESIS_CHECK(a.output.empty() || a.sd_file.empty() || a.output != a.sd_file, "--output and --sd-file both write '",
                a.output, "': give each its own file");
  if (!a.output.empty()) check_writable(a.output);
  debug::MasterConfig config;
  config.server.bind = a.bind;
  config.server.port = a.port;
  config.server.token = token_of(a);
  config.sd_file = a.sd_file;
  debug::DistributedMaster master(config);
  debug::StopFlag& interrupted = install_interrupt_handler();
  if (!a.quiet) {
    std::fprintf(stderr, "genesis-mem distributed: master on http://%s (/metrics, /status)%s; Ctrl-C stops%s\n",
                 debug::host_port(a.bind, master.port()).c_str(), config.server.token.empty() ? ", unsigned reports (loopback)" : "",
                 a.output.empty() ? "" : " and writes the report");
  }
  const bool tty = isatty(STDOUT_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto next_table = start;
  while (!interrupted.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (a.duration > 0 && now - start >= std::chrono::duration<double>(a.duration)) break;
    if (now >= next_table) {
      try {
        master.tick();
      } catch (const genesis::Error& e) {
        std::fprintf(stderr, "genesis-mem: warning: %s\n", e.message().c_str());
      }
      if (tty) {
        const std::string table = master.table();
        std::fputs("\033[H\033[2J", stdout);
        std::fputs(table.c_str(), stdout);
        std::fflush(stdout);
      }
      next_table = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(a.table_every));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  master.stop();
  try {
    master.tick();
  } catch (const genesis::Error&) {
    // The report below matters more than the last SD update.
  }
  const std::string report = master.status_json();
  remove_interrupt_handler();
  if (!a.output.empty()) {
    debug::write_report(a.output, report + "\n");
    if (!a.quiet) std::fprintf(stderr, "genesis-mem distributed: wrote %s\n", a.output.c_str());
  }
  if (!tty) std::fputs(master.table().c_str(), stdout);
  return 0;
}

int run_worker_role(const DistributedArgs& a) {
  if (a.master_host.empty()) GENESIS_THROW(InvalidArgumentError, "--role worker needs --master-host HOST");
  std::unique_ptr<debug::MemorySource> source = open_source(a.source);
  debug::WorkerConfig config;
  config.report.master_host = a.master_host;
  config.report.port = a.port;
  config.report.token = token_of(a);
  config.report.interval_s = a.interval;
  config.report.max_backoff_s = a.max_backoff;
  config.node_name = a.node_name;
  config.devices = pick_devices(*source, a.source.devices);
  config.metrics_port = a.metrics_port;
  config.metrics_bind = a.metrics_bind;
  std::mutex log_mutex;
  const bool quiet = a.quiet;
  debug::DistributedWorker worker(*source, config, [&log_mutex, quiet](const std::string& line) {
    if (quiet) return;
    std::lock_guard<std::mutex> lock(log_mutex);
    std::fprintf(stderr, "genesis-mem distributed: %s\n", line.c_str());
  });
  debug::StopFlag& interrupted = install_interrupt_handler();
  if (!a.quiet) {
    std::fprintf(stderr, "genesis-mem distributed: worker watching %s, reporting to %s:%d every %g s%s%s\n",
                 source->describe().c_str(), a.master_host.c_str(), a.port, a.interval,
                 worker.metrics_endpoint().empty() ? "" : "; metrics on ",
                 worker.metrics_endpoint().c_str());
  }
  worker.start();
  while (!interrupted.load() && worker.running()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  worker.stop();
  remove_interrupt_handler();
  if (!a.quiet) {
    std::fprintf(stderr, "genesis-mem distributed: worker stopped after %llu reports\n",
                 static_cast<unsigned long long>(worker.reports_sent()));
  }
  // A worker whose reports never arrived did not do its job, which a script
  // or a service manager must be able to see.
  if (worker.reports_sent() == 0) {
    std::fprintf(stderr,
                 "genesis-mem: error: no report reached the master at %s:%d (is it running and reachable, and "
                 "does it have the same token?)\n",
                 a.master_host.c_str(), a.port);
    return 1;
  }
  return 0;
}

}  // namespace

Command add_distributed_command(CLI::App& app) {
  auto a = std::make_shared<DistributedArgs>();
  CLI::App* sub = app.add_subcommand("distributed", "watch every node of a job: one master, a worker per node");
  sub->add_option("--role", a->role, "master or worker")->required()->check(CLI::IsMember({"master", "worker"}));
  sub->add_option("--port", a->port, "the master's port (both roles)")->capture_default_str();
  sub->add_option("--token", a->token, "shared secret that signs reports (default: $GENESIS_MEM_TOKEN)");
  sub->add_option("--bind", a->bind, "master: address to listen on (non-loopback needs a token)")
      ->capture_default_str();
  sub->add_option("--output,-o", a->output, "master: write the JSON report here at the end");
  sub->add_option("--sd-file", a->sd_file, "master: keep a Prometheus file_sd JSON of the workers' endpoints here");
  sub->add_option("--duration", a->duration, "master: seconds to run (0: until Ctrl-C)")->capture_default_str();
  sub->add_option("--table-every", a->table_every, "master: seconds between live tables (terminal only)")
      ->capture_default_str();
  sub->add_option("--master-host", a->master_host, "worker: the master's host name or address");
  add_source_options(sub, a->source);
  sub->add_option("--interval", a->interval, "worker: seconds between reports (and samples)")->capture_default_str();
  sub->add_option("--metrics-port", a->metrics_port, "worker: also serve its own /metrics on this port (0: any)");
  sub->add_option("--metrics-bind", a->metrics_bind, "worker: address of its own /metrics")->capture_default_str();
  sub->add_option("--node-name", a->node_name, "worker: the node's name (default: the host name)");
  sub->add_option("--max-backoff", a->max_backoff, "worker: longest wait between tries when the master is away")
      ->capture_default_str();
  sub->add_flag("--quiet,-q", a->quiet, "no progress lines");
  return {sub, [a] {
            std::signal(SIGPIPE, SIG_IGN);
            return a->role == "master" ? run_master(*a) : run_worker_role(*a);
          }};
}

}  // namespace genesis::tools
