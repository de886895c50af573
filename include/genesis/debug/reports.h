// Reports of the memory debugger's tools: JSON documents, a self-contained
// HTML page, and Chrome trace (Perfetto) timelines.
//
// JSON keys are stable (tools and scripts read them). Devices are keyed by
// their id string ("0" for a trace). Percentages (utilization,
// fragmentation) are in percent 0-100, bytes are integers, times in
// seconds from the first sample unless a key says otherwise. Every function
// is thread-safe as far as its arguments are not changed meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/debug/fragmentation_analyzer.h"
#include "genesis/debug/leak_detector.h"
#include "genesis/debug/memory_profiler.h"
#include "genesis/debug/oom_detector.h"
#include "genesis/memory/events.h"

namespace genesis::debug {

class MemoryDebugger;

/// {"timestamp", "source", "devices": {"<id>": {"name", "current_memory":
/// {"allocated","free","total","utilization","reserved","cached",...},
/// "peak_memory" (peak allocated bytes), "peaks", "statistics":
/// {"avg_utilization","max_utilization","avg_fragmentation","num_snapshots",
/// ...}, "history": [{"t","allocated","reserved","used",...}]}}, "summary":
/// {"total_devices","total_memory_gb","overall_utilization","duration_seconds"}}.
/// `max_history_points` > 0 thins the history list to about that many
/// points (each a merge of neighbours); 0 keeps every bucket.
std::string profile_report_json(const MemoryProfiler& profiler, const std::string& source_description,
                                std::size_t max_history_points = 0);

/// {"devices": {"<id>": {"risk_assessment": {"risk_level","confidence",
/// "current_usage_percent","growth_rate_mb_per_sec","predicted_oom_time_seconds",
/// "recommendation","recommendations"}, "warnings": [...]}}}.
std::string oom_report_json(const OOMDetector& detector);

/// {"devices": {"<id>": {"leak_detected","verdict","growth_rate_mb_per_min","confidence",
/// "sites": [{"site","frames","growth_bytes","growth_rate_mb_per_min","bytes","count"}], ...}}}.
std::string leak_report_json(const LeakDetector& detector);

/// {"devices": {"<id>": {"samples": [...], "avg_fragmentation","max_fragmentation", ...}}}.
std::string fragment_report_json(const FragmentationAnalyzer& analyzer, std::size_t max_samples = 0);

/// Every enabled tool of `debugger` in one object: {"timestamp", "source",
/// "running", "elapsed_seconds", "sampler": {...}, "profile", "oom", "leak",
/// "fragment"} (the last four as above, present when enabled). The caller
/// holds the debugger's lock (MemoryDebugger::status_report does).
std::string status_report_json(const MemoryDebugger& debugger);

/// Writes `text` to `path` (replacing it). Throws InvalidArgumentError
/// naming the path and the system's reason when it cannot be opened,
/// written or closed (a full disk shows up at close).
void write_report(const std::string& path, const std::string& text);

/// What an HTML report shows; null members are left out.
struct HtmlReportInput {
  std::string title = "Genesis memory report";
  std::string source;
  const MemoryProfiler* profiler = nullptr;
  const FragmentationAnalyzer* fragmentation = nullptr;
  const OOMDetector* oom = nullptr;
  const LeakDetector* leak = nullptr;
};

/// One self-contained page: inline CSS and SVG charts (memory over time per
/// device with allocated/reserved/total lines, fragmentation over time), the
/// OOM risk and leak site tables. No scripts, no external resources.
std::string html_report(const HtmlReportInput& input);

/// Chrome trace / Perfetto JSON of an allocation history: {"traceEvents":
/// [...]}, counter events ("ph":"C") of allocated and reserved bytes, a
/// complete event ("ph":"X") per freed block spanning its lifetime, instant
/// events for allocations of blocks still live and for OOMs. Times in
/// microseconds from the first event.
std::string chrome_trace_json(const std::vector<memory::MemoryEvent>& events, const std::string& name = "genesis");

/// Counter tracks (allocated, reserved, used bytes) of every device of the
/// profiler, one process per device.
std::string chrome_trace_json(const MemoryProfiler& profiler);

}  // namespace genesis::debug
