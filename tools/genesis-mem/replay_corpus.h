// genesis-mem replay --corpus DIR: every trace of a folder through the same
// configurations (Note [Trace corpus] in genesis/debug/replay_corpus.h).
#pragma once

#include <string>
#include <vector>

#include "genesis/debug/replay.h"

namespace genesis::tools {

struct CorpusRunArgs {
  std::string dir;
  debug::ReplayDevice device = debug::ReplayDevice::kSimulated;
  std::vector<debug::ReplayConfig> configs;  ///< the table's columns
  unsigned repeat = 1;
  int warmup = -1;
  bool json = false;
  bool show_progress = false;
};

/// Exit status of a replay in which allocations failed with out of memory
/// (the trace does not fit the device or its cap): the figures describe
/// the allocations that succeeded, not the trace, which scripts must see.
constexpr int kExitOutOfMemory = 4;

/// Throws InvalidArgumentError for a trace without a single allocation
/// (an empty file, a header alone, only segment lines): a replay of it
/// would print figures of nothing as if they were results.
void check_replayable(const debug::Trace& trace, const std::string& path);

/// Says on standard error which replays of `trace` ran out of memory (how
/// many allocations failed, under which configuration and capacity).
/// Returns kExitOutOfMemory if any did, else 0.
int report_out_of_memory(const std::string& trace, const std::vector<debug::ReplayResult>& results);

/// Replays the corpus and prints its report (text or JSON) on stdout.
/// A trace or sidecar that cannot be read is reported by name and reason
/// and the others are still replayed; the exit status is then 2 (bad
/// input), else kExitOutOfMemory when a replay ran out of memory, else 0. A folder that is missing, unreadable or holds no trace
/// throws InvalidArgumentError before anything is replayed; a failing
/// replay (a CUDA error) throws and stops the run.
int run_replay_corpus(const CorpusRunArgs& args);

}  // namespace genesis::tools
