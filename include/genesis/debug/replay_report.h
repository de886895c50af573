// Text reports of trace replays: the summary of a trace and the side-by-side
// table of configurations, with a trace's reference figures under them
// (replay_reference.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "genesis/debug/replay.h"
#include "genesis/debug/replay_reference.h"
#include "genesis/debug/trace.h"

namespace genesis::debug {

/// 14417617608 -> "14,417,617,608".
std::string format_thousands(std::uint64_t value);

/// A few lines about the trace: its lines per action, the events replayed,
/// unknown frees, allocations left live, and its peak live bytes.
std::string format_trace_summary(const Trace& trace);

/// One row per result (configuration), then the reference rows under
/// their label when `references` is given. Columns: configuration,
/// peak live, peak reserved, reserved/live, ns/event, upstream
/// allocs/frees, OOMs, unknown frees.
std::string format_replay_table(const std::vector<ReplayResult>& results,
                                const std::optional<ReferenceFigures>& references = std::nullopt);

}  // namespace genesis::debug
