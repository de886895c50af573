// Text reports of trace replays (replay_report.h).
#include "genesis/debug/replay_report.h"

#include <algorithm>
#include <cstdio>

#include "genesis/core/error.h"
#include "report_util.h"

namespace genesis::debug {

std::string format_thousands(std::uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

namespace detail {

std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string render_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (row.size() == 1) continue;
    width.resize(std::max(width.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    if (row.size() == 1) {
      out += row[0] + "\n";
      continue;
    }
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace detail

std::string format_trace_summary(const Trace& trace) {
  const TraceCounts& c = trace.counts;
  std::string out;
  out += "trace: " + trace.source + "\n";
  out += "  lines: " + format_thousands(c.lines) + " (alloc " + format_thousands(c.alloc) + ", free_requested " +
         format_thousands(c.free_requested) +
         (c.completed_frees > 0 ? ", free_completed that freed a block " + format_thousands(c.completed_frees) : "") +
         "; ignored: free_completed " + format_thousands(c.free_completed - c.completed_frees) +
         ", segment_alloc " + format_thousands(c.segment_alloc) + ", segment_free " +
         format_thousands(c.segment_free) + ", oom " + format_thousands(c.oom);
  if (c.other_ignored > 0) out += ", other " + format_thousands(c.other_ignored);
  out += ")\n";
  out += "  events replayed: " + format_thousands(trace.events.size()) + " (unknown frees " +
         format_thousands(c.unknown_frees) + ", allocations never freed " + format_thousands(c.live_at_end);
  if (c.empty_cache > 0) out += ", empty_cache " + format_thousands(c.empty_cache);
  if (c.realloc_of_live > 0) out += ", allocs at a live address " + format_thousands(c.realloc_of_live);
  out += ")\n";
  out += "  peak live bytes: " + format_thousands(trace.peak_live_bytes) + " (" +
         genesis::detail::format_bytes(trace.peak_live_bytes) + ")\n";
  return out;
}

std::string format_replay_table(const std::vector<ReplayResult>& results,
                                const std::optional<ReferenceFigures>& references) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"configuration", "peak live", "peak reserved", "reserved/live", "ns/event", "upstream alloc/free",
                  "OOMs", "unknown frees"});
  for (const ReplayResult& r : results) {
    rows.push_back({r.config, format_thousands(r.peak_live_bytes), format_thousands(r.peak_reserved_bytes),
                    // Out of memory: the replay skipped allocations, and a
                    // ratio of what remained would read as a result.
                    r.ooms > 0 ? std::string("OOM") : detail::format_fixed(r.reserved_per_live, 3),
                    detail::format_fixed(r.ns_per_event, 1),
                    format_thousands(static_cast<std::uint64_t>(r.upstream_allocs)) + " / " +
                        format_thousands(static_cast<std::uint64_t>(r.upstream_frees)),
                    format_thousands(r.ooms), format_thousands(r.unknown_frees)});
  }
  if (references) {
    rows.push_back({references->label + ":"});
    for (const ReferenceResult& ref : references->results) {
      rows.push_back({"  " + ref.allocator, "-", format_thousands(ref.peak_reserved_bytes),
                      detail::format_fixed(ref.reserved_per_live, 3),
                      ref.ns_per_event > 0 ? detail::format_fixed(ref.ns_per_event, 0) : "-", "-", "-", "-"});
    }
  }
  return detail::render_table(rows);
}

}  // namespace genesis::debug
