// Private: copies between pageable host memory and a GPU through pinned
// staging buffers (Note [Staged copies] in staged_copy.cpp). CUDA builds only.
#pragma once

#include <cstddef>

#include "genesis/storage/storage.h"

namespace genesis::storage_detail {

/// Host (pageable) -> device. Returns once every byte of `src` has been read
/// and every chunk's DMA has finished (the staging buffers go back to the
/// pinned pool idle).
void staged_host_to_device(void* dst, const void* src, std::size_t nbytes, int device, StreamId stream);

/// Device -> host (pageable). Returns once `dst` holds the data.
void staged_device_to_host(void* dst, const void* src, std::size_t nbytes, int device, StreamId stream);

}  // namespace genesis::storage_detail
