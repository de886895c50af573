#include "report_outputs.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_text.h"
#include "genesis/core/error.h"
#include "genesis/debug/reports.h"
#include "report_format.h"

extern char** environ;

namespace genesis::tools {

namespace {

// "report.json" -> "report.png"; "" -> "genesis-mem-<kind>.png".
std::string plot_path(const Outputs& o) {
  if (o.json_path.empty() || o.json_path == "-") return "genesis-mem-" + o.kind + ".png";
  std::filesystem::path p(o.json_path);
  p.replace_extension(".png");
  return p.string();
}

int report_failure(const std::string& what) {
  std::fprintf(stderr, "genesis-mem: error: %s\n", what.c_str());
  return 2;
}

// Copies what is in `fd` (from its start) to standard error; returns
// whether there was anything.
bool copy_to_stderr(int fd) {
  char buf[4096];
  bool any = false;
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    std::fwrite(buf, 1, static_cast<std::size_t>(n), stderr);
    any = true;
  }
  return any;
}

// Runs `PYTHON SCRIPT DATA PNG` with $GENESIS_MEM_PYTHON when it is set
// (that one only), else the first interpreter that has matplotlib of
// python3 on PATH and Debian's /usr/bin/python3 (a virtual environment
// first on PATH often lacks it). The script exits
// with 3 when matplotlib is missing; its standard error is shown only when
// it failed otherwise (an interpreter without matplotlib is not an error
// while another one has it). Returns "" or what went wrong.
std::string run_plotter(const std::string& script, const std::string& data, const std::string& png) {
  std::vector<std::string> interpreters;
  const char* chosen = std::getenv("GENESIS_MEM_PYTHON");
  // A Python the user names is the one used: no quiet fallback to another.
  if (chosen != nullptr && *chosen) {
    interpreters.push_back(chosen);
  } else {
    interpreters.push_back("python3");
    interpreters.push_back("/usr/bin/python3");
  }
  std::string error = "no Python interpreter found (install python3 and python3-matplotlib)";
  for (const std::string& interpreter : interpreters) {
    std::vector<std::string> args = {interpreter, script, data, png};
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    char err_path[] = "/tmp/genesis-mem-plot-err-XXXXXX";
    const int err_fd = ::mkstemp(err_path);
    if (err_fd >= 0) ::unlink(err_path);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
    pid_t pid = 0;
    const int spawned = ::posix_spawnp(&pid, interpreter.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      if (err_fd >= 0) ::close(err_fd);
      if (chosen != nullptr && *chosen) {
        return "GENESIS_MEM_PYTHON=" + interpreter + " cannot be run: " + std::strerror(spawned);
      }
      continue;
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool no_matplotlib = WIFEXITED(status) && WEXITSTATUS(status) == 3;
    const bool printed = !ok && !no_matplotlib && err_fd >= 0 && copy_to_stderr(err_fd);
    if (err_fd >= 0) ::close(err_fd);
    if (ok) return {};
    if (no_matplotlib) {
      error = "matplotlib is missing (install python3-matplotlib, or set GENESIS_MEM_PYTHON to a Python that has it)";
      continue;
    }
    if (printed) return interpreter + " " + script + " failed (its message is above)";
    return interpreter + " " + script + " failed without a message (" +
           (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                              : "killed by signal " + std::to_string(WTERMSIG(status))) +
           ")";
  }
  return error;
}

}  // namespace

namespace {

// Whether two paths name one file: the same text, the same file through a
// link or another spelling (both exist), or the same absolute path once
// normalised (one or both still to be written).
bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  const std::filesystem::path ca = std::filesystem::weakly_canonical(a, ec);
  if (ec) return false;
  const std::filesystem::path cb = std::filesystem::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

}  // namespace

void check_distinct_outputs(const Outputs& o, const std::string& input) {
  std::vector<std::pair<const char*, std::string>> files;
  auto add = [&](const char* flag, const std::string& path) {
    if (!path.empty() && path != "-") files.emplace_back(flag, path);
  };
  add("--output", o.json_path);
  add("--html", o.html_path);
  add("--chrome-trace", o.chrome_trace_path);
  if (o.plot) add("--plot", plot_path(o));
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!input.empty() && input != "-" && same_file(files[i].second, input)) {
      GENESIS_THROW(InvalidArgumentError, files[i].first, " '", files[i].second, "' is the trace being read ('",
                    input, "'): writing there would replace it; name another file");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (same_file(files[i].second, files[j].second)) {
        GENESIS_THROW(InvalidArgumentError, files[j].first, " and ", files[i].first, " both write '",
                      files[i].second, "'", std::strcmp(files[i].first, "--plot") == 0 ? " (the plot goes next to --output, with .png)" : "",
                      ": give each output its own file");
      }
    }
  }
}

