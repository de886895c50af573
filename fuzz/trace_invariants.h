// The invariants trace.h promises of every Trace that reads (Note [Trace
// slots], Note [Trace times and sites]), checked by the fuzz targets that
// produce traces (trace_reader, snapshot_reader). A broken one aborts with
// what broke, which libFuzzer reports as a crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "genesis/debug/trace.h"

namespace genesis_fuzz {

using genesis::debug::kNullSlot;
using genesis::debug::Trace;
using genesis::debug::TraceOp;

#define GENESIS_FUZZ_TRACE_REQUIRE(cond)                                                                      \
  do {                                                                                                   \
    if (!(cond)) {                                                                                       \
      std::fprintf(stderr, "trace invariant broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__);           \
      std::abort();                                                                                      \
    }                                                                                                    \
  } while (0)

inline void check_trace_invariants(const Trace& t) {
  GENESIS_FUZZ_TRACE_REQUIRE(t.num_slots >= 1);
  GENESIS_FUZZ_TRACE_REQUIRE(!t.streams.empty());
  GENESIS_FUZZ_TRACE_REQUIRE(t.time_us.empty() || t.time_us.size() == t.events.size());
  GENESIS_FUZZ_TRACE_REQUIRE(t.event_site.empty() || t.event_site.size() == t.events.size());
  GENESIS_FUZZ_TRACE_REQUIRE(t.sites.empty() || t.sites[0].empty());
  for (std::size_t i = 1; i < t.sites.size(); ++i) GENESIS_FUZZ_TRACE_REQUIRE(!t.sites[i].empty());
  for (std::uint32_t s : t.event_site) GENESIS_FUZZ_TRACE_REQUIRE(s < t.sites.size());
  // A free_completed that freed a block (no free_requested did) is an event too.
  GENESIS_FUZZ_TRACE_REQUIRE(t.counts.alloc + t.counts.free_requested + t.counts.completed_frees +
                                 t.counts.empty_cache ==
                             t.events.size());
  GENESIS_FUZZ_TRACE_REQUIRE(t.counts.completed_frees <= t.counts.free_completed);
  // Slot discipline (Note [Trace slots]): an alloc fills a free slot, a free
  // names a filled one (or kNullSlot) and empties it; what is still filled
  // at the end is live_at_end_slots, leaked slots included.
  std::vector<std::int8_t> filled(t.num_slots, 0);  // 0 empty, 1 live, 2 leaked
  std::vector<std::uint64_t> size_in(t.num_slots, 0);
  std::uint64_t unknown = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const auto& e = t.events[i];
    GENESIS_FUZZ_TRACE_REQUIRE(e.slot < t.num_slots);
    GENESIS_FUZZ_TRACE_REQUIRE(e.stream < t.streams.size());
    if (e.op == TraceOp::kEmptyCache) {
      // Note [Released caches]: no slot, no size, never two in a row.
      GENESIS_FUZZ_TRACE_REQUIRE(e.slot == kNullSlot && e.size == 0 && e.stream == 0);
      GENESIS_FUZZ_TRACE_REQUIRE(i == 0 || t.events[i - 1].op != TraceOp::kEmptyCache);
      continue;
    }
    if (e.op == TraceOp::kAlloc) {
      GENESIS_FUZZ_TRACE_REQUIRE(e.slot != kNullSlot);
      GENESIS_FUZZ_TRACE_REQUIRE(filled[e.slot] == 0);
      filled[e.slot] = 1;
      size_in[e.slot] = e.size;
    } else {
      GENESIS_FUZZ_TRACE_REQUIRE(e.op == TraceOp::kFree);
      if (e.slot == kNullSlot) {
        GENESIS_FUZZ_TRACE_REQUIRE(e.size == 0);
        ++unknown;
        continue;
      }
      GENESIS_FUZZ_TRACE_REQUIRE(filled[e.slot] == 1);
      GENESIS_FUZZ_TRACE_REQUIRE(size_in[e.slot] == e.size);
      filled[e.slot] = 0;
    }
  }
  GENESIS_FUZZ_TRACE_REQUIRE(unknown == t.counts.unknown_frees);
  std::uint64_t live = 0;
  for (std::uint32_t s = 0; s < t.num_slots; ++s) live += filled[s] != 0 ? 1 : 0;
  GENESIS_FUZZ_TRACE_REQUIRE(t.live_at_end_slots.size() == t.counts.live_at_end);
  GENESIS_FUZZ_TRACE_REQUIRE(live == t.counts.live_at_end);
  for (std::uint32_t s : t.live_at_end_slots) GENESIS_FUZZ_TRACE_REQUIRE(s < t.num_slots && filled[s] != 0);
}

}  // namespace genesis_fuzz

#undef GENESIS_FUZZ_TRACE_REQUIRE
