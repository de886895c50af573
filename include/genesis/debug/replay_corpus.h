// A corpus of traces: every trace in a folder replayed through the same
// allocator configurations (genesis-mem replay --corpus DIR), one table of
// traces against configurations, with PyTorch's own figures for each trace
// beside them when the folder has them.
//
// Note [Trace corpus]: a corpus is a folder (not searched recursively) of
// `NAME.trace.csv`, `NAME.trace.csv.gz` and `NAME.pickle` (a PyTorch memory
// snapshot) files. NAME is the trace's name in reports. One NAME is one
// trace: bench/torch/record_traces.py writes each trace both as a snapshot
// and as its CSV conversion, so when several files share a NAME only one is
// replayed, in the order .trace.csv.gz, .trace.csv, .pickle (the CSV is the
// project's format and reads faster), and the others are listed as
// duplicates. `NAME.json` beside a trace is its sidecar: how it was
// recorded, and what PyTorch's allocator reserved and allocated at its peak
// in the recording run and in runs of the same workload under other
// allocator settings:
//
//   {"model": "...", "workload": "...", "steps": 40, ...,
//    "pytorch": {"native":          {"peak_reserved_bytes": N, "peak_allocated_bytes": N},
//                "expandable_segments": {...},
//                "cudaMallocAsync": {...}}}
//
// A sidecar may also hold "genesis_torch": {"peak_reserved_bytes": N,
// "peak_allocated_bytes": N, ...}: Genesis as PyTorch's allocator in a live
// run of the same workload (`record_traces.py peaks --settings genesis`). It
// gets a column of its own, "Genesis under PyTorch", and is never one of
// PyTorch's settings. Only "pytorch" and "genesis_torch" are read (other keys
// are notes for people); a setting whose run failed may hold {"error":
// "..."} instead and is left out. A trace without a sidecar simply has no
// such columns. The best PyTorch setting of a trace is the one that reserved
// the least: what Genesis is compared with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/debug/replay.h"

namespace genesis::debug {

/// One trace of a corpus.
struct CorpusTrace {
  std::string name;     ///< the file name without .trace.csv[.gz] / .pickle
  std::string path;     ///< the file replayed
  std::string sidecar;  ///< NAME.json when it exists, else empty
};

/// The traces of a folder (Note [Trace corpus]).
struct Corpus {
  std::vector<CorpusTrace> traces;     ///< sorted by name
  std::vector<std::string> duplicates; ///< files not replayed: another file has the same NAME
};

/// Lists the folder `dir`. Throws InvalidArgumentError when it does not
/// exist, is not a folder, cannot be read, or holds no trace.
Corpus list_corpus(const std::string& dir);

/// PyTorch's own peaks under one allocator setting (the sidecar's figures).
struct TorchPeak {
  std::string setting;                   ///< "native", "expandable_segments", "cudaMallocAsync", ...
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
};

/// What a sidecar says about live runs of its workload.
struct TraceSidecar {
  std::vector<TorchPeak> pytorch;       ///< PyTorch's settings, in the order the file gives them
  std::optional<TorchPeak> genesis_torch;  ///< Genesis as PyTorch's allocator (setting "genesis")
};

/// The figures of a sidecar. `origin` names the file in errors. Throws
/// InvalidArgumentError for text that is not a JSON object, a "pytorch" that
/// is not an object of objects, or a setting (or "genesis_torch") without
/// integer peak_reserved_bytes and peak_allocated_bytes (>= 0) and without
/// "error".
TraceSidecar parse_trace_sidecar(std::string_view text, std::string_view origin);

/// Reads and parses the sidecar at `path`; InvalidArgumentError when it
/// cannot be read or is malformed.
TraceSidecar load_trace_sidecar(const std::string& path);

/// The setting that reserved the least; nullptr when `peaks` is empty.
const TorchPeak* best_torch_peak(const std::vector<TorchPeak>& peaks) noexcept;

/// One trace's line of the corpus report.
struct CorpusRow {
  CorpusTrace trace;
  std::uint64_t events = 0;
  std::uint64_t peak_live_bytes = 0;        ///< of the trace, as recorded
  std::vector<ReplayResult> results;        ///< one per configuration, in column order
  std::vector<TorchPeak> pytorch;           ///< from the sidecar (empty without one)
  std::optional<TorchPeak> genesis_torch;   ///< from the sidecar, when it has a live run under Genesis
};

/// A trace or sidecar that could not be used, and why.
struct CorpusError {
  std::string file;
  std::string message;
};

/// Geometric mean of the positive values; 0 when there are none.
double geometric_mean(const std::vector<double>& values);

/// The PyTorch settings that appear in any row, in order of first appearance.
std::vector<std::string> torch_settings(const std::vector<CorpusRow>& rows);

/// The report: a table of peak reserved / peak live (rows: traces; columns:
/// `configs`, then "Genesis under PyTorch" when a sidecar has it, then each
/// PyTorch setting and the best one, the live runs' peak reserved divided by
/// the trace's peak live bytes), a table of ns per
/// event, each with a geometric-mean row; then the duplicates and errors.
std::string format_corpus_report(const std::vector<std::string>& configs, const std::vector<CorpusRow>& rows,
                                 const std::vector<std::string>& duplicates, const std::vector<CorpusError>& errors);

}  // namespace genesis::debug
