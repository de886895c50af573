// genesis-mem profile | oom | leak | fragment | monitor: watch a source for a
// while and write what the debugger found.
//
// Each command is one configuration of debug::MemoryDebugger (which tools
// run, at what interval) over the source that the shared flags name
// (source_options.h). They print a summary for people on standard output
// and write the JSON report to --output, plus PNG plots (--plot), a
// self-contained HTML page (--html) and a Chrome-trace timeline
// (--chrome-trace) when asked. Ctrl-C stops sampling and still writes
// everything; the duration and every rate are in the source's time (a
// trace's own time for --trace).
#include <chrono>
#include <cstdio>
#include <thread>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "command.h"
#include "genesis/core/error.h"
#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/reports.h"
#include "interrupt.h"
#include "report_format.h"
#include "report_outputs.h"
#include "source_options.h"

namespace genesis::tools {

namespace {

enum class Kind { kProfile, kOom, kLeak, kFragment, kMonitor };

struct WatchArgs {
  Kind kind = Kind::kProfile;
  SourceArgs source;
  double duration = 60;
  double interval = 0.1;
  double threshold = 0;  // per kind: OOM percent or leak MiB/min
  double window = 60;
  std::string output;
  std::string html;
  std::string chrome_trace;
  bool plot = false;
  bool monitor = false;
  bool check = false;
  bool tracking = false;
  bool all = false;
  bool json = false;
  bool quiet = false;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kProfile: return "profile";
    case Kind::kOom: return "oom";
    case Kind::kLeak: return "leak";
    case Kind::kFragment: return "fragment";
    case Kind::kMonitor: return "monitor";
  }
  return "?";
}

debug::DebugOptions debug_options(const WatchArgs& a, const std::vector<std::string>& devices) {
  debug::DebugOptions o;
  o.interval_s = a.interval;
  o.devices = devices;
  o.duration_s = a.duration;
  o.profile = a.kind == Kind::kProfile || a.kind == Kind::kMonitor;
  o.oom = a.kind == Kind::kOom || a.kind == Kind::kMonitor;
  o.leak = a.kind == Kind::kLeak || (a.kind == Kind::kMonitor && a.all);
  o.fragment = a.kind == Kind::kFragment || (a.kind == Kind::kMonitor && a.all);
  // The profiler's history is what plots and the HTML page draw.
  if (!a.html.empty() || a.plot || !a.chrome_trace.empty()) o.profile = true;
  if (a.kind == Kind::kOom || a.kind == Kind::kMonitor) o.oom_threshold_percent = a.threshold;
  if (a.kind == Kind::kLeak) o.leak_threshold_mb_per_min = a.threshold;
  o.leak_window_s = a.window;
  o.tracking = a.tracking || a.kind == Kind::kLeak || a.kind == Kind::kMonitor;
  return o;
}

Outputs outputs_of(const WatchArgs& a) {
  Outputs outputs;
  outputs.kind = kind_name(a.kind);
  outputs.json_path = a.output;
  outputs.html_path = a.html;
  outputs.chrome_trace_path = a.chrome_trace;
  outputs.plot = a.plot;
  return outputs;
}

void check_args(const WatchArgs& a) {
  if (!(a.interval > 0)) GENESIS_THROW(InvalidArgumentError, "--interval ", a.interval, ": expected seconds > 0");
  if (!(a.duration >= 0)) {
    GENESIS_THROW(InvalidArgumentError, "--duration ", a.duration, ": expected seconds >= 0 (0: until Ctrl-C)");
  }
  if ((a.kind == Kind::kOom || a.kind == Kind::kMonitor) && !(a.threshold > 0 && a.threshold <= 100)) {
    GENESIS_THROW(InvalidArgumentError, "--threshold ", a.threshold, ": expected a percentage in (0, 100]");
  }
  if (a.kind == Kind::kLeak && !(a.threshold > 0)) {
    GENESIS_THROW(InvalidArgumentError, "--threshold ", a.threshold, ": expected MiB per minute > 0");
  }
  if (!(a.window > 0)) GENESIS_THROW(InvalidArgumentError, "--window ", a.window, ": expected seconds > 0");
  // Fail before watching for minutes, not after.
  check_distinct_outputs(outputs_of(a), a.source.trace);
  for (const std::string* path : {&a.output, &a.html, &a.chrome_trace}) {
    if (!path->empty()) check_writable(*path);
  }
}

// The JSON report of the command: the tool's own report, or for monitor
// the status report of every tool.
std::string report_json(const WatchArgs& a, const debug::MemoryDebugger& d) {
  std::unique_lock<std::mutex> lock = d.lock();
  switch (a.kind) {
    case Kind::kProfile: return debug::profile_report_json(*d.profiler(), d.source().describe());
    case Kind::kOom: return debug::oom_report_json(*d.oom_detector());
    case Kind::kLeak: return debug::leak_report_json(*d.leak_detector());
    case Kind::kFragment: return debug::fragment_report_json(*d.fragmentation());
    case Kind::kMonitor: break;
  }
  lock.unlock();
  return d.status_report();
}

int run_watch(const WatchArgs& a) {
  check_args(a);
  SourceArgs source_args = a.source;
  source_args.child_sites = a.tracking;
  std::unique_ptr<debug::MemorySource> source = open_source(source_args);
  const std::vector<std::string> devices = pick_devices(*source, a.source.devices);
  debug::MemoryDebugger debugger(*source, debug_options(a, devices));

  std::mutex print_mutex;
  if (debugger.oom_detector() != nullptr) {
    debugger.on_oom_warning([&](const std::string& device, const debug::OOMPrediction& p) {
      std::lock_guard<std::mutex> lock(print_mutex);
      std::fprintf(stderr, "genesis-mem: warning: %s OOM risk on device %s: %.1f%% used",
                   std::string(debug::risk_level_name(p.risk_level)).c_str(), device.c_str(),
                   p.current_usage_percent);
      if (p.predicted_oom_seconds >= 0) {
        std::fprintf(stderr, ", out of memory in about %s", format_seconds(p.predicted_oom_seconds).c_str());
      }
      if (!p.recommendations.empty()) std::fprintf(stderr, "; %s", p.recommendations.front().c_str());
      std::fputc('\n', stderr);
    });
  }

  debug::StopFlag& interrupted = install_interrupt_handler();
  if (!a.quiet) {
    std::fprintf(stderr, "genesis-mem %s: watching %s (%zu device%s) every %g s %s; Ctrl-C stops and writes the report\n",
                 kind_name(a.kind), source->describe().c_str(), devices.size(), devices.size() == 1 ? "" : "s",
                 a.interval,
                 a.duration > 0 ? ("for " + format_seconds(a.duration)).c_str() : "until it ends");
  }
  debugger.start();
  // The sampler watches its own flag; a Ctrl-C sets ours: pass it on.
  std::thread relay([&] {
    while (debugger.running()) {
      if (interrupted.load()) {
        debugger.stop_flag().store(true);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::exception_ptr error;
  try {
    debugger.wait();
  } catch (...) {
    error = std::current_exception();
  }
  relay.join();
  debugger.stop();

  // Everything below runs even when sampling failed: the partial report is
  // still worth having.
  const std::string json = report_json(a, debugger);
  const int written = write_outputs(outputs_of(a), json, debugger);
  remove_interrupt_handler();

  if (a.json) {
    std::fwrite(json.data(), 1, json.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    print_summary(a.kind == Kind::kMonitor ? "status" : kind_name(a.kind), debugger, stdout);
  }
  if (error) std::rethrow_exception(error);

  int status = written;
  const int child = debug::child_exit_status(*source);
  if (child > 0) {
    std::fprintf(stderr, "genesis-mem: error: the watched command %s (the report covers it up to there)\n",
                 source->end_reason().c_str());
    status = status == 0 ? 1 : status;
  }
  if (a.kind == Kind::kLeak && a.check && status == 0) {
    std::unique_lock<std::mutex> lock = debugger.lock();
    for (const std::string& d : debugger.leak_detector()->devices()) {
      if (debugger.leak_detector()->report(d).leak_detected) status = 3;
    }
  }
  return status;
}

CLI::App* add_common(CLI::App& app, const char* name, const char* help, WatchArgs& a, double interval,
                     double duration) {
  a.interval = interval;
  a.duration = duration;
  CLI::App* sub = app.add_subcommand(name, help);
  add_source_options(sub, a.source);
  sub->add_option("--duration", a.duration, "seconds to watch (source time; 0: until Ctrl-C or the source ends)")
      ->capture_default_str();
  sub->add_option("--interval", a.interval, "seconds between samples")->capture_default_str();
  sub->add_option("--output,-o", a.output, "write the JSON report here");
  sub->add_flag("--plot", a.plot, "also draw PNG plots (next to --output, or genesis-mem-<command>.png)");
  sub->add_option("--html", a.html, "also write a self-contained HTML report here");
  sub->add_option("--chrome-trace", a.chrome_trace,
                  "also write the timeline as Chrome-trace / Perfetto JSON here");
  sub->add_flag("--json", a.json, "print the JSON report on standard output instead of the summary");
  sub->add_flag("--quiet,-q", a.quiet, "no start-up line");
  return sub;
}

}  // namespace

std::vector<Command> add_watch_commands(CLI::App& app) {
  std::vector<Command> out;
  {
    auto a = std::make_shared<WatchArgs>();
    a->kind = Kind::kProfile;
    CLI::App* sub = add_common(app, "profile", "sample memory in the background and report usage, peaks and history",
                               *a, 0.1, 60);
    out.push_back({sub, [a] { return run_watch(*a); }});
  }
  {
    auto a = std::make_shared<WatchArgs>();
    a->kind = Kind::kOom;
    a->threshold = 85;
    CLI::App* sub = add_common(app, "oom", "predict out-of-memory: growth, time to OOM, risk level, what to do",
                               *a, 0.1, 10);
    sub->add_option("--threshold", a->threshold, "warn at this usage, in percent of capacity")->capture_default_str();
    sub->add_flag("--monitor", a->monitor,
                  "keep watching (until --duration or Ctrl-C; default duration then: until stopped)");
    sub->callback([a, sub] {
      if (a->monitor && sub->get_option("--duration")->count() == 0) a->duration = 0;
    });
    out.push_back({sub, [a] { return run_watch(*a); }});
  }
  {
    auto a = std::make_shared<WatchArgs>();
    a->kind = Kind::kLeak;
    a->threshold = 10;
    CLI::App* sub = add_common(app, "leak", "find steady growth (leaks) and the allocation sites that hold it", *a,
                               0.1, 120);
    sub->add_option("--threshold", a->threshold, "MiB (2^20 bytes) per minute of steady growth that counts as a leak")
        ->capture_default_str();
    sub->add_option("--window", a->window, "seconds over which growth is judged")->capture_default_str();
    sub->add_flag("--enable-tracking", a->tracking, "rank the allocation sites that hold the growth");
    sub->add_flag("--check", a->check, "exit with status 3 when a leak is found (for scripts and CI)");
    out.push_back({sub, [a] { return run_watch(*a); }});
  }
  {
    auto a = std::make_shared<WatchArgs>();
    a->kind = Kind::kFragment;
    CLI::App* sub = add_common(app, "fragment", "fragmentation over time: cached vs allocated, largest free block",
                               *a, 1.0, 120);
    out.push_back({sub, [a] { return run_watch(*a); }});
  }
  {
    auto a = std::make_shared<WatchArgs>();
    a->kind = Kind::kMonitor;
    a->threshold = 85;
    CLI::App* sub = add_common(app, "monitor", "profile and OOM prediction together (--all: every tool)", *a, 0.1, 0);
    sub->add_flag("--all", a->all, "run every tool: profile, oom, leak, fragment");
    sub->add_option("--threshold", a->threshold, "OOM warning threshold in percent")->capture_default_str();
    sub->add_flag("--enable-tracking", a->tracking, "sample allocation sites");
    out.push_back({sub, [a] { return run_watch(*a); }});
  }
  return out;
}

}  // namespace genesis::tools
