// Shared timing and allocation patterns of the allocator benchmarks
// (bench/alloc_bench.cpp for Genesis, bench/torch_alloc_bench.cpp for PyTorch,
// cudaMallocAsync and cudaMalloc). Header-only, no Genesis or CUDA includes,
// so that both programs measure exactly the same loops.
//
// An allocator is benchmarked through an adaptor, any type with
//     void* alloc(std::size_t bytes);   // never nullptr for bytes > 0
//     void  free(void* ptr);
//     void  sync();                     // before timing (cudaDeviceSynchronize)
// The patterns are templates over the adaptor, so an inline hot path (Genesis)
// stays inline: no virtual call is added to what is measured.
//
// Patterns (same parameters in both programs):
//   hot            allocate(size) + free, repeated; sizes 512 B .. 256 MiB.
//   mixed          64 live allocations; each step frees the one in a
//                  pseudo-random slot and allocates a pseudo-random size into
//                  it (sizes: an octave 512 B * 2^k, k uniform in 0..15, then
//                  uniform inside the octave: 512 B .. 32 MiB - 1, roughly
//                  log-uniform). Fixed seed: every run sees the same sequence.
//   threads_hot    1, 4, 8 threads each doing the hot pair at 1 MiB for the
//                  same number of pairs, started together (std::barrier);
//                  ns_per_pair = wall time / total pairs of all threads,
//                  speedup = ns_per_pair(1 thread) / ns_per_pair(N threads),
//                  per repetition, the thread counts taking turns (see
//                  run_thread_suite); the median of those ratios.
//   threads_mixed  the same with the mixed pattern (each thread its own 64
//                  live allocations and its own sequence).
//   threads_*_window  the same, each thread running for a fixed window
//                  instead of a fixed number of pairs (aggregate throughput
//                  not bounded by the slowest thread: see run_threads).
// Timing: std::chrono::steady_clock around whole loops. A calibration pass
// (batches of 1, 2, 4, ... pairs until one batch takes a few ms) doubles as
// the warm-up, so segments are reserved and caches hot before timing; the
// iteration count is the nominal one (1e6 pairs, --quick: 1e5) or less when
// the allocator is so slow that a repetition would exceed the time budget
// (cudaMalloc). Each figure is the median of several repetitions.
//
// Output: one machine-readable line per measurement,
//   RESULT allocator=genesis upstream=host api=ptr events=off pattern=hot
//          size=512 threads=1 ns_per_pair=12.3 min_ns=.. max_ns=.. iters=.. reps=..
// (one line; threads_* lines add speedup=..), SKIP lines for configurations
// that cannot run, then a human-readable table; --json FILE writes the same
// results as JSON ({"results": [...], metadata}).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace genesis_bench {

using Clock = std::chrono::steady_clock;

inline double elapsed_ns(Clock::time_point t0, Clock::time_point t1) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

/// Keeps the compiler from dropping an allocation whose pointer is unused.
template <class T>
inline void keep(const T& value) {
#if defined(__GNUC__) || defined(__clang__)
  asm volatile("" : : "r,m"(value));
#else
  static volatile const void* sink;
  sink = &value;
#endif
}

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;

inline const std::vector<std::size_t>& hot_sizes() {
  static const std::vector<std::size_t> sizes = {512, 64 * KiB, 1 * MiB, 8 * MiB, 256 * MiB};
  return sizes;
}
inline constexpr int kMixedLive = 64;
inline constexpr int kMixedOctaves = 16;              // 512 B << 0..15, up to 32 MiB - 1
inline constexpr std::size_t kMixedSteps = 1 << 16;   // sequence length (cycled)
inline constexpr std::uint64_t kMixedSeed = 0x6e6573697347ULL;  // fixed: same sequence every run
inline constexpr std::size_t kThreadHotSize = 1 * MiB;

/// "512 B", "64 KiB", "1 MiB", ... for the tables.
inline std::string size_label(std::size_t bytes) {
  char buf[64];
  if (bytes >= MiB && bytes % MiB == 0) {
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes / MiB);
  } else if (bytes >= KiB && bytes % KiB == 0) {
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes / KiB);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  }
  return buf;
}

// ------------------------------------------------------------ sequences ---

