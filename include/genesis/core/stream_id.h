// Stream and event identifiers: plain values shared by every layer.
//
// The caching allocator keys cached blocks by stream, the CUDA layer creates
// and queries streams, storage passes them along. None of them needs the
// others to name a stream, so the handle types live here, below all of them.
#pragma once

#include <cstdint>

namespace genesis {

/// An opaque stream identifier. 0 is the default (legacy) stream. For CUDA it
/// is the cudaStream_t value; for the simulated device a SimulatedDevice
/// stream number.
using StreamId = std::uintptr_t;

/// An opaque event handle: the cudaEvent_t value for CUDA, an upstream's own
/// number for the simulated device; 0 means "no event".
using EventId = std::uintptr_t;

}  // namespace genesis