void check_writable(const std::string& path) {
  if (path == "-") return;
  const bool existed = ::access(path.c_str(), F_OK) == 0;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    GENESIS_THROW(InvalidArgumentError, "cannot write '", path, "': ", std::strerror(errno),
                  " (choose a path in a writable directory)");
  }
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

std::string find_plot_script() {
  const char* env = std::getenv("GENESIS_MEM_PLOT_SCRIPT");
  if (env != nullptr && *env) return env;
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = '\0';
  const std::filesystem::path dir = std::filesystem::path(buf).parent_path();
  for (const std::filesystem::path& p :
       {dir / "genesis_mem_plot.py", dir / ".." / "share" / "genesis" / "genesis_mem_plot.py"}) {
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return {};
}

int write_outputs(const Outputs& o, const std::string& report_json, const debug::MemoryDebugger& d) {
  int status = 0;
  auto attempt = [&](const std::string& path, const auto& make) {
    if (path.empty()) return;
    try {
      const std::string text = make();
      if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fputc('\n', stdout);
      } else {
        debug::write_report(path, text);
      }
    } catch (const genesis::Error& e) {
      status = report_failure(e.message());
    }
  };
  attempt(o.json_path, [&] { return report_json; });
  attempt(o.html_path, [&] {
    std::unique_lock<std::mutex> lock = d.lock();
    debug::HtmlReportInput in;
    in.title = "genesis-mem " + o.kind;
    in.source = d.source().describe();
    in.profiler = d.profiler();
    in.fragmentation = d.fragmentation();
    in.oom = d.oom_detector();
    in.leak = d.leak_detector();
    return debug::html_report(in);
  });
  attempt(o.chrome_trace_path, [&] {
    std::vector<memory::MemoryEvent> events;
    for (const debug::SourceDevice& dev : d.devices()) {
      std::vector<memory::MemoryEvent> e = const_cast<debug::MemorySource&>(d.source()).events(dev.id);
      events.insert(events.end(), e.begin(), e.end());
    }
    std::unique_lock<std::mutex> lock = d.lock();
    // Allocation events where the source recorded them (a trace), the
    // sampled figures as counter tracks otherwise.
    if (!events.empty()) return debug::chrome_trace_json(events, d.source().describe());
    return debug::chrome_trace_json(*d.profiler());
  });
  if (o.plot) {
    const std::string script = find_plot_script();
    const std::string png = plot_path(o);
    if (script.empty()) {
      std::fprintf(stderr,
                   "genesis-mem: error: cannot draw plots: genesis_mem_plot.py is not next to genesis-mem "
                   "(set GENESIS_MEM_PLOT_SCRIPT to its path)\n");
      return status == 0 ? 1 : status;
    }
    // The plotter reads the histories: the profiler's and the fragmentation
    // analyser's reports, nested under one object.
    nlohmann::json data;
    {
      std::unique_lock<std::mutex> lock = d.lock();
      data["source"] = d.source().describe();
      if (d.profiler() != nullptr) {
        data["profile"] = nlohmann::json::parse(debug::profile_report_json(*d.profiler(), d.source().describe()));
      }
      if (d.fragmentation() != nullptr) {
        data["fragment"] = nlohmann::json::parse(debug::fragment_report_json(*d.fragmentation()));
      }
    }
    char tmpl[] = "/tmp/genesis-mem-plot-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) return report_failure(std::string("cannot create a temporary file: ") + std::strerror(errno));
    const std::string text = data.dump(-1, ' ', false, kBadUtf8);
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    std::string error = ok ? run_plotter(script, tmpl, png) : "cannot write a temporary file";
    ::unlink(tmpl);
    if (!error.empty()) {
      std::fprintf(stderr, "genesis-mem: error: cannot draw plots: %s\n", error.c_str());
      if (status == 0) status = 1;
    } else {
      std::fprintf(stderr, "genesis-mem: plots written to %s\n", png.c_str());
    }
  }
  return status;
}

