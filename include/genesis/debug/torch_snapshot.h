// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot, and Genesis's
// genesis.cuda.memory._dump_snapshot) as replayable traces.
//
// A snapshot's device_traces hold, per device, the allocator's recorded
// actions: {action, addr, size, stream, time_us, frames}. Its "alloc" and
// "free_requested" entries are the program's requests, the same events the
// CSV trace format keeps (genesis/debug/trace.h), so they become a Trace
// through TraceBuilder: time stamps from time_us, allocation sites from
// frames ("file:line in name" per frame, innermost first), streams from
// stream. "free_completed", segment actions, "oom" and "snapshot" are
// counted and otherwise ignored, as in CSV traces. A replay allocates for
// one device: the one asked for, else the device with the most entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "genesis/debug/pickle.h"
#include "genesis/debug/trace.h"

namespace genesis::debug {

struct TorchSnapshotOptions {
  /// Device whose trace to read; -1: the one with the most entries.
  int device = -1;
};

/// The trace of a parsed snapshot. `source` names it in messages and in
/// Trace::source (with the device appended). Throws InvalidArgumentError
/// naming the entry for a snapshot of another shape: not a dict, no
/// device_traces (a snapshot taken without _record_memory_history), an
/// entry without action, addr or size, a field of the wrong type, a device
/// that is not in it.
Trace trace_from_torch_snapshot(const PickleValue& snapshot, const std::string& source,
                                const TorchSnapshotOptions& options = {});

/// parse_pickle() then trace_from_torch_snapshot().
Trace read_torch_snapshot(const std::uint8_t* data, std::size_t size, const std::string& source,
                          const TorchSnapshotOptions& options = {});

/// Reads a snapshot from a stream: `head` holds its first bytes, `more(buf,
/// cap)` returns up to `cap` further bytes (0 at the end). At most 16 GiB
/// are read (InvalidArgumentError beyond).
Trace read_torch_snapshot(std::string_view head, const std::function<std::size_t(char*, std::size_t)>& more,
                          const std::string& source, const TorchSnapshotOptions& options = {});

/// True when `data` starts like a pickle the reader takes: the PROTO opcode
/// of protocol 0 to 5, or, in protocols 0 and 1, which declare none, the
/// opening of a pickled dict or list (what read_trace() checks to tell a
/// snapshot from a CSV trace).
bool looks_like_pickle(const std::uint8_t* data, std::size_t size) noexcept;

}  // namespace genesis::debug
