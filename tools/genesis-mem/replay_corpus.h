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

/// Replays the corpus and prints its report (text or JSON) on stdout.
/// A trace or sidecar that cannot be read is reported by name and reason
/// and the others are still replayed; the exit status is then 2 (bad
/// input), else 0. A folder that is missing, unreadable or holds no trace
/// throws InvalidArgumentError before anything is replayed; a failing
/// replay (a CUDA error) throws and stops the run.
int run_replay_corpus(const CorpusRunArgs& args);

}  // namespace genesis::tools