/// SplitMix64: tiny, fast, and identical on every platform (unlike the
/// standard library's distributions).
struct SplitMix64 {
  std::uint64_t state;
  explicit SplitMix64(std::uint64_t seed) : state(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

/// The deterministic free/alloc sequence of the mixed pattern.
struct MixedSequence {
  std::array<std::uint32_t, kMixedLive> initial{};  // sizes of the first 64 live blocks
  std::vector<std::uint32_t> size;                   // step i: allocate size[i] ...
  std::vector<std::uint8_t> slot;                    // ... into slot[i] (after freeing it)

  static std::uint32_t draw_size(SplitMix64& rng) {
    const std::uint64_t r = rng.next();
    const std::uint32_t base = 512u << (r % kMixedOctaves);
    return base + static_cast<std::uint32_t>((r >> 8) % base);  // [base, 2 base)
  }

  /// distinct == 0: every size drawn afresh (continuous, rarely repeating);
  /// distinct > 0: sizes drawn from a fixed table of that many sizes, the way
  /// a model's tensors repeat the same shapes every step (pattern mixed_set).
  static MixedSequence make(std::uint64_t seed, std::size_t steps = kMixedSteps, std::size_t distinct = 0) {
    MixedSequence s;
    SplitMix64 rng(seed);
    std::vector<std::uint32_t> table(distinct);
    for (auto& v : table) v = draw_size(rng);
    auto draw = [&]() { return distinct == 0 ? draw_size(rng) : table[rng.next() % distinct]; };
    for (auto& v : s.initial) v = draw();
    s.size.resize(steps);
    s.slot.resize(steps);
    for (std::size_t i = 0; i < steps; ++i) {
      s.slot[i] = static_cast<std::uint8_t>(rng.next() % kMixedLive);
      s.size[i] = draw();
    }
    return s;
  }

  /// Mean size of the steps (for the report).
  double mean_size() const {
    double sum = 0;
    for (auto v : size) sum += v;
    return size.empty() ? 0.0 : sum / static_cast<double>(size.size());
  }
};

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

// -------------------------------------------------------------- results ---

struct Result {
  std::vector<std::pair<std::string, std::string>> labels;  // allocator, upstream, ..., pattern, size, threads
  double ns_per_pair = 0;  // median
  double min_ns = 0;
  double max_ns = 0;
  std::uint64_t iters = 0;  // pairs per repetition (per thread for thread patterns)
  int reps = 0;
  double speedup = -1;  // thread patterns only

  std::string label(const std::string& key) const {
    for (const auto& [k, v] : labels) {
      if (k == key) return v;
    }
    return "";
  }
};

struct Timing {
  double median = 0, min = 0, max = 0;
};

inline Timing summarize(std::vector<double> v) {
  Timing t;
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  t.median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  t.min = v.front();
  t.max = v.back();
  return t;
}

/// Collects results, prints RESULT lines as they come, a table at the end.
class Reporter {
 public:
  /// `program` heads the table and the JSON file.
  explicit Reporter(std::string program) : program_(std::move(program)) {}

  void add(Result r) {
    std::string line = "RESULT";
    for (const auto& [k, v] : r.labels) line += " " + k + "=" + v;
    char buf[256];
    std::snprintf(buf, sizeof buf, " ns_per_pair=%.1f min_ns=%.1f max_ns=%.1f iters=%llu reps=%d", r.ns_per_pair,
                  r.min_ns, r.max_ns, static_cast<unsigned long long>(r.iters), r.reps);
    line += buf;
    if (r.speedup >= 0) {
      std::snprintf(buf, sizeof buf, " speedup=%.2f", r.speedup);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    results_.push_back(std::move(r));
  }

  void skip(const std::string& allocator, const std::string& upstream, const std::string& reason) {
    std::string slug;  // one token: letters, digits, '.', '_', '-'
    for (char c : reason) {
      const bool keep_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             c == '.' || c == '_' || c == '-';
      if (keep_char) {
        slug += c;
      } else if (!slug.empty() && slug.back() != '-') {
        slug += '-';
      }
    }
    while (!slug.empty() && slug.back() == '-') slug.pop_back();
    std::printf("SKIP allocator=%s upstream=%s reason=%s\n", allocator.c_str(), upstream.c_str(), slug.c_str());
    std::printf("  %s(%s): skipped: %s\n", allocator.c_str(), upstream.c_str(), reason.c_str());
    std::fflush(stdout);
    skipped_.push_back(allocator + "(" + upstream + "): " + reason);
  }

  void note(const std::string& text) {
    std::printf("# %s\n", text.c_str());
    std::fflush(stdout);
  }

  const std::vector<Result>& results() const { return results_; }

  /// Column name of a result: allocator(upstream)[ api][ events].
  static std::string column_of(const Result& r) {
    std::string c = r.label("allocator") + "(" + r.label("upstream") + ")";
    const std::string api = r.label("api");
    if (!api.empty() && api != "ptr" && api != "raw") c += " " + api;
    if (r.label("events") == "on") c += " +events";
    return c;
  }
  /// Row name of a result: pattern, size, threads.
  static std::string row_of(const Result& r) {
    const std::string pattern = r.label("pattern");
    const std::string size = r.label("size");
    std::string row = pattern;
    if (size != "mixed" && !size.empty()) row += " " + size_label(std::stoull(size));
    if (pattern.rfind("threads", 0) == 0) row += " x" + r.label("threads");
    return row;
  }

  /// ns per pair; thread rows add the speedup.
  void print_table() const {
    std::vector<std::string> rows, cols;
    std::map<std::pair<std::string, std::string>, std::string> cell;
    for (const auto& r : results_) {
      const std::string row = row_of(r), col = column_of(r);
      if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
      if (std::find(cols.begin(), cols.end(), col) == cols.end()) cols.push_back(col);
      char buf[64];
      if (r.speedup >= 0) {
        std::snprintf(buf, sizeof buf, "%.1f (%.2fx)", r.ns_per_pair, r.speedup);
      } else {
        std::snprintf(buf, sizeof buf, "%.1f", r.ns_per_pair);
      }
      cell[{row, col}] = buf;
    }
    std::printf("\n%s: ns per alloc+free pair (median); thread rows: wall/total pairs (aggregate speedup)\n\n",
                program_.c_str());
    std::vector<std::size_t> width(cols.size() + 1, 0);
    width[0] = 7;  // "pattern"
    for (const auto& r : rows) width[0] = std::max(width[0], r.size());
    for (std::size_t j = 0; j < cols.size(); ++j) {
      width[j + 1] = cols[j].size();
      for (const auto& r : rows) {
        auto it = cell.find({r, cols[j]});
        if (it != cell.end()) width[j + 1] = std::max(width[j + 1], it->second.size());
      }
    }
    auto print_row = [&](const std::string& first, const std::function<std::string(std::size_t)>& at) {
      std::printf("| %-*s |", static_cast<int>(width[0]), first.c_str());
      for (std::size_t j = 0; j < cols.size(); ++j) std::printf(" %*s |", static_cast<int>(width[j + 1]), at(j).c_str());
      std::printf("\n");
    };
    print_row("pattern", [&](std::size_t j) { return cols[j]; });
    std::printf("|%s|", std::string(width[0] + 2, '-').c_str());
    for (std::size_t j = 0; j < cols.size(); ++j) std::printf("%s:|", std::string(width[j + 1] + 1, '-').c_str());
    std::printf("\n");
    for (const auto& r : rows) {
      print_row(r, [&](std::size_t j) {
        auto it = cell.find({r, cols[j]});
        return it == cell.end() ? std::string("-") : it->second;
      });
    }
    for (const auto& s : skipped_) std::printf("skipped: %s\n", s.c_str());
    std::printf("\n");
    std::fflush(stdout);
  }

  static std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        o += buf;
      } else {
        o += c;
      }
    }
    return o;
  }

