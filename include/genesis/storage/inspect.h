// inspect_storage and StorageTracker: what a storage is, and which storages are
// still alive.
//
// Note [Tracking without a second ledger]: the caching allocator already
// knows every live block (its size, stream and allocation site), so the
// tracker keeps only weak references to the storages it was asked to watch
// and reads everything else from the allocator at query time. There is no
// second count to drift from the truth: a storage released behind the
// tracker's back simply stops being alive, and sizes are the allocator's
// rounded block sizes, the memory really held.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "genesis/storage/storage.h"
#include "genesis/storage/storage_view.h"

namespace genesis {

/// What inspect_storage reports.
struct StorageInfo {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
  DType dtype = DType::kUInt8;
  Device device;
  std::size_t nbytes = 0;        // the elements' bytes
  bool contiguous = true;
  std::uintptr_t data_ptr = 0;
  std::int64_t use_count = 0;    // strong references to the storage
  bool pooled = false;           // from a caching allocator
  bool pinned = false;           // page-locked host memory
  // Pool information (pooled storages): the allocator's view of the block
  // and of the whole pool.
  std::string pool;              // allocator name ("cuda:0", "host", "pinned")
  std::size_t block_size = 0;    // rounded size of the block held
  std::string location;          // allocation site (ScopedAllocationContext)
  std::size_t pool_allocated = 0;
  std::size_t pool_reserved = 0;
  double pool_fragmentation = 0.0;

  /// A readable multi-line description.
  std::string to_string() const;
};

StorageInfo inspect_storage(const Storage& storage);
StorageInfo inspect_storage(const StorageView& view);

/// One tracked storage that is still alive (see check_leaks).
struct TrackedStorage {
  std::string label;             // given at register_storage
  std::uintptr_t data_ptr = 0;
  std::size_t nbytes = 0;        // the storage's bytes
  std::size_t block_size = 0;    // what the allocator holds for it (0 if not pooled)
  Device device;
  std::string location;          // allocation site from the allocator, if recorded
  double age_seconds = 0.0;      // since register_storage
};

/// Watches storages (Note [Tracking without a second ledger]). Thread-safe.
class StorageTracker {
 public:
  /// Starts watching `storage` (a weak reference: the tracker never keeps
  /// memory alive). Registering the same storage twice is an error.
  void register_storage(const Storage& storage, std::string label = {});
  /// Stops watching; false if it was not registered.
  bool unregister_storage(const Storage& storage);
  /// Watched storages still alive.
  std::size_t count() const;
  /// Bytes held by the watched storages still alive: the allocator's block
  /// sizes for pooled storages, nbytes otherwise.
  std::size_t total_allocated() const;
  /// The watched storages still alive, largest first: at a point where the
  /// program expects to have released them, these are the leaks. Entries of
  /// storages that died are dropped as a side effect.
  std::vector<TrackedStorage> check_leaks();
  /// Forgets everything.
  void clear();

 private:
  struct Entry {
    WeakStorage storage;
    std::string label;
    std::chrono::steady_clock::time_point since;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace genesis
