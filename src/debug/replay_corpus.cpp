// Trace corpora (genesis/debug/replay_corpus.h).
#include "genesis/debug/replay_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "genesis/core/error.h"
#include "genesis/debug/replay_report.h"
#include "report_util.h"

namespace genesis::debug {

namespace fs = std::filesystem;

namespace {

// The file kinds of a corpus, in the order one is preferred over another
// of the same name (Note [Trace corpus]).
constexpr std::string_view kSuffixes[] = {".trace.csv.gz", ".trace.csv", ".pickle"};

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const TorchPeak* find_setting(const std::vector<TorchPeak>& peaks, const std::string& setting) noexcept {
  for (const TorchPeak& p : peaks) {
    if (p.setting == setting) return &p;
  }
  return nullptr;
}

double ratio(std::uint64_t reserved, std::uint64_t live) noexcept {
  return live == 0 ? 0.0 : static_cast<double>(reserved) / static_cast<double>(live);
}

}  // namespace

Corpus list_corpus(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  GENESIS_CHECK(!ec || ec == std::errc::no_such_file_or_directory, "cannot read corpus folder '", dir, "': ",
                ec.message());
  if (!fs::exists(st)) GENESIS_THROW_FILE(dir, ENOENT, "corpus folder '", dir, "' does not exist");
  GENESIS_CHECK(fs::is_directory(st), "'", dir, "' is not a folder (--corpus takes a folder of traces; ",
                "replay a single trace without --corpus)");
  // name -> (preference, file)
  std::map<std::string, std::vector<std::pair<std::size_t, std::string>>> by_name;
  fs::directory_iterator it(dir, ec);
  GENESIS_CHECK(!ec, "cannot read corpus folder '", dir, "': ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    GENESIS_CHECK(!ec, "cannot read corpus folder '", dir, "': ", ec.message());
    const std::string file = it->path().filename().string();
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;  // folders and broken links are not traces
    for (std::size_t k = 0; k < std::size(kSuffixes); ++k) {
      if (ends_with(file, kSuffixes[k])) {
        by_name[file.substr(0, file.size() - kSuffixes[k].size())].emplace_back(k, it->path().string());
        break;
      }
    }
  }
  GENESIS_CHECK(ec == std::error_code{}, "cannot read corpus folder '", dir, "': ", ec.message());
  GENESIS_CHECK(!by_name.empty(), "corpus folder '", dir,
                "' holds no traces (expected NAME.trace.csv, NAME.trace.csv.gz or NAME.pickle files)");
  Corpus corpus;
  for (auto& [name, files] : by_name) {
    std::sort(files.begin(), files.end());
    CorpusTrace t;
    t.name = name;
    t.path = files.front().second;
    const fs::path sidecar = fs::path(dir) / (name + ".json");
    std::error_code sec;
    if (fs::is_regular_file(sidecar, sec)) t.sidecar = sidecar.string();
    corpus.traces.push_back(std::move(t));
    for (std::size_t i = 1; i < files.size(); ++i) corpus.duplicates.push_back(files[i].second);
  }
  return corpus;
}

namespace {

// One live run's peaks ("pytorch.SETTING" or "genesis_torch", named `where`
// in errors); nullopt for a run that failed ("error").
template <class Json>
std::optional<TorchPeak> parse_peak(const Json& figures, const std::string& setting, const std::string& where,
                                    std::string_view origin) {
  GENESIS_CHECK(figures.is_object(), origin, ": ", where, " must be an object, not ", figures.type_name());
  if (figures.contains("error")) return std::nullopt;  // that run failed: no figures
  TorchPeak p;
  p.setting = setting;
  for (const char* key : {"peak_reserved_bytes", "peak_allocated_bytes"}) {
    const auto v = figures.find(key);
    GENESIS_CHECK(v != figures.end(), origin, ": ", where, " has no ", key,
                  " (each setting gives peak_reserved_bytes and peak_allocated_bytes, or \"error\" for a run "
                  "that failed)");
    GENESIS_CHECK(v->is_number_unsigned(),  // nlohmann: an integer >= 0
                  origin, ": ", where, ".", key, " must be an integer >= 0, not ", v->dump(),
                  " (or the run must say \"error\")");
    (std::string_view(key) == "peak_reserved_bytes" ? p.peak_reserved_bytes : p.peak_allocated_bytes) =
        v->template get<std::uint64_t>();
  }
  return p;
}

}  // namespace

TraceSidecar parse_trace_sidecar(std::string_view text, std::string_view origin) {
  // ordered: the settings keep the file's order (the report's column order).
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(text.begin(), text.end());
  } catch (const nlohmann::ordered_json::exception& e) {
    GENESIS_THROW(InvalidArgumentError, origin, ": not valid JSON (", e.what(), ")");
  }
  GENESIS_CHECK(doc.is_object(), origin, ": a trace sidecar is a JSON object, not ", doc.type_name());
  TraceSidecar out;
  const auto pt = doc.find("pytorch");
  if (pt != doc.end() && !pt->is_null()) {
    GENESIS_CHECK(pt->is_object(), origin, ": \"pytorch\" must be an object of settings, not ", pt->type_name());
    for (const auto& [setting, figures] : pt->items()) {
      if (auto p = parse_peak(figures, setting, "pytorch." + setting, origin)) out.pytorch.push_back(std::move(*p));
    }
  }
  const auto g = doc.find("genesis_torch");
  if (g != doc.end() && !g->is_null()) out.genesis_torch = parse_peak(*g, "genesis", "genesis_torch", origin);
  return out;
}