  bool write_json(const std::string& path, const std::vector<std::pair<std::string, std::string>>& meta) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return false;
    }
    std::fprintf(f, "{\n  \"program\": \"%s\",\n", json_escape(program_).c_str());
    for (const auto& [k, v] : meta) std::fprintf(f, "  \"%s\": \"%s\",\n", json_escape(k).c_str(), json_escape(v).c_str());
    std::fprintf(f, "  \"skipped\": [");
    for (std::size_t i = 0; i < skipped_.size(); ++i)
      std::fprintf(f, "%s\"%s\"", i ? ", " : "", json_escape(skipped_[i]).c_str());
    std::fprintf(f, "],\n  \"results\": [\n");
    for (std::size_t i = 0; i < results_.size(); ++i) {
      const Result& r = results_[i];
      std::fprintf(f, "    {");
      for (const auto& [k, v] : r.labels) std::fprintf(f, "\"%s\": \"%s\", ", json_escape(k).c_str(), json_escape(v).c_str());
      std::fprintf(f, "\"ns_per_pair\": %.3f, \"min_ns\": %.3f, \"max_ns\": %.3f, \"iters\": %llu, \"reps\": %d",
                   r.ns_per_pair, r.min_ns, r.max_ns, static_cast<unsigned long long>(r.iters), r.reps);
      if (r.speedup >= 0) std::fprintf(f, ", \"speedup\": %.4f", r.speedup);
      std::fprintf(f, "}%s\n", i + 1 < results_.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    const bool ok = std::fclose(f) == 0;
    if (ok) std::printf("# wrote %s\n", path.c_str());
    return ok;
  }

 private:
  std::string program_;
  std::vector<Result> results_;
  std::vector<std::string> skipped_;
};

