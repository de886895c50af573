// PyTorch memory snapshots written out in the CSV trace format
// (genesis-mem convert).
//
// A snapshot (torch.cuda.memory._snapshot() pickled) is read by every trace
// reader already (torch_snapshot.h), but a pickle is PyTorch's format: large,
// and read through a bounded pickle reader. The CSV trace format
// (trace.h, data/traces/README.md) is the project's own: gzip-compressed,
// streamed, readable by any tool. The conversion keeps every entry of the
// chosen device's trace as one line, with its real address, size, stream
// and time: alloc, free_requested, free_completed, segment_alloc,
// segment_free, segment_map, segment_unmap, snapshot and oom (an OOM's
// address is written as 0: PyTorch keeps the device's free bytes there).
// Only "annotate" entries (user markers, not allocator actions) are left
// out and counted. A trace read back from the CSV replays exactly as the
// snapshot does: the same events, streams, times and (with `sites`)
// allocation sites.
#pragma once

#include <cstdint>
#include <string>

#include "genesis/debug/pickle.h"

namespace genesis::debug {

struct SnapshotCsvOptions {
  /// Device whose trace to write; -1: the one with the most entries (as a
  /// replay of the snapshot chooses).
  int device = -1;
  /// Adds a `site` column: each alloc's stack frames, "file:line in name"
  /// separated by '|', innermost first. Off by default: frames can make
  /// the file many times larger, and a replay does not need them.
  bool sites = false;
};

/// What a conversion wrote.
struct SnapshotCsvResult {
  int device = -1;              ///< the device whose trace was written
  std::uint64_t entries = 0;    ///< entries in that device's trace
  std::uint64_t rows = 0;       ///< lines written (without the header)
  std::uint64_t annotations = 0;  ///< "annotate" entries left out
};

/// Writes the trace of a parsed snapshot to `path` (gzip-compressed when it
/// ends in ".gz"). `source` names the snapshot in errors. Throws
/// InvalidArgumentError for a snapshot of another shape (as
/// trace_from_torch_snapshot() does: the same entries are refused), for an
/// output that cannot be created, and genesis::Error when writing fails.
/// On error the output file may be left incomplete.
SnapshotCsvResult write_torch_snapshot_csv(const PickleValue& snapshot, const std::string& source,
                                           const std::string& path, const SnapshotCsvOptions& options = {});

/// Reads the snapshot file `in` (a plain pickle, at most 16 GiB) and writes
/// it to `out`. Throws InvalidArgumentError naming `in` when it cannot be
/// read or is not a pickled snapshot (a CSV trace is refused: it needs no
/// conversion), and what write_torch_snapshot_csv() throws.
SnapshotCsvResult convert_torch_snapshot_file(const std::string& in, const std::string& out,
                                              const SnapshotCsvOptions& options = {});

}  // namespace genesis::debug
