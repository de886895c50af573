// GPU storages shared between processes through CUDA IPC.
//
//   exporter:  Storage s = ipc_shareable_storage({1024}, DType::kFloat32, cuda0);
//              cuda::IpcHandle h = export_storage(s);   // send h.to_string()
//   importer:  Storage t = import_storage(cuda::IpcHandle::from_string(text),
//                                         {1024}, DType::kFloat32);
//
// Note [Lifetime of shared GPU memory]: the importer maps the exporter's
// memory; nothing in CUDA stops the exporter from freeing it meanwhile. The
// exporter must keep its Storage alive until every importer has released
// its storage (a pooled block that went back to the pool would be handed to
// a new allocation while the other process still writes to it). Work on
// shared memory is not ordered across processes either: synchronise (or use
// IPC events) before the other side reads.
#pragma once

#include <cstdint>
#include <vector>

#include "genesis/cuda/ipc.h"
#include "genesis/storage/storage.h"

namespace genesis {

/// A CUDA storage in its own cudaMalloc allocation (not from the caching
/// allocator), exportable whatever the allocator's configuration. Freed with
/// cudaFree when the last reference goes.
Storage ipc_shareable_storage(std::vector<std::int64_t> shape, DType dtype, Device device);

/// A handle another process can open with import_storage. Works for
/// ipc_shareable_storage and for pooled storages from classic (cudaMalloc)
/// segments; expandable-segment blocks give an InvalidArgumentError that says
/// to use ipc_shareable_storage. Throws InvalidArgumentError for CPU or empty
/// storages.
cuda::IpcHandle export_storage(const Storage& storage);

/// Maps an exported storage into this process as a CUDA storage of `shape`
/// and `dtype` (their byte size must equal the handle's). The mapping closes
/// when the last reference goes. Throws InvalidArgumentError for a size
/// mismatch or a handle this process exported itself, CudaError when CUDA
/// cannot open it.
Storage import_storage(const cuda::IpcHandle& handle, std::vector<std::int64_t> shape, DType dtype);

}  // namespace genesis