// ------------------------------------------------------------- patterns ---

/// Calibration and warm-up: runs batch(n) for n = 1, 2, 4, ... until one
/// batch of at least 4 ops takes at least `min_ms` (the first batches carry
/// one-time costs: segments, thread caches, event rings) or n reaches
/// `max_n`; returns the ns per op of the last batch.
template <class Batch>
double calibrate(Batch&& batch, double min_ms, std::uint64_t max_n) {
  double per_op = 0;
  for (std::uint64_t n = 1;; n *= 2) {
    n = std::min(n, std::max<std::uint64_t>(max_n, 1));
    const auto t0 = Clock::now();
    batch(n);
    const double ns = elapsed_ns(t0, Clock::now());
    per_op = ns / static_cast<double>(n);
    if ((ns >= min_ms * 1e6 && n >= 4) || n >= max_n) break;
  }
  return per_op;
}

/// Times `reps` runs of batch(iters); returns ns per op.
template <class Batch>
Timing time_reps(Batch&& batch, std::uint64_t iters, int reps) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    batch(iters);
    v.push_back(elapsed_ns(t0, Clock::now()) / static_cast<double>(iters));
  }
  return summarize(std::move(v));
}

/// The hot pair loop: n x (alloc(size), free).
template <class A>
inline void hot_loop(A& a, std::size_t size, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = a.alloc(size);
    keep(p);
    a.free(p);
  }
}

/// State of the mixed pattern: 64 live allocations and a position in the
/// sequence. Frees what it holds when destroyed (or at release()).
template <class A>
class MixedState {
 public:
  MixedState(A& a, const MixedSequence& seq) : a_(a), seq_(seq), mask_(seq.size.size() - 1) {
    for (int i = 0; i < kMixedLive; ++i) {
      live_[static_cast<std::size_t>(i)] = a_.alloc(seq_.initial[static_cast<std::size_t>(i)]);
      keep(live_[static_cast<std::size_t>(i)]);
    }
  }
  ~MixedState() { release(); }
  MixedState(const MixedState&) = delete;
  MixedState& operator=(const MixedState&) = delete;

  /// n steps of (free slot, alloc into slot).
  void run(std::uint64_t n) {
    const std::uint32_t* sizes = seq_.size.data();
    const std::uint8_t* slots = seq_.slot.data();
    std::size_t pos = pos_;
    for (std::uint64_t i = 0; i < n; ++i, ++pos) {
      const std::size_t k = pos & mask_;
      void*& s = live_[slots[k]];
      a_.free(s);
      s = a_.alloc(sizes[k]);
      keep(s);
    }
    pos_ = pos;
  }

  void release() {
    if (released_) return;
    released_ = true;
    for (void*& p : live_) {
      if (p != nullptr) a_.free(p);
      p = nullptr;
    }
  }

 private:
  A& a_;
  const MixedSequence& seq_;
  const std::size_t mask_;  // sequence length is a power of two
  std::array<void*, kMixedLive> live_{};
  std::size_t pos_ = 0;
  bool released_ = false;
};

/// Pattern hot at one size on the calling thread.
template <class A>
Result run_hot(A& a, std::size_t size, const Config& cfg, std::vector<std::pair<std::string, std::string>> labels) {
  auto batch = [&](std::uint64_t n) { hot_loop(a, size, n); };
  const double est = calibrate(batch, cfg.calib_ms, cfg.hot_iters);
  const std::uint64_t iters = cfg.iterations(cfg.hot_iters, est);
  a.sync();
  const Timing t = time_reps(batch, iters, cfg.reps);
  labels.emplace_back("pattern", "hot");
  labels.emplace_back("size", std::to_string(size));
  labels.emplace_back("threads", "1");
  Result r;
  r.labels = std::move(labels);
  r.ns_per_pair = t.median;
  r.min_ns = t.min;
  r.max_ns = t.max;
  r.iters = iters;
  r.reps = cfg.reps;
  return r;
}

