// Fuzz target: the bounded pickle reader (debug::parse_pickle,
// src/debug/pickle_reader.cpp) and the PyTorch memory snapshot reader on
// top of it (debug::read_torch_snapshot, src/debug/torch_snapshot.cpp).
//
// Note [Plain pickles] promises that any input, however malformed, ends in a
// parsed Pickle of plain data or an InvalidArgumentError: never a crash, a
// hang, unbounded memory or an exception of another type. The fuzzer build
// checks the first three (ASan, UBSan, libFuzzer's -timeout and
// -rss_limit_mb), this target the rest:
//   * parse_pickle with small limits stays within them (objects());
//   * every node reachable from the root is well formed (a dict has key,
//     value pairs; only containers have items), walked once per node, so
//     memo cycles are fine;
//   * a snapshot that reads is a Trace with the invariants of trace.h
//     (fuzz/trace_invariants.h), and reading it again gives the same trace.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/debug/pickle.h"
#include "genesis/debug/torch_snapshot.h"
#include "trace_invariants.h"

namespace {

using genesis::debug::PickleValue;
using Kind = PickleValue::Kind;

#define FUZZ_REQUIRE(cond)                                                                           \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      std::fprintf(stderr, "snapshot reader property broken: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

// Visits every node reachable from `root` once (iteratively: a pickle may
// nest deeper than the stack allows recursion).
std::size_t check_nodes(const PickleValue& root) {
  std::unordered_set<const PickleValue*> seen;
  std::vector<const PickleValue*> todo{&root};
  while (!todo.empty()) {
    const PickleValue* v = todo.back();
    todo.pop_back();
    FUZZ_REQUIRE(v != nullptr);
    if (!seen.insert(v).second) continue;
    const bool container = v->kind == Kind::kList || v->kind == Kind::kTuple || v->kind == Kind::kDict;
    FUZZ_REQUIRE(container || v->items.empty());
    if (v->kind == Kind::kDict) FUZZ_REQUIRE(v->items.size() % 2 == 0);
    FUZZ_REQUIRE(v->kind_name() != nullptr);
    for (const PickleValue* item : v->items) todo.push_back(item);
  }
  return seen.size();
}

bool same_trace(const genesis::debug::Trace& a, const genesis::debug::Trace& b) {
  if (a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const auto &x = a.events[i], &y = b.events[i];
    if (x.size != y.size || x.slot != y.slot || x.stream != y.stream || x.op != y.op) return false;
  }
  return a.time_us == b.time_us && a.sites == b.sites && a.event_site == b.event_site && a.streams == b.streams &&
         a.num_slots == b.num_slots && a.peak_live_bytes == b.peak_live_bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  genesis::debug::PickleLimits limits;
  limits.max_objects = 1000;
  limits.max_stack = 500;
  limits.max_marks = 64;
  limits.max_memo = 500;
  try {
    const genesis::debug::Pickle p = genesis::debug::parse_pickle(data, size, limits);
    FUZZ_REQUIRE(p.objects() <= limits.max_objects);
    // 0 when none is declared; a PROTO opcode may name 1 too (Python never
    // writes one below 2, but pickle.loads takes it).
    FUZZ_REQUIRE(p.protocol() >= 0 && p.protocol() <= 5);
    FUZZ_REQUIRE(check_nodes(p.root()) <= p.objects());
  } catch (const genesis::InvalidArgumentError&) {
  }
  try {
    const genesis::debug::Trace t = genesis::debug::read_torch_snapshot(data, size, "fuzz");
    genesis_fuzz::check_trace_invariants(t);
    FUZZ_REQUIRE(same_trace(t, genesis::debug::read_torch_snapshot(data, size, "fuzz")));
  } catch (const genesis::InvalidArgumentError&) {
  }
  return 0;
}
