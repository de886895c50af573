// Reference figures of a trace: what other allocators did on the same trace,
// measured elsewhere and printed beside Genesis's replay results, never run
// by Genesis.
//
// Note [Reference figures]: a trace carries its reference figures in a JSON
// file next to it, named after it: `<trace path>.reference.json` (for
// data/traces/gpt2_train.trace.csv.gz that is
// data/traces/gpt2_train.trace.csv.gz.reference.json). Any trace can have
// one; a trace without one gets no reference rows, whatever its name. The
// file is data, not code, so new measurements need no rebuild. Format:
//
//   {
//     "label": "measured by PyTorch 2.11 on an H200, not run here",
//     "results": [
//       {"allocator": "PyTorch native", "peak_reserved_bytes": 16521363456,
//        "reserved_per_live": 1.146, "ns_per_event": 1099},
//       ...
//     ]
//   }
//
// `label` (a string) heads the rows in reports; without it they read
// "reference (not run here)". `results` is a non-empty array; each entry
// needs `allocator` (a non-empty string), `peak_reserved_bytes` (an integer
// >= 0) and `reserved_per_live` (a number >= 0); `ns_per_event` (a number >= 0)
// is optional, 0 or missing meaning "not measured". Other keys are allowed and
// ignored (a "source" note saying how the figures were measured, say). A file
// that exists but breaks these rules is an error naming the file and the
// rule: a reference row silently missing would read as "nobody measured it".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace genesis::debug {

/// One allocator's figures on a trace.
struct ReferenceResult {
  std::string allocator;                 ///< "PyTorch native", ...
  std::uint64_t peak_reserved_bytes = 0;
  double reserved_per_live = 0;
  double ns_per_event = 0;               ///< 0 when not measured
};

/// The reference figures of one trace (Note [Reference figures]).
struct ReferenceFigures {
  std::string label;                     ///< heads the rows in reports
  std::vector<ReferenceResult> results;  ///< never empty
};

/// The label used when the reference file gives none.
inline constexpr std::string_view kDefaultReferenceLabel = "reference (not run here)";

/// Where the reference figures of `trace_path` live: trace_path +
/// ".reference.json".
std::string reference_path_for(std::string_view trace_path);

/// Parses the JSON text of a reference file. `origin` names the file in
/// errors. Throws InvalidArgumentError saying what was wrong and what was
/// expected.
ReferenceFigures parse_reference_figures(std::string_view text, std::string_view origin);

/// The reference figures of the trace at `trace_path`, read from
/// reference_path_for(trace_path); nullopt when that file does not exist
/// (and for "-", standard input). Throws InvalidArgumentError when it exists
/// but cannot be read or is malformed.
std::optional<ReferenceFigures> load_reference_figures(std::string_view trace_path);

}  // namespace genesis::debug