/// Pattern mixed on the calling thread.
template <class A>
Result run_mixed(A& a, const MixedSequence& seq, const Config& cfg,
                 std::vector<std::pair<std::string, std::string>> labels, const char* pattern = "mixed") {
  MixedState<A> state(a, seq);
  auto batch = [&](std::uint64_t n) { state.run(n); };
  const double est = calibrate(batch, cfg.calib_ms, cfg.mixed_iters);
  const std::uint64_t iters = cfg.iterations(cfg.mixed_iters, est);
  a.sync();
  const Timing t = time_reps(batch, iters, cfg.reps);
  state.release();
  labels.emplace_back("pattern", pattern);
  labels.emplace_back("size", "mixed");
  labels.emplace_back("threads", "1");
  Result r;
  r.labels = std::move(labels);
  r.ns_per_pair = t.median;
  r.min_ns = t.min;
  r.max_ns = t.max;
  r.iters = iters;
  r.reps = cfg.reps;
  return r;
}

/// The order in which benchmark threads take CPUs: one CPU of each physical
/// core first (cores taken from the highest-numbered CPUs down), then the
/// second hardware thread of each core, and so on. Two benchmark threads on
/// the two hyper-threads of one core share its pipelines and L1, so a
/// scaling figure with thread 7 next to thread 0 measured the core, not the
/// allocator (with plain top-down pinning the 16-vCPU GPU machine's own
/// thread-local ceiling, a loop without an allocator, read well under 8x). Topology from sysfs
/// (topology/core_id, physical_package_id); without it, plain top-down order.
/// Staying off CPU 0 as long as possible keeps interrupts and unpinned helper
/// threads (the CUDA driver's) away. Same order for every allocator measured.
inline std::vector<int> bench_cpu_order() {
  std::vector<int> order;
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return order;
  auto read_int = [](int cpu, const char* what) {
    char path[128];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    long v = -1;
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fscanf(f, "%ld", &v) != 1) v = -1;
      std::fclose(f);
    }
    return v;
  };
  // (package, core) -> its CPUs, each list from the highest CPU down.
  std::map<std::pair<long, long>, std::vector<int>> cores;
  std::vector<std::pair<long, long>> core_order;  // cores by their highest CPU, descending
  for (int c = CPU_SETSIZE - 1; c >= 0; --c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    std::pair<long, long> key{read_int(c, "physical_package_id"), read_int(c, "core_id")};
    if (key.second < 0) key = {-1, c};  // no topology: every CPU its own core
    auto [it, inserted] = cores.try_emplace(key);
    if (inserted) core_order.push_back(key);
    it->second.push_back(c);
  }
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& key : core_order) {
      const std::vector<int>& cpus = cores[key];
      if (round < cpus.size()) {
        order.push_back(cpus[round]);
        any = true;
      }
    }
    if (!any) break;
  }
#endif
  return order;
}

/// "thread CPUs: 15 14 ..." for the report (the first 16).
inline std::string describe_cpu_order() {
  const std::vector<int> order = bench_cpu_order();
  std::string s = "thread CPUs (physical cores first):";
  for (std::size_t i = 0; i < order.size() && i < 16; ++i) s += " " + std::to_string(order[i]);
  if (order.empty()) s += " unpinned";
  return s;
}

