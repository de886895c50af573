// Devices checked against the machine: the CUDA side of genesis::Device.
//
// Device itself (genesis/core/device.h) is a plain value; whether "cuda:3"
// exists, and which GPU plain "cuda" means, are questions for the CUDA
// runtime, answered here.
#pragma once

#include <string_view>

#include "genesis/core/device.h"

namespace genesis::cuda {

/// Parses "cpu", "cuda" (the calling thread's current device, index 0 unless
/// a device guard changed it) or "cuda:N", and checks that a CUDA device
/// exists (validate_device). Throws InvalidArgumentError for a malformed
/// string and for a CUDA index that does not exist on this machine (including
/// any CUDA device when the machine has no GPU or Genesis was built without
/// CUDA).
Device parse_device(std::string_view text);

/// Throws InvalidArgumentError if `device` is a CUDA device that does not
/// exist on this machine; a CPU device always passes. Never touches a GPU
/// beyond counting them.
void validate_device(const Device& device);

}  // namespace genesis::cuda
