// genesis-mem interactive: a live view of memory in the terminal.
//
// Every refresh shows each device (used of total with a bar, the growth
// trend and a history sparkline), the selected device in detail (allocated,
// reserved, cached, fragmentation, largest free block, OOM risk) and the
// allocation sites that hold the most memory when the source knows them.
// Keys: q quits, Tab / arrows / digits pick a device, space pauses, s shows
// or hides the sites. Without a terminal on standard input (a pipe, CI) it
// draws --frames frames as plain text, which is how it is tested.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "command.h"
#include "genesis/core/error.h"
#include "genesis/debug/oom_detector.h"
#include "interrupt.h"
#include "report_format.h"
#include "source_options.h"
#include "terminal.h"

namespace genesis::tools {

namespace {

struct InteractiveArgs {
  SourceArgs source;
  double interval = 0.5;
  int frames = 0;  // 0: until q / Ctrl-C
  double threshold = 85.0;
  bool plain = false;
};

// The recent past of one device: for the sparkline and the trend.
struct DeviceView {
  std::deque<debug::MemorySample> recent;  // at most kRecent samples
  debug::OOMPredictor predictor;
  DeviceView(double threshold, const std::string& id) : predictor(threshold, id) {}
};
constexpr std::size_t kRecent = 240;

std::string sparkline(const std::deque<debug::MemorySample>& s, std::size_t width) {
  static const char* const kBars[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  if (s.empty()) return {};
  const std::size_t n = std::min(width, s.size());
  const std::uint64_t total = std::max<std::uint64_t>(s.back().total, 1);
  std::string out;
  for (std::size_t i = s.size() - n; i < s.size(); ++i) {
    const double f = std::clamp(static_cast<double>(s[i].used) / static_cast<double>(total), 0.0, 1.0);
    out += kBars[std::min<int>(7, static_cast<int>(f * 8.0))];
  }
  return out;
}

std::string bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width + 0.5);
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '.') + "]";
}

std::string risk_colour(debug::RiskLevel level, bool colour) {
  const std::string name(debug::risk_level_name(level));
  if (!colour) return name;
  const char* code = level == debug::RiskLevel::critical ? "\033[1;31m"
                     : level == debug::RiskLevel::high   ? "\033[31m"
                     : level == debug::RiskLevel::medium ? "\033[33m"
                                                          : "\033[32m";
  return code + name + "\033[0m";
}

void draw(const debug::MemorySource& source, const std::vector<debug::SourceDevice>& devices,
          std::map<std::string, DeviceView>& views, std::size_t selected, bool paused, bool show_sites,
          const std::vector<debug::SiteStat>& sites, bool tty) {
  const int cols = terminal_columns();
  std::string out;
  if (tty) out += "\033[H\033[2J";
  const std::uint64_t t = source.now_ns();
  out += "genesis-mem interactive  " + source.describe() + "  t=" + format_seconds(t / 1e9) +
         (paused ? "  [paused]" : "") + "\n";
  out += "keys: q quit  Tab/arrows/0-9 device  space pause  s sites\n\n";
  out += "   dev  used / total                     util   trend        risk      history\n";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    DeviceView& v = views.at(devices[i].id);
    if (v.recent.empty()) continue;
    const debug::MemorySample& s = v.recent.back();
    const debug::OOMPrediction p = v.predictor.predict({});
    char line[256];
    std::snprintf(line, sizeof line, "%s %-4s %9s / %-9s %s %5.1f%%  %+7.1f MiB/s  ", i == selected ? ">" : " ",
                  devices[i].id.c_str(), format_bytes(s.used).c_str(), format_bytes(s.total).c_str(),
                  bar(s.utilization_percent() / 100.0, 12).c_str(), s.utilization_percent(),
                  debug::steady_growth(p) ? p.growth_rate_bytes_per_sec / 1048576.0 : 0.0);
    out += std::string(line) + risk_colour(p.risk_level, tty) + "  " +
           sparkline(v.recent, static_cast<std::size_t>(std::max(10, cols - 78))) + "\n";
  }
  if (selected < devices.size()) {
    const DeviceView& v = views.at(devices[selected].id);
    if (!v.recent.empty()) {
      const debug::MemorySample& s = v.recent.back();
      out += "\ndevice " + devices[selected].id + " (" + devices[selected].name + ")\n";
      if (s.exact) {
        out += "  allocated " + format_bytes(s.allocated) + "   reserved " + format_bytes(s.reserved) + "   cached " +
               format_bytes(s.cached) + "   fragmentation " + format_percent(s.fragmentation() * 100.0) + "\n";
        out += "  largest free block " + format_bytes(s.largest_free_block) + "   free blocks " +
               std::to_string(s.free_blocks) + "   allocations " + std::to_string(s.num_allocs) + "   OOMs " +
               std::to_string(s.num_ooms) + "\n";
      } else {
        out += "  used " + format_bytes(s.used) + " (driver's figure; run the program with Genesis for exact ones)\n";
      }
      if (s.host_rss > 0) out += "  host resident memory " + format_bytes(s.host_rss) + "\n";
      const debug::OOMPrediction p = views.at(devices[selected].id).predictor.predict(sites);
      if (p.predicted_oom_seconds >= 0) out += "  predicted OOM in " + format_seconds(p.predicted_oom_seconds) + "\n";
      for (const std::string& r : p.recommendations) out += "  - " + r + "\n";
    }
    if (show_sites) {
      out += "\ntop allocation sites\n";
      if (!source.has_sites()) {
        out += "  (this source does not know allocation sites)\n";
      } else if (sites.empty()) {
        out += "  (no live allocations with a recorded site)\n";
      }
      for (std::size_t i = 0; i < sites.size() && i < 8; ++i) {
        std::string first = sites[i].site.substr(0, sites[i].site.find('\n'));
        if (static_cast<int>(first.size()) > cols - 28) first = first.substr(0, static_cast<std::size_t>(cols - 31)) + "...";
        char line[64];
        std::snprintf(line, sizeof line, "  %10s %8llu  ", format_bytes(sites[i].bytes).c_str(),
                      static_cast<unsigned long long>(sites[i].count));
        out += line + first + "\n";
      }
    }
  }
  if (source.ended()) out += "\n" + source.end_reason() + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!tty) std::fputs("\n", stdout);
  std::fflush(stdout);
}

