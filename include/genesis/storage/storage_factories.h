// Storages over shared memory and memory-mapped files: a Storage whose bytes
// are the mapping of a SharedStorage or a MappedStorage, usable wherever a
// Storage is (views, tensors, copies, the Python buffer protocol).
//
// Note [Storages over mappings]: the Storage's deleter closes the mapping, so
// the mapping lives exactly as long as something uses it (the Storage, its
// copies, views and tensors over it), and a caller that drops its own handle
// never leaves that memory dangling. The backing object is passed as a
// shared_ptr because it has more to say than the memory: the shm name, the
// owner and unlink() of a SharedStorage (the name stays until unlink(), or
// until the owner's auto-unlink when the last shared_ptr goes, Note [Shared
// memory ownership]); the file, mode and flush() of a MappedStorage (a mode
// "r" mapping is PROT_READ, so its Storage is read-only too, Note [Read-only
// memory]). The factories that take shape and dtype create the backing object
// themselves, for callers that only want the memory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/core/dtype.h"
#include "genesis/storage/mapped_storage.h"
#include "genesis/storage/shared_storage.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {

/// A CPU Storage over the mapping of `shm` (Note [Storages over mappings]).
/// Throws InvalidArgumentError if `shm` is null or closed.
Storage shared_memory_storage(std::shared_ptr<SharedStorage> shm);

/// A new (or, with a name that exists, attached) SharedStorage as a Storage;
/// see SharedStorage's constructor for the names and what it throws. An
/// unnamed segment is unlinked when the Storage's last user is gone.
Storage shared_memory_storage(std::vector<std::int64_t> shape, DType dtype, std::optional<std::string> name = {});

/// A CPU Storage over the mapping of `map` (Note [Storages over mappings]);
/// read-only in mode "r". The last user flushes (r+, w+) and unmaps; a flush
/// failure then goes to stderr, since a deleter cannot throw (call
/// MappedStorage::flush() or close() to see it). Throws InvalidArgumentError
/// if `map` is null or closed.
Storage mapped_file_storage(std::shared_ptr<MappedStorage> map);

/// Maps `filename` (MappedStorage's modes and errors) and returns the Storage.
Storage mapped_file_storage(std::string filename, std::vector<std::int64_t> shape, DType dtype,
                            std::string_view mode = "r", std::int64_t offset = 0);

}  // namespace genesis::storage
