// C++ statistics and snapshots -> plain Python dicts and lists (memory_stats, detailed_memory_stats, snapshots).
// Plain containers keep the Python side free to wrap them (genesis.MemoryStats)
// and make them easy to print, compare and serialise.
#pragma once

#include <cstddef>
#include <vector>

#include <pybind11/pybind11.h>

#include "genesis/memory/stats.h"

namespace genesis::python {

namespace py = pybind11;

/// Every Genesis statistics key ("allocated_bytes", "cached_bytes", "peak_allocated",
/// "num_allocations", "cache_hit_rate", "fragmentation_ratio", ...) plus the
/// PyTorch-style per-pool keys "<stat>.<all|small_pool|large_pool>.<current|
/// peak|allocated|freed>".
py::dict stats_to_dict(const memory::MemoryStats& s);

/// Segments as dicts: address, size (also total_size), state ("allocated" when
/// any block is allocated, else "free"), stream, pool (also segment_type),
/// allocated_size, expandable, mapped_bytes and blocks (address, size,
/// requested_size, state, stream).
py::list snapshot_to_list(const std::vector<memory::SegmentInfo>& segments);

/// Live allocations as dicts: address, size, requested_size, stream, location.
py::list allocations_to_list(const std::vector<memory::AllocationInfo>& allocations);

}  // namespace genesis::python
