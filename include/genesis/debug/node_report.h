// The report a worker of the distributed memory monitor sends its master:
// one node's figures (memory_metrics.h) as JSON.
//
// Note [Node reports]: a worker sends its full state every time (figures,
// OOM prediction, leak rate, recent warnings, its own metrics endpoint),
// never a delta, so a master that restarts is whole again after one report
// from each worker and a lost report costs nothing. The master trusts
// nothing in a report: every field is checked for type and range, strings
// and lists are bounded, and what does not fit is an InvalidArgumentError
// (HTTP 400) rather than a crash or a huge allocation.
//
//   {"version": 1, "node": "gpu-07", "rank": "3", "local_rank": "3",
//    "world_size": "8", "pid": 1234, "interval_s": 5, "source": "nvml",
//    "metrics_endpoint": "gpu-07:9464", "host_rss": 123,
//    "warnings": ["high OOM risk on device 0: ..."],
//    "devices": [{"id": "0", "name": "...", "total": ..., "used": ...,
//       "allocated": ..., "reserved": ..., "active": ..., "cached": ...,
//       "largest_free_block": ..., "num_ooms": ..., "num_allocs": ...,
//       "risk_level": 0-3, "usage_percent": ..., "predicted_oom_seconds":
//       ... (negative: none), "growth_bytes_per_second": ...,
//       "leak_growth_bytes_per_second": ..., "leak_detected": false,
//       "recommendation": "..."}]}
#pragma once

#include <string>
#include <string_view>

#include "genesis/debug/memory_metrics.h"

namespace genesis::debug {

/// Limits a master applies to a report (Note [Node reports]).
struct NodeReportLimits {
  std::size_t max_devices = 64;
  std::size_t max_string = 1024;
  std::size_t max_warnings = 32;
};

/// The JSON of `node` (one line).
std::string node_report_json(const NodeFigures& node);

/// Parses and checks a report. Throws InvalidArgumentError, naming the
/// field, for malformed JSON, a missing field, a wrong type or range, or a
/// report over the limits.
NodeFigures parse_node_report(std::string_view body, const NodeReportLimits& limits = {});

}  // namespace genesis::debug
