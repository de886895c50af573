// Chrome trace / Perfetto timelines (the JSON "traceEvents" format that
// chrome://tracing and ui.perfetto.dev open).
#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "genesis/debug/reports.h"
#include "report_util.h"

namespace genesis::debug {

using genesis::detail::format_address;
using nlohmann::json;

namespace {

double micros(std::uint64_t t_ns, std::uint64_t first_ns) {
  return t_ns >= first_ns ? static_cast<double>(t_ns - first_ns) * 1e-3 : 0.0;
}

json process_name(int pid, const std::string& name) {
  return {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}};
}

// The trace as text, one event at a time: a document of every event would
// hold each as a tree of small objects, about ten times the size of its text
// (a million-event trace took 1.5 GB to write 143 MB). The text is what
// nlohmann would dump for the whole document: keys sorted, no spaces.
class TraceText {
 public:
  void add(const json& event) {
    text_ += first_ ? "" : ",";
    first_ = false;
    text_ += genesis::debug::detail::json_text(event);
  }
  std::string finish() && { return std::move(text_) + "]}"; }

 private:
  std::string text_ = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first_ = true;
};

}  // namespace

std::string chrome_trace_json(const std::vector<memory::MemoryEvent>& events, const std::string& name) {
  using memory::EventAction;
  TraceText out;
  out.add(process_name(0, name));
  const std::uint64_t first = events.empty() ? 0 : events.front().time_ns;
  // Blocks live at the end get an instant event at their allocation; freed
  // ones a complete event over their lifetime, emitted at the free.
  std::unordered_map<std::uintptr_t, std::size_t> live;  // address -> index of its alloc event
  std::vector<bool> freed(events.size(), false);
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  // Reserved bytes are known only from segment events; histories without
  // them (a trace source keeps allocations only) get no reserved counter
  // rather than one stuck at 0.
  const bool has_segments = std::any_of(events.begin(), events.end(), [](const memory::MemoryEvent& e) {
    return e.action == EventAction::kSegmentAlloc || e.action == EventAction::kSegmentFree;
  });
  for (std::size_t i = 0; i < events.size(); ++i) {
    const memory::MemoryEvent& e = events[i];
    const double ts = micros(e.time_ns, first);
    bool counters = true;
    switch (e.action) {
      case EventAction::kAlloc:
        allocated += static_cast<std::int64_t>(e.block_size ? e.block_size : e.size);
        live[e.address] = i;
        break;
      case EventAction::kFree: {
        allocated -= static_cast<std::int64_t>(e.block_size ? e.block_size : e.size);
        const auto it = live.find(e.address);
        std::uint64_t start_ns = e.time_ns >= e.duration_ns ? e.time_ns - e.duration_ns : e.time_ns;
        std::uint32_t tid = e.thread;
        if (it != live.end()) {
          freed[it->second] = true;
          start_ns = events[it->second].time_ns;
          tid = events[it->second].thread;
          live.erase(it);
        }
        out.add({{"name", "block " + std::to_string(e.size)},
                       {"cat", "block"},
                       {"ph", "X"},
                       {"ts", micros(start_ns, first)},
                       {"dur", micros(e.time_ns, start_ns)},
                       {"pid", 0},
                       {"tid", tid},
                       {"args", {{"size", e.size}, {"block_size", e.block_size}, {"address", format_address(e.address)},
                                 {"stream", e.stream}}}});
        break;
      }
      case EventAction::kSegmentAlloc:
        reserved += static_cast<std::int64_t>(e.size);
        break;
      case EventAction::kSegmentFree:
        reserved -= static_cast<std::int64_t>(e.size);
        break;
      case EventAction::kOOM:
        counters = false;
        out.add({{"name", "OOM " + std::to_string(e.size)},
                       {"cat", "oom"},
                       {"ph", "i"},
                       {"s", "g"},
                       {"ts", ts},
                       {"pid", 0},
                       {"tid", e.thread},
                       {"args", {{"size", e.size}, {"stream", e.stream}}}});
        break;
    }
    if (counters) {
      json args = {{"allocated", std::max<std::int64_t>(0, allocated)}};
      if (has_segments) args["reserved"] = std::max<std::int64_t>(0, reserved);
      out.add({{"name", "memory"}, {"ph", "C"}, {"ts", ts}, {"pid", 0}, {"args", std::move(args)}});
    }
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    const memory::MemoryEvent& e = events[i];
    if (e.action != EventAction::kAlloc || freed[i]) continue;
    out.add({{"name", "alloc " + std::to_string(e.size)},
                   {"cat", "alloc"},
                   {"ph", "i"},
                   {"s", "t"},
                   {"ts", micros(e.time_ns, first)},
                   {"pid", 0},
                   {"tid", e.thread},
                   {"args", {{"size", e.size}, {"block_size", e.block_size}, {"address", format_address(e.address)},
                             {"stream", e.stream}, {"cache_hit", e.cache_hit}, {"live_at_end", true}}}});
  }
  return std::move(out).finish();
}

std::string chrome_trace_json(const MemoryProfiler& profiler) {
  TraceText out;
  int pid = 0;
  std::uint64_t first = UINT64_MAX;
  for (const std::string& id : profiler.devices()) {
    const SampleHistory& h = profiler.history(id);
    if (!h.empty()) first = std::min(first, h.first_ns());
  }
  if (first == UINT64_MAX) first = 0;
  for (const std::string& id : profiler.devices()) {
    out.add(process_name(pid, "device " + id + " (" + profiler.device(id).name + ")"));
    for (const SampleBucket& b : profiler.history(id).buckets()) {
      out.add({{"name", "memory"},
                     {"ph", "C"},
                     {"ts", micros(b.mid_ns(), first)},
                     {"pid", pid},
                     {"args", {{"allocated", static_cast<std::uint64_t>(b.mean_allocated())},
                               {"reserved", static_cast<std::uint64_t>(b.mean_reserved())},
                               {"used", static_cast<std::uint64_t>(b.mean_used())}}}});
    }
    ++pid;
  }
  return std::move(out).finish();
}

}  // namespace genesis::debug