/// Pins the calling thread to the `cpu`-th CPU of bench_cpu_order() (modulo
/// their number), so that thread-scaling figures do not depend on where the
/// scheduler happens to move threads. No-op where unsupported.
inline void pin_to_cpu(int cpu) {
#if defined(__linux__)
  static const std::vector<int> order = bench_cpu_order();
  if (order.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(order[static_cast<std::size_t>(cpu) % order.size()], &one);
  (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
#else
  (void)cpu;
#endif
}

/// Runs `nthreads` threads, each with its own adaptor from make_worker(tid)
/// (created on that thread), in lockstep: warm-up, a start barrier, the
/// pattern, an end barrier. Returns the wall time per pair over all threads
/// (one repetition: run_thread_suite repeats, taking turns between thread
/// counts, Note [Interleaved thread counts]). The pattern is either
///   fixed work (window_ns == 0): `pairs` pairs per thread, so the wall time
///     is the slowest thread's; or
///   a fixed window (window_ns > 0): every thread runs chunks of pairs until
///     the window ends, and the pairs of all threads are counted. On the GPU
///     machines the vCPUs run at different speeds from second to second, and
///     with fixed work 8 threads waited for the slowest one, so the speed-up
///     moved with the one-thread figure, not with the allocator (figures:
///     bench/HISTORY.md, "Eight threads: the slowest vCPU sets the fixed-work
///     figure").
/// Throws std::runtime_error if a worker failed.
/// Thread tid runs on the (tid + first_cpu)-th CPU of bench_cpu_order().
template <class MakeWorker>
double run_threads(MakeWorker&& make_worker, int nthreads, bool mixed, std::uint64_t pairs,
                   const std::vector<MixedSequence>& seqs, double window_ns = 0, int first_cpu = 0) {
  constexpr std::uint64_t kChunk = 256;  // pairs between looks at the stop flag (~6 us)
  const bool window = window_ns > 0;
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> done(static_cast<std::size_t>(nthreads), 0);
  std::barrier<> bar(nthreads + 1);
  std::mutex err_mu;
  std::string error;
  auto fail = [&](const char* what) {
    std::lock_guard<std::mutex> lk(err_mu);
    if (error.empty()) error = what;
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nthreads));
  for (int tid = 0; tid < nthreads; ++tid) {
    threads.emplace_back([&, tid] {
      pin_to_cpu(tid + first_cpu);
      bool ok = true;
      const std::uint64_t warm = std::max<std::uint64_t>(pairs / 10, 16);
      auto body = [&](auto& w) {
        using W = std::remove_reference_t<decltype(w)>;
        std::unique_ptr<MixedState<W>> st;
        try {
          if (mixed) {
            st = std::make_unique<MixedState<W>>(w, seqs[static_cast<std::size_t>(tid) % seqs.size()]);
            st->run(warm);
          } else {
            hot_loop(w, kThreadHotSize, warm);
          }
          w.sync();
        } catch (const std::exception& e) {
          fail(e.what());
          ok = false;
        }
        bar.arrive_and_wait();  // ready
        bar.arrive_and_wait();  // start
        if (ok) {
          try {
            auto run = [&](std::uint64_t n) {
              if (mixed) {
                st->run(n);
              } else {
                hot_loop(w, kThreadHotSize, n);
              }
            };
            if (window) {
              std::uint64_t n = 0;
              for (; !stop.load(std::memory_order_relaxed); n += kChunk) run(kChunk);
              done[static_cast<std::size_t>(tid)] = n;
            } else {
              run(pairs);
            }
          } catch (const std::exception& e) {
            fail(e.what());
            ok = false;
          }
        }
        bar.arrive_and_wait();  // end
        try {
          if (st) st->release();
        } catch (const std::exception& e) {
          fail(e.what());
        }
      };
      try {
        auto w = make_worker(tid);
        body(w);
      } catch (const std::exception& e) {
        // make_worker failed: still take part in every barrier phase.
        fail(e.what());
        bar.arrive_and_wait();
        bar.arrive_and_wait();
        bar.arrive_and_wait();
      }
    });
  }
  bar.arrive_and_wait();  // ready
  const auto t0 = Clock::now();
  bar.arrive_and_wait();  // start
  if (window) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(window_ns)));
    stop.store(true, std::memory_order_relaxed);
  }
  bar.arrive_and_wait();  // end
  const double elapsed = elapsed_ns(t0, Clock::now());
  double total = static_cast<double>(pairs) * nthreads;
  if (window) {
    total = 0;
    for (std::uint64_t n : done) total += static_cast<double>(n);
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error("worker thread failed: " + error);
  return elapsed / std::max(total, 1.0);
}

