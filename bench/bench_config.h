// The command-line options common to the allocator benchmarks
// (bench/bench_common.h) and the iteration budget they imply.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_sequences.h"

namespace genesis_bench {

// --------------------------------------------------------------- config ---

struct Config {
  bool quick = false;
  int reps = 5;                 // repetitions of the single-thread patterns
  int thread_reps = 5;          // repetitions of the thread patterns (noisier: more)
  std::uint64_t hot_iters = 1'000'000;
  std::uint64_t mixed_iters = 1'000'000;
  std::uint64_t thread_pairs = 1'000'000;  // per thread
  std::uint64_t min_iters = 100;           // floor when the time budget cuts iterations
  double rep_budget_ms = 300;              // one repetition should not take longer (0: no cap)
  double calib_ms = 4;                     // calibration / warm-up: a batch this long
  std::vector<int> threads = {1, 4, 8};
  std::vector<std::string> patterns;       // empty: all (hot, mixed, threads, events, api)
  std::string json_path;

  void make_quick() {
    quick = true;
    reps = 3;
    thread_reps = 3;
    hot_iters /= 10;
    mixed_iters /= 10;
    thread_pairs /= 10;
    min_iters = 20;
    rep_budget_ms /= 10;
    calib_ms = 1;
  }
  bool wants(const std::string& pattern) const {
    return patterns.empty() || std::find(patterns.begin(), patterns.end(), pattern) != patterns.end();
  }
  /// Iterations for one repetition: `nominal`, or fewer when est_ns says a
  /// repetition would exceed the budget (`parallel` pairs run at once).
  std::uint64_t iterations(std::uint64_t nominal, double est_ns, double parallel = 1) const {
    if (!(est_ns > 0) || !(rep_budget_ms > 0)) return nominal;
    const double fit = rep_budget_ms * 1e6 / (est_ns * parallel);
    if (fit >= static_cast<double>(nominal)) return nominal;
    return std::min(nominal, std::max<std::uint64_t>(min_iters, static_cast<std::uint64_t>(fit)));
  }
};

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

/// Parses the options common to both programs. `extra(name, value)` handles
/// program-specific options that take a value and returns false for unknown
/// ones. Returns false (after printing why) on a bad command line; sets
/// *help when --help was given.
inline bool parse_common(int argc, char** argv, Config& cfg, bool* help,
                         const std::function<bool(const std::string&, const std::string&)>& extra) {
  *help = false;
  bool quick = false;
  std::vector<std::pair<std::string, std::string>> later;  // applied after --quick
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (a == "--help" || a == "-h") {
      *help = true;
      return true;
    }
    if (a == "--quick") {
      quick = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value (or unknown option)\n", a.c_str());
        return false;
      }
      value = argv[++i];
    }
    later.emplace_back(a, value);
  }
  if (quick) cfg.make_quick();
  for (const auto& [name, value] : later) {
    try {
      if (name == "--json") {
        cfg.json_path = value;
      } else if (name == "--reps") {
        cfg.reps = std::max(1, std::stoi(value));
        cfg.thread_reps = cfg.reps;
      } else if (name == "--threads") {
        cfg.threads.clear();
        for (const auto& t : split_list(value)) cfg.threads.push_back(std::max(1, std::stoi(t)));
      } else if (name == "--patterns") {
        cfg.patterns = split_list(value);
      } else if (name == "--budget-ms") {
        cfg.rep_budget_ms = std::stod(value);
      } else if (name == "--iters") {
        const auto n = static_cast<std::uint64_t>(std::stoull(value));
        cfg.hot_iters = cfg.mixed_iters = cfg.thread_pairs = std::max<std::uint64_t>(1, n);
      } else if (!extra(name, value)) {
        std::fprintf(stderr, "error: unknown option %s\n", name.c_str());
        return false;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "error: bad value '%s' for %s\n", value.c_str(), name.c_str());
      return false;
    }
  }
  return true;
}

inline const char* common_usage() {
  return "  --quick            ~10x shorter (fewer iterations, shorter budget)\n"
         "  --json FILE        also write the results (and the run's metadata) as JSON\n"
         "  --reps N           repetitions per measurement (median reported)\n"
         "  --threads LIST     thread counts for the thread patterns (default 1,4,8)\n"
         "  --patterns LIST    subset of hot,mixed,threads (and for Genesis: events,api)\n"
         "  --iters N          nominal pairs per repetition (default 1e6, quick 1e5)\n"
         "  --budget-ms MS     fewer pairs when a repetition would take longer (default 300,\n"
         "                     quick 30; 0: always the nominal count, e.g. under a profiler)\n";
}

}  // namespace genesis_bench
