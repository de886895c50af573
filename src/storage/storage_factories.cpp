// Storages over shared memory and memory-mapped files (Note [Storages over
// mappings], genesis/storage/storage_factories.h).
#include "genesis/storage/storage_factories.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "genesis/core/error.h"

namespace genesis::storage {

Storage shared_memory_storage(std::shared_ptr<SharedStorage> shm) {
  GENESIS_CHECK(shm != nullptr, "shared_memory_storage: expected a SharedStorage, got a null pointer");
  GENESIS_CHECK(!shm->is_closed(), "shared_memory_storage: SharedStorage '", shm->name(),
                "' is closed; expected an open mapping");
  void* data = shm->data();
  std::vector<std::int64_t> shape = shm->shape();
  const DType dtype = shm->dtype();
  // The last user unmaps; the name stays until unlink() or the owner's
  // auto-unlink when the last shared_ptr (this deleter's included) goes.
  return Storage::from_blob(data, std::move(shape), dtype, Device(DeviceType::kCPU),
                            [keep = std::move(shm)](void*) { keep->close(); });
}

Storage shared_memory_storage(std::vector<std::int64_t> shape, DType dtype, std::optional<std::string> name) {
  return shared_memory_storage(std::make_shared<SharedStorage>(std::move(shape), dtype, std::move(name)));
}

Storage mapped_file_storage(std::shared_ptr<MappedStorage> map) {
  GENESIS_CHECK(map != nullptr, "mapped_file_storage: expected a MappedStorage, got a null pointer");
  GENESIS_CHECK(!map->is_closed(), "mapped_file_storage: MappedStorage of '", map->filename(),
                "' is closed; expected an open mapping");
  const bool writable = map->is_writable();
  void* data = writable ? map->mutable_data() : const_cast<void*>(map->data());
  std::vector<std::int64_t> shape = map->shape();
  const DType dtype = map->dtype();
  Storage s = Storage::from_blob(data, std::move(shape), dtype, Device(DeviceType::kCPU),
                                 [keep = std::move(map)](void*) {
                                   try {
                                     keep->close();
                                   } catch (const std::exception& e) {
                                     std::fprintf(stderr, "genesis: closing MappedStorage '%s' failed: %s\n",
                                                  keep->filename().c_str(), e.what());
                                   }
                                 });
  // PROT_READ pages: the storage refuses writes too (Note [Read-only memory]).
  if (!writable) s.set_read_only("memory-mapped file (mode 'r')");
  return s;
}

Storage mapped_file_storage(std::string filename, std::vector<std::int64_t> shape, DType dtype, std::string_view mode,
                            std::int64_t offset) {
  return mapped_file_storage(std::make_shared<MappedStorage>(std::move(filename), std::move(shape), dtype, mode, offset));
}

}  // namespace genesis::storage
