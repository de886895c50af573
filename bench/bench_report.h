// Results of the allocator benchmarks (bench/bench_common.h): the median,
// minimum and maximum of the repetitions, RESULT and SKIP lines as results
// come, the table at the end, the optional JSON file, and the CPU model for
// the header of the output.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_config.h"

namespace genesis_bench {

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
