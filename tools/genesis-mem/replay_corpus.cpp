// genesis-mem replay --corpus (replay_corpus.h). The listing, sidecars and
// the report are library code (genesis/debug/replay_corpus.h); this file
// runs the replays, one trace in memory at a time, and prints.
#include "replay_corpus.h"

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_text.h"
#include "genesis/core/error.h"
#include "genesis/debug/replay_corpus.h"
#include "genesis/debug/replay_report.h"
#include "genesis/debug/trace.h"
#include "progress_bar.h"

namespace genesis::tools {

namespace {

using json = nlohmann::ordered_json;

json torch_json(const debug::TorchPeak& p, std::uint64_t peak_live) {
  return json{{"peak_reserved_bytes", p.peak_reserved_bytes},
              {"peak_allocated_bytes", p.peak_allocated_bytes},
              {"reserved_per_live", peak_live == 0 ? 0.0
                                                   : static_cast<double>(p.peak_reserved_bytes) /
                                                         static_cast<double>(peak_live)}};
}

json report_json(const CorpusRunArgs& args, const std::vector<std::string>& names,
                 const std::vector<debug::CorpusRow>& rows, const debug::Corpus& corpus,
                 const std::vector<debug::CorpusError>& errors) {
  json out{{"corpus", args.dir},
           {"device", debug::replay_device_name(args.device)},
           {"repeat", args.repeat},
           {"warmup", args.warmup},
           {"configs", names},
           {"traces", json::array()}};
  for (const debug::CorpusRow& row : rows) {
    json t{{"name", row.trace.name},
           {"path", row.trace.path},
           {"sidecar", row.trace.sidecar.empty() ? json(nullptr) : json(row.trace.sidecar)},
           {"events", row.events},
           {"peak_live_bytes", row.peak_live_bytes},
           {"results", json::array()}};
    for (const debug::ReplayResult& r : row.results) {
      t["results"].push_back({{"config", r.config},
                              {"peak_live_bytes", r.peak_live_bytes},
                              {"peak_reserved_bytes", r.peak_reserved_bytes},
                              {"reserved_per_live", r.reserved_per_live},
                              {"ns_per_event", r.ns_per_event},
                              {"upstream_allocs", r.upstream_allocs},
                              {"upstream_frees", r.upstream_frees},
                              {"stream_borrows", r.stream_borrows},
                              {"ooms", r.ooms},
                              {"complete", r.ooms == 0}});
    }
    json pt = json::object();
    for (const debug::TorchPeak& p : row.pytorch) pt[p.setting] = torch_json(p, row.peak_live_bytes);
    t["pytorch"] = pt;
    const debug::TorchPeak* best = debug::best_torch_peak(row.pytorch);
    t["pytorch_best"] = best == nullptr ? json(nullptr) : json(best->setting);
    t["genesis_torch"] = row.genesis_torch ? torch_json(*row.genesis_torch, row.peak_live_bytes) : json(nullptr);
    out["traces"].push_back(std::move(t));
  }
  // Geometric means over the traces, per column (as the text report).
  // "traces": how many traces each mean is over (a PyTorch setting may lack
  // figures for some, an OOM replay is left out), out of out["traces"].
  json reserved = json::object();
  json ns = json::object();
  json counts = json::object();
  for (std::size_t c = 0; c < names.size(); ++c) {
    std::vector<double> r, n;
    for (const debug::CorpusRow& row : rows) {
      // A replay whose allocations ran out of memory did other work than
      // the trace: it is left out of the means, as in the text report.
      if (c < row.results.size() && row.results[c].ooms == 0) {
        r.push_back(row.results[c].reserved_per_live);
        n.push_back(row.results[c].ns_per_event);
      }
    }
    reserved[names[c]] = debug::geometric_mean(r);
    ns[names[c]] = debug::geometric_mean(n);
    counts[names[c]] = r.size();
  }
  for (const std::string& s : debug::torch_settings(rows)) {
    std::vector<double> r;
    for (const debug::CorpusRow& row : rows) {
      for (const debug::TorchPeak& p : row.pytorch) {
        if (p.setting == s && row.peak_live_bytes > 0)
          r.push_back(static_cast<double>(p.peak_reserved_bytes) / static_cast<double>(row.peak_live_bytes));
      }
    }
    reserved["pytorch " + s] = debug::geometric_mean(r);
    counts["pytorch " + s] = r.size();
  }
  std::vector<double> best;
  for (const debug::CorpusRow& row : rows) {
    const debug::TorchPeak* b = debug::best_torch_peak(row.pytorch);
    if (b != nullptr && row.peak_live_bytes > 0)
      best.push_back(static_cast<double>(b->peak_reserved_bytes) / static_cast<double>(row.peak_live_bytes));
  }
  if (!best.empty()) {
    reserved["pytorch best"] = debug::geometric_mean(best);
    counts["pytorch best"] = best.size();
  }
  std::vector<double> live_genesis;
  for (const debug::CorpusRow& row : rows) {
    if (row.genesis_torch && row.peak_live_bytes > 0)
      live_genesis.push_back(static_cast<double>(row.genesis_torch->peak_reserved_bytes) /
                             static_cast<double>(row.peak_live_bytes));
  }
  if (!live_genesis.empty()) {
    reserved["genesis under pytorch"] = debug::geometric_mean(live_genesis);
    counts["genesis under pytorch"] = live_genesis.size();
  }
  out["geometric_mean"] = {{"reserved_per_live", reserved}, {"ns_per_event", ns}, {"traces", counts}};
  out["duplicates"] = corpus.duplicates;
  json errs = json::array();
  for (const debug::CorpusError& e : errors) errs.push_back({{"file", e.file}, {"error", e.message}});
  out["errors"] = errs;
  return out;
}

}  // namespace

void check_replayable(const debug::Trace& trace, const std::string& path) {
  GENESIS_CHECK(trace.counts.alloc > 0, path, ": the trace holds no allocations (",
                debug::format_thousands(trace.counts.lines), " data lines): nothing to replay");
}

int report_out_of_memory(const std::string& trace, const std::vector<debug::ReplayResult>& results) {
  int status = 0;
  for (const debug::ReplayResult& r : results) {
    if (r.ooms == 0) continue;
    std::fprintf(stderr,
                 "genesis-mem: %s under %s: %s allocations failed with out of memory on a device of %s bytes and "
                 "were skipped; the trace does not fit, and its figures are of the allocations that succeeded\n",
                 trace.c_str(), r.config.c_str(), debug::format_thousands(r.ooms).c_str(),
                 debug::format_thousands(r.capacity).c_str());
    status = kExitOutOfMemory;
  }
  return status;
}

int run_replay_corpus(const CorpusRunArgs& args) {
  const debug::Corpus corpus = debug::list_corpus(args.dir);
  std::vector<std::string> names;
  for (const debug::ReplayConfig& c : args.configs) names.push_back(c.name);

  std::vector<debug::CorpusRow> rows;
  std::vector<debug::CorpusError> errors;
  for (const debug::CorpusTrace& t : corpus.traces) {
    // Bad input in one file must not cost the others their results: the
    // file and the reason go into the report and the run goes on.
    debug::Trace trace;
    try {
      if (args.show_progress) std::fprintf(stderr, "reading %s ...", t.path.c_str());
      trace = debug::read_trace(t.path);
      if (args.show_progress) std::fputs("\r\033[K", stderr);
      check_replayable(trace, t.path);
    } catch (const genesis::Error& e) {
      if (args.show_progress) std::fputs("\r\033[K", stderr);
      errors.push_back({t.path, e.message()});
      continue;
    }
    debug::CorpusRow row;
    row.trace = t;
    row.events = trace.events.size();
    row.peak_live_bytes = trace.peak_live_bytes;
    if (!t.sidecar.empty()) {
      try {
        debug::TraceSidecar sidecar = debug::load_trace_sidecar(t.sidecar);
        row.pytorch = std::move(sidecar.pytorch);
        row.genesis_torch = sidecar.genesis_torch;
      } catch (const genesis::InvalidArgumentError& e) {
        errors.push_back({t.sidecar, e.message()});
      }
    }
    for (const debug::ReplayConfig& config : args.configs) {
      ProgressBar bar("replay " + t.name + " " + config.name, args.show_progress);
      debug::ReplayOptions options;
      options.repeat = args.repeat;
      options.warmup = args.warmup;
      if (args.show_progress)
        options.progress = [&bar](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
      row.results.push_back(debug::replay(trace, config, options));
    }
    rows.push_back(std::move(row));
  }

  if (args.json) {
    std::printf("%s\n", report_json(args, names, rows, corpus, errors).dump(2, ' ', false, kBadUtf8).c_str());
  } else {
    std::string text = "corpus: " + args.dir + " (" + std::to_string(corpus.traces.size()) + " trace" +
                       (corpus.traces.size() == 1 ? "" : "s") + "), device " +
                       std::string(debug::replay_device_name(args.device)) + ", repeat " +
                       std::to_string(args.repeat) + "\n\n";
    text += debug::format_corpus_report(names, rows, corpus.duplicates, errors);
    std::fputs(text.c_str(), stdout);
  }
  int status = 0;
  for (const debug::CorpusRow& row : rows) status |= report_out_of_memory(row.trace.name, row.results);
  return errors.empty() ? status : 2;
}

}  // namespace genesis::tools