TraceSidecar load_trace_sidecar(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) GENESIS_THROW_FILE(path, errno != 0 ? errno : EIO, "cannot read trace sidecar '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  GENESIS_CHECK(!in.bad(), "error reading trace sidecar '", path, "'");
  return parse_trace_sidecar(text.str(), path);
}

const TorchPeak* best_torch_peak(const std::vector<TorchPeak>& peaks) noexcept {
  const TorchPeak* best = nullptr;
  for (const TorchPeak& p : peaks) {
    if (best == nullptr || p.peak_reserved_bytes < best->peak_reserved_bytes) best = &p;
  }
  return best;
}

double geometric_mean(const std::vector<double>& values) {
  double log_sum = 0;
  std::size_t n = 0;
  for (const double v : values) {
    if (v > 0 && std::isfinite(v)) {
      log_sum += std::log(v);
      ++n;
    }
  }
  return n == 0 ? 0.0 : std::exp(log_sum / static_cast<double>(n));
}

// The geometric mean as a table cell; "(k of n)" after it when only k of
// the n traces have a figure in that column, so that means over different
// subsets are not read as comparable.
std::string mean_cell(const std::vector<double>& values, int digits) {
  const double g = geometric_mean(values);
  if (!(g > 0)) return "-";
  const auto k = static_cast<std::size_t>(
      std::count_if(values.begin(), values.end(), [](double v) { return v > 0 && std::isfinite(v); }));
  std::string cell = detail::format_fixed(g, digits);
  if (k < values.size()) cell += " (" + std::to_string(k) + " of " + std::to_string(values.size()) + ")";
  return cell;
}

std::vector<std::string> torch_settings(const std::vector<CorpusRow>& rows) {
  std::vector<std::string> out;
  for (const CorpusRow& row : rows) {
    for (const TorchPeak& p : row.pytorch) {
      if (std::find(out.begin(), out.end(), p.setting) == out.end()) out.push_back(p.setting);
    }
  }
  return out;
}

