// Text reports of trace replays: the summary of a trace, the side-by-side
// table of configurations, and the published reference figures of the
// traces bundled in data/traces/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/debug/replay.h"
#include "genesis/debug/trace.h"

namespace genesis::debug {

/// A figure published for a bundled trace by another allocator: printed
/// next to Genesis's results, never run by Genesis.
struct ReferenceResult {
  std::string allocator;                 ///< "PyTorch native", ...
  std::uint64_t peak_reserved_bytes = 0;
  double reserved_per_live = 0;
  double ns_per_event = 0;               ///< 0 when not published
};

/// How the reference rows are labelled in reports.
inline constexpr std::string_view kReferenceLabel = "reference (measured by PyTorch on H200, not run here)";

/// The published figures for a bundled trace, chosen by the file name of
/// `trace_path` ("gpt2_train*": data/traces/README.md). Empty for others.
std::vector<ReferenceResult> reference_results(std::string_view trace_path);

/// 14417617608 -> "14,417,617,608".
std::string format_thousands(std::uint64_t value);

/// A few lines about the trace: its lines per action, the events replayed,
/// unknown frees, allocations left live, and its peak live bytes.
std::string format_trace_summary(const Trace& trace);

/// One row per result (configuration), then the reference rows under
/// kReferenceLabel when `references` is not empty. Columns: configuration,
/// peak live, peak reserved, reserved/live, ns/event, upstream
/// allocs/frees, OOMs, unknown frees.
std::string format_replay_table(const std::vector<ReplayResult>& results,
                                const std::vector<ReferenceResult>& references = {});

}  // namespace genesis::debug
