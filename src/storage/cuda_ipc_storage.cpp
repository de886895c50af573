// Storage-level CUDA IPC over cuda/ipc.h (Note [Lifetime of shared GPU memory]).
#include "genesis/storage/cuda_ipc_storage.h"

#include <memory>

#include "genesis/core/error.h"
#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"
#include "genesis/storage/detail/nbytes.h"
#include "storage_internal.h"

namespace genesis {

Storage ipc_shareable_storage(std::vector<std::int64_t> shape, DType dtype, Device device) {
  GENESIS_CHECK(device.is_cuda(), "ipc_shareable_storage: CUDA IPC shares GPU memory; device must be cuda, got ",
                device.str(), " (use SharedStorage for host memory)");
  storage_detail::check_device_usable(device, "ipc_shareable_storage");
  const std::size_t nbytes = storage::detail::checked_nbytes(shape, dtype, "ipc_shareable_storage");
  void* ptr = nullptr;
  {
    cuda::DeviceGuard guard(device.index());
    // At least one byte: an IPC handle needs an allocation to name.
    ptr = cuda::malloc_device(nbytes > 0 ? nbytes : 1);
    if (ptr == nullptr) {
      GENESIS_THROW(OutOfMemoryError, "CUDA OOM: ipc_shareable_storage could not allocate ",
                    detail::format_bytes(nbytes), " on ", device.str());
    }
  }
  const int index = device.index();
  return Storage::from_blob(ptr, std::move(shape), dtype, device, [index](void* p) {
    cuda::DeviceGuard guard(index, std::nothrow);
    cuda::free_device(p);  // in a deleter: a failure (CUDA shutting down) cannot be acted on
  });
}

cuda::IpcHandle export_storage(const Storage& storage) {
  GENESIS_CHECK(storage.defined(), "export_storage: the storage is null");
  GENESIS_CHECK(storage.device().is_cuda(), "export_storage: CUDA IPC shares GPU memory; the storage is on ",
                storage.device().str(), " (use SharedStorage for host memory)");
  GENESIS_CHECK(storage.nbytes() > 0, "export_storage: the storage is empty (0 bytes): nothing to share");
  try {
    return cuda::export_ipc_handle(storage.data_ptr(), storage.nbytes());
  } catch (const InvalidArgumentError& e) {
    if (!storage.is_pooled()) throw;
    GENESIS_THROW(InvalidArgumentError, e.message(),
                  " -- this storage came from the caching allocator; allocate it with ipc_shareable_storage "
                  "to share it whatever the allocator's configuration");
  }
}

Storage import_storage(const cuda::IpcHandle& handle, std::vector<std::int64_t> shape, DType dtype) {
  const std::size_t nbytes = storage::detail::checked_nbytes(shape, dtype, "import_storage");
  GENESIS_CHECK(nbytes == handle.nbytes, "import_storage: shape and dtype describe ", nbytes,
                " bytes but the handle shares ", handle.nbytes);
  auto mapping = std::make_shared<cuda::IpcMapping>(cuda::IpcMapping::open(handle));
  const Device device(DeviceType::kCUDA, mapping->device());
  return Storage::from_blob(mapping->data(), std::move(shape), dtype, device,
                            [mapping](void*) mutable { mapping->close(); });
}

}  // namespace genesis