void print_summary(const std::string& kind, const debug::MemoryDebugger& d, std::FILE* out) {
  const double elapsed = d.elapsed_seconds();  // takes the lock itself
  std::unique_lock<std::mutex> lock = d.lock();
  const bool all = kind == "status";
  std::fprintf(out, "%s: %s, %.1f s observed\n", kind.c_str(), d.source().describe().c_str(), elapsed);
  for (const debug::SourceDevice& dev : d.devices()) {
    std::fprintf(out, "\ndevice %s (%s)\n", dev.id.c_str(), dev.name.c_str());
    if (const debug::MemoryProfiler* p = d.profiler(); p != nullptr && (all || kind == "profile")) {
      const debug::SampleHistory& h = p->history(dev.id);
      if (!h.empty()) {
        const debug::MemorySample& s = h.last();
        std::fprintf(out, "  now       allocated %s, used %s of %s (%.1f%%)\n", format_bytes(s.allocated).c_str(),
                     format_bytes(s.used).c_str(), format_bytes(s.total).c_str(), s.utilization_percent());
        std::fprintf(out, "  peak      allocated %s, used %s, reserved %s\n", format_bytes(h.peak_allocated()).c_str(),
                     format_bytes(h.peak_used()).c_str(), format_bytes(h.peak_reserved()).c_str());
        std::fprintf(out, "  average   utilisation %.1f%% (max %.1f%%), fragmentation %.1f%%, %llu samples\n",
                     h.avg_utilization_percent(), h.max_utilization_percent(), h.avg_fragmentation() * 100.0,
                     static_cast<unsigned long long>(h.count()));
        if (s.host_rss > 0) std::fprintf(out, "  host      resident %s\n", format_bytes(s.host_rss).c_str());
      }
    }
    if (const debug::OOMDetector* o = d.oom_detector(); o != nullptr && (all || kind == "oom")) {
      const std::vector<std::string> ids = o->devices();
      if (std::find(ids.begin(), ids.end(), dev.id) != ids.end()) {
        const debug::OOMPrediction p = o->predict(dev.id);
        std::fprintf(out, "  OOM risk  %s (confidence %.2f): %.1f%% used, ",
                     std::string(debug::risk_level_name(p.risk_level)).c_str(), p.confidence,
                     p.current_usage_percent);
        // A growth rate fitted with little confidence is not growth: it is
        // not printed as such beside "the peaks are not growing".
        if (debug::steady_growth(p)) {
          std::fprintf(out, "peaks growing %.2f MiB/s", p.growth_rate_bytes_per_sec / 1048576.0);
        } else {
          std::fprintf(out, "no steady growth of the peaks");
        }
        if (p.ooms > 0) std::fprintf(out, ", %llu allocations out of memory", static_cast<unsigned long long>(p.ooms));
        if (p.predicted_oom_seconds >= 0) std::fprintf(out, ", OOM in %s", format_seconds(p.predicted_oom_seconds).c_str());
        std::fputc('\n', out);
        for (const std::string& r : p.recommendations) std::fprintf(out, "            - %s\n", r.c_str());
      }
    }
    if (const debug::LeakDetector* l = d.leak_detector(); l != nullptr && (all || kind == "leak")) {
      const std::vector<std::string> ids = l->devices();
      if (std::find(ids.begin(), ids.end(), dev.id) != ids.end()) {
        const debug::LeakReport r = l->report(dev.id);
        const std::string verdict = r.leak_detected ? "LEAK"
                                    : std::string(r.verdict()) == "possible"
                                        ? "possible (too little of the run to be sure: watch longer)"
                                        : "none";
        std::fprintf(out, "  leak      %s: steady growth %.2f MiB/min (threshold %.1f, confidence %.2f, warm-up %.1f s ignored)\n",
                     verdict.c_str(), r.growth_rate_mb_per_min, r.threshold_mb_per_min, r.confidence,
                     r.warmup_seconds);
        for (std::size_t i = 0; i < r.sites.size() && i < 10; ++i) {
          const debug::LeakSite& s = r.sites[i];
          std::fprintf(out, "            %+.2f MiB/min  %s held in %llu  %s\n", s.growth_rate_mb_per_min,
                       format_bytes(s.bytes).c_str(), static_cast<unsigned long long>(s.count),
                       s.frames.empty() ? s.site.c_str() : s.frames.front().c_str());
          for (std::size_t f = 1; f < s.frames.size() && f < 4; ++f) {
            std::fprintf(out, "                             called from %s\n", s.frames[f].c_str());
          }
        }
        if (!r.tracking) std::fprintf(out, "            (sites: run with --enable-tracking)\n");
      }
    }
    if (const debug::FragmentationAnalyzer* f = d.fragmentation(); f != nullptr && (all || kind == "fragment")) {
      const std::vector<std::string> ids = f->devices();
      if (std::find(ids.begin(), ids.end(), dev.id) != ids.end()) {
        const debug::FragmentationSummary s = f->summary(dev.id);
        std::fprintf(out, "  fragment  now %.1f%% (avg %.1f%%, max %.1f%%) of reserved is cached; largest free block %s, "
                          "%llu free blocks; 1 - largest/free %.1f%%\n",
                     s.current_fragmentation * 100, s.avg_fragmentation * 100, s.max_fragmentation * 100,
                     format_bytes(s.current_largest_free_block).c_str(),
                     static_cast<unsigned long long>(s.current_free_blocks), s.current_external * 100);
      }
    }
  }
  if (d.source().ended()) std::fprintf(out, "\n%s\n", d.source().end_reason().c_str());
}

}  // namespace genesis::tools