int run_interactive(const InteractiveArgs& args) {
  if (!(args.interval > 0)) GENESIS_THROW(InvalidArgumentError, "--interval ", args.interval, ": expected seconds > 0");
  if (args.frames < 0) {
    GENESIS_THROW(InvalidArgumentError, "--frames ", args.frames,
                  ": expected a number of frames to draw (> 0), or 0 for the live view");
  }
  std::unique_ptr<debug::MemorySource> source = open_source(args.source);
  const std::vector<std::string> ids = pick_devices(*source, args.source.devices);
  std::vector<debug::SourceDevice> devices;
  for (const debug::SourceDevice& d : source->devices()) {
    if (std::find(ids.begin(), ids.end(), d.id) != ids.end()) devices.push_back(d);
  }
  if (devices.empty()) GENESIS_THROW(InvalidArgumentError, source->describe(), " has no devices to show");
  std::map<std::string, DeviceView> views;
  for (const debug::SourceDevice& d : devices) views.emplace(d.id, DeviceView(args.threshold, d.id));

  debug::StopFlag& stop = install_interrupt_handler();
  RawTerminal term;
  const bool tty = term.interactive() && !args.plain;
  if (!term.interactive() && args.frames == 0) {
    GENESIS_THROW(InvalidArgumentError,
                  "interactive needs a terminal on standard input; use 'genesis-mem monitor' for a report, "
                  "or --frames N to draw N frames as text");
  }
  const auto step = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(args.interval * 1e9));
  std::uint64_t next = source->now_ns();
  std::size_t selected = 0;
  bool paused = false, show_sites = true;
  std::vector<debug::SiteStat> sites;
  int drawn = 0;
  bool running = true;
  while (running && !stop.load()) {
    if (!paused) {
      next += step;
      // A trace at max speed skips the frames of a long idle gap, which
      // would all be the same (MemorySource::idle_until_ns), as the
      // watching commands do past a thousand intervals.
      if (const std::uint64_t idle = source->idle_until_ns(); idle > next && (idle - next) / step > 1000)
        next += (idle - next) / step * step;
      const bool more = source->advance_to(next, stop);
      for (const debug::SourceDevice& d : devices) {
        DeviceView& v = views.at(d.id);
        debug::MemorySample s = source->sample(d.id);
        v.predictor.add(s);
        v.recent.push_back(s);
        if (v.recent.size() > kRecent) v.recent.pop_front();
      }
      sites = source->has_sites() ? source->sites(devices[selected].id) : std::vector<debug::SiteStat>{};
      if (!more) running = false;
    }
    draw(*source, devices, views, selected, paused, show_sites, sites, tty);
    if (args.frames > 0 && ++drawn >= args.frames) break;
    // Keys are read between samples; the wait is short so that keys feel
    // live. While paused the wait is an interval long, and keys read then
    // count as well (space resumes, q quits).
    const int wait_ms = !term.interactive() ? 0 : paused ? static_cast<int>(args.interval * 1000) : 50;
    for (const KeyPress& k : term.read_keys(wait_ms)) {
      switch (k.key) {
        case Key::kQuit: running = false; break;
        case Key::kNext: selected = (selected + 1) % devices.size(); break;
        case Key::kPrev: selected = (selected + devices.size() - 1) % devices.size(); break;
        case Key::kPause: paused = !paused; break;
        case Key::kSites: show_sites = !show_sites; break;
        case Key::kDigit:
          if (static_cast<std::size_t>(k.digit) < devices.size()) selected = static_cast<std::size_t>(k.digit);
          break;
        case Key::kNone: break;
      }
    }
  }
  remove_interrupt_handler();
  return 0;
}

}  // namespace

Command add_interactive_command(CLI::App& app) {
  auto args = std::make_shared<InteractiveArgs>();
  CLI::App* sub = app.add_subcommand("interactive", "live terminal view of memory: devices, usage, trend, top sites");
  add_source_options(sub, args->source);
  sub->add_option("--interval", args->interval, "seconds between refreshes")->capture_default_str();
  sub->add_option("--threshold", args->threshold, "OOM warning threshold in percent of capacity")->capture_default_str();
  sub->add_option("--frames", args->frames, "draw this many frames as text and exit (no terminal needed)");
  sub->add_flag("--plain", args->plain, "no colours or screen clearing");
  return Command{sub, [args] { return run_interactive(*args); }};
}

}  // namespace genesis::tools
