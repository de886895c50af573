// Private helper of src/cuda: turns a user's device argument into a checked
// index, with the errors every wrapper promises.
#pragma once

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda::detail {

/// `device` = -1 (kCurrentDevice) means the current device. Throws CudaError
/// ("<what> needs CUDA, but ...") when no GPU can be used, and
/// InvalidArgumentError for an index this process cannot see.
inline int resolve_device(int device, const char* what, const char* file, int line) {
  const int count = device_count();
  if (count == 0) throw_cuda_unavailable(what, file, line);
  if (device == -1) return current_device();
  if (device < 0 || device >= count) {
    ::genesis::detail::throw_invalid_argument(
        file, line,
        ::genesis::detail::str_cat(what, ": invalid CUDA device index ", device, " (this process sees ", count,
                                   count == 1 ? " device" : " devices",
                                   ", numbered from 0; CUDA_VISIBLE_DEVICES may hide others)"));
  }
  return device;
}

}  // namespace genesis::cuda::detail

#define GENESIS_RESOLVE_DEVICE(device, what) \
  ::genesis::cuda::detail::resolve_device((device), (what), __FILE__, __LINE__)