std::string format_corpus_report(const std::vector<std::string>& configs, const std::vector<CorpusRow>& rows,
                                 const std::vector<std::string>& duplicates, const std::vector<CorpusError>& errors) {
  const std::vector<std::string> settings = torch_settings(rows);
  std::string out;
  if (!rows.empty()) {
    // Table 1: peak reserved / peak live.
    std::vector<std::vector<std::string>> t;
    std::vector<std::string> head{"trace", "events", "peak live"};
    const bool live_genesis =
        std::any_of(rows.begin(), rows.end(), [](const CorpusRow& r) { return r.genesis_torch.has_value(); });
    for (const std::string& c : configs) head.push_back(c);
    if (live_genesis) head.push_back("Genesis under PyTorch");
    for (const std::string& s : settings) head.push_back("PyTorch " + s);
    if (!settings.empty()) head.push_back("PyTorch best");
    t.push_back(head);
    std::vector<std::vector<double>> cols(configs.size() + (live_genesis ? 1 : 0) + settings.size() +
                                          (settings.empty() ? 0 : 1));
    for (const CorpusRow& row : rows) {
      std::vector<std::string> cells{row.trace.name, format_thousands(row.events), format_thousands(row.peak_live_bytes)};
      std::size_t col = 0;
      for (std::size_t c = 0; c < configs.size(); ++c, ++col) {
        // Out of memory: the replay skipped allocations, so its ratio is of
        // another run; it shows as OOM and stays out of the mean.
        const bool oom = c < row.results.size() && row.results[c].ooms > 0;
        const double v = c < row.results.size() && !oom ? row.results[c].reserved_per_live : 0.0;
        cells.push_back(oom ? "OOM" : v > 0 ? detail::format_fixed(v, 3) : "-");
        cols[col].push_back(v);
      }
      if (live_genesis) {
        const double v = row.genesis_torch ? ratio(row.genesis_torch->peak_reserved_bytes, row.peak_live_bytes) : 0.0;
        cells.push_back(v > 0 ? detail::format_fixed(v, 3) : "-");
        cols[col++].push_back(v);
      }
      for (const std::string& s : settings) {
        const TorchPeak* p = find_setting(row.pytorch, s);
        const double v = p == nullptr ? 0.0 : ratio(p->peak_reserved_bytes, row.peak_live_bytes);
        cells.push_back(v > 0 ? detail::format_fixed(v, 3) : "-");
        cols[col++].push_back(v);
      }
      if (!settings.empty()) {
        const TorchPeak* best = best_torch_peak(row.pytorch);
        const double v = best == nullptr ? 0.0 : ratio(best->peak_reserved_bytes, row.peak_live_bytes);
        cells.push_back(v > 0 ? detail::format_fixed(v, 3) + " " + best->setting : "-");
        cols[col].push_back(v);
      }
      t.push_back(std::move(cells));
    }
    std::vector<std::string> mean{"geometric mean", "", ""};
    for (const auto& c : cols) mean.push_back(mean_cell(c, 3));
    t.push_back(std::move(mean));
    out += "peak reserved / peak live (lower is better)";
    if (live_genesis) {
      out += "; Genesis under PyTorch: a live run of the workload with Genesis as PyTorch's allocator (sidecars)";
    }
    if (!settings.empty()) {
      out += "; PyTorch: its own peak reserved in the recording runs (sidecars), over the trace's peak live";
    }
    out += '\n';  // appended apart: GCC 12 warns falsely (-Wrestrict) on "\n" + a temporary string
    out += detail::render_table(t);

    // Table 2: ns per event.
    std::vector<std::vector<std::string>> n;
    std::vector<std::string> nhead{"trace"};
    for (const std::string& c : configs) nhead.push_back(c);
    n.push_back(nhead);
    std::vector<std::vector<double>> ncols(configs.size());
    for (const CorpusRow& row : rows) {
      std::vector<std::string> cells{row.trace.name};
      for (std::size_t c = 0; c < configs.size(); ++c) {
        const bool oom = c < row.results.size() && row.results[c].ooms > 0;
        const double v = c < row.results.size() && !oom ? row.results[c].ns_per_event : 0.0;
        cells.push_back(oom ? "OOM" : v > 0 ? detail::format_fixed(v, 1) : "-");
        ncols[c].push_back(v);
      }
      n.push_back(std::move(cells));
    }
    std::vector<std::string> nmean{"geometric mean"};
    for (const auto& c : ncols) nmean.push_back(mean_cell(c, 1));
    n.push_back(std::move(nmean));
    out += "\nns per event (the replay loop alone)\n";
    out += detail::render_table(n);
    // OOMs change what a row means: say so rather than let a ratio mislead.
    for (const CorpusRow& row : rows) {
      for (std::size_t c = 0; c < row.results.size() && c < configs.size(); ++c) {
        if (row.results[c].ooms > 0) {
          out += "note: " + row.trace.name + " under " + configs[c] + ": " + format_thousands(row.results[c].ooms) +
                 " allocations failed (out of memory) and were skipped: shown as OOM, left out of the means\n";
        }
      }
    }
  }
  if (!duplicates.empty()) {
    out += "\nnot replayed (another file of the same name was):\n";
    for (const std::string& d : duplicates) out += "  " + d + "\n";
  }
  if (!errors.empty()) {
    out += "\nerrors (" + std::to_string(errors.size()) + "):\n";
    for (const CorpusError& e : errors) {
      // Most messages name their file already (the trace reader's do).
      const bool named = e.message.compare(0, e.file.size(), e.file) == 0;
      out += "  " + (named ? e.message : e.file + ": " + e.message) + "\n";
    }
  }
  return out;
}

}  // namespace genesis::debug