/// Patterns threads_hot and threads_mixed for every thread count of the
/// config. make_worker(tid) returns an adaptor by value (it may hold
/// per-thread state such as a stream) and is called on the worker thread;
/// it is also called once with tid = -1 on the calling thread to estimate
/// the single-thread cost, which fixes the pairs per thread.
template <class MakeWorker>
void run_thread_suite(MakeWorker&& make_worker, const Config& cfg, Reporter& rep,
                      const std::vector<std::pair<std::string, std::string>>& labels, bool hot_only = false) {
  if (cfg.threads.empty()) return;
  std::vector<int> counts = cfg.threads;  // ascending, so that 1 thread (the base) comes first
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  const int max_threads = counts.back();
  std::vector<MixedSequence> random_seqs, set_seqs;
  for (int t = 0; t < max_threads; ++t) {
    random_seqs.push_back(MixedSequence::make(kMixedSeed + 1 + static_cast<std::uint64_t>(t)));
    set_seqs.push_back(MixedSequence::make(kMixedSeed + 1 + static_cast<std::uint64_t>(t), kMixedSteps, 64));
  }
  for (const int variant : {0, 1, 2}) {
    if (hot_only && variant != 0) continue;
    const bool mixed = variant != 0;
    const char* name = variant == 0 ? "threads_hot" : variant == 1 ? "threads_mixed" : "threads_mixed_set";
    const std::vector<MixedSequence>& seqs = variant == 2 ? set_seqs : random_seqs;
    double est = 0;
    {
      auto w = make_worker(-1);
      if (mixed) {
        MixedState<decltype(w)> st(w, seqs[0]);
        est = calibrate([&](std::uint64_t n) { st.run(n); }, cfg.calib_ms, cfg.thread_pairs);
      } else {
        est = calibrate([&](std::uint64_t n) { hot_loop(w, kThreadHotSize, n); }, cfg.calib_ms, cfg.thread_pairs);
      }
    }
    // Same pairs per thread for every thread count; budget for the largest,
    // assuming no parallelism at all. The windowed runs (pattern name
    // + "_window", see run_threads) last what one thread's fixed work does.
    const std::uint64_t pairs = cfg.iterations(cfg.thread_pairs, est, max_threads);
    for (const bool windowed : {false, true}) {
      const std::string pattern = std::string(name) + (windowed ? "_window" : "");
      const double window_ns = windowed ? std::max(est * static_cast<double>(pairs), 1e6) : 0;
      // Note [Interleaved thread counts]: the GPU machines' vCPUs change
      // speed by a quarter from one second to the next, and each on its own
      // (bench/RESULTS.md). Timed one after the other, the 1-thread base and
      // the 8-thread run fell in different phases, and one CPU stood for
      // "one thread": the same code read speed-ups a factor two apart. So
      // each repetition times every thread count in turn, the speed-up is
      // the median of the repetitions' own ratios, and the single thread
      // moves to the next CPU each repetition.
      std::vector<std::vector<double>> samples(counts.size());
      std::vector<bool> failed(counts.size(), false);
      for (int rep_i = 0; rep_i < cfg.thread_reps; ++rep_i) {
        for (std::size_t c = 0; c < counts.size(); ++c) {
          if (failed[c]) continue;
          const int n = counts[c];
          try {
            samples[c].push_back(run_threads(make_worker, n, mixed, pairs, seqs, window_ns, n == 1 ? rep_i : 0));
          } catch (const std::exception& e) {
            rep.note(pattern + " threads=" + std::to_string(n) + " failed: " + e.what());
            failed[c] = true;
          }
        }
      }
      const std::size_t one = static_cast<std::size_t>(std::find(counts.begin(), counts.end(), 1) - counts.begin());
      const bool have_base = one < counts.size() && !failed[one];
      for (std::size_t c = 0; c < counts.size(); ++c) {
        if (failed[c] || samples[c].empty()) continue;
        const Timing t = summarize(samples[c]);
        Result r;
        r.labels = labels;
        r.labels.emplace_back("pattern", pattern);
        r.labels.emplace_back("size", mixed ? std::string("mixed") : std::to_string(kThreadHotSize));
        r.labels.emplace_back("threads", std::to_string(counts[c]));
        r.ns_per_pair = t.median;
        r.min_ns = t.min;
        r.max_ns = t.max;
        r.iters = pairs;
        r.reps = static_cast<int>(samples[c].size());
        if (have_base) {
          std::vector<double> ratios;
          for (std::size_t i = 0; i < samples[c].size() && i < samples[one].size(); ++i)
            if (samples[c][i] > 0) ratios.push_back(samples[one][i] / samples[c][i]);
          r.speedup = ratios.empty() ? -1 : summarize(std::move(ratios)).median;
        }
        rep.add(std::move(r));
      }
    }
  }
}

/// The CPU model from /proc/cpuinfo, for the header of the output.
inline std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "unknown";
  char line[512];
  std::string model = "unknown";
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon != nullptr) {
        model = colon + 1;
        while (!model.empty() && (model.front() == ' ' || model.front() == '\t')) model.erase(0, 1);
        while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

}  // namespace genesis_bench
