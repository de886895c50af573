// Private helpers shared by the storage sources (not installed).
#pragma once

#include <cstddef>

#include "genesis/core/device.h"
#include "genesis/storage/storage.h"

namespace genesis::storage_detail {

/// The stream an operation on `device` runs on: `stream` itself, or the
/// device's current stream for kCurrentStream (0 on the CPU).
StreamId resolve_stream(Device device, StreamId stream);

/// Throws InvalidArgumentError naming `who` unless `d` can be used: a CUDA
/// device must exist and Genesis must have been built with CUDA.
void check_device_usable(Device d, const char* who);

}  // namespace genesis::storage_detail
