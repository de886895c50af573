// BatchStorage: many copies at once, spread over several CUDA streams.
//
// A GPU has separate copy engines for each direction and runs kernels next
// to them; copies issued on one stream run one after another, copies on
// different streams can overlap (a host-to-device and a device-to-host copy
// at the same time move twice the bytes per second). batch_copy spreads the
// pairs round-robin over `streams` streams per GPU, orders them after the
// work already queued on each GPU's current stream, and waits for all.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "genesis/storage/storage.h"

namespace genesis {

class BatchStorage {
 public:
  /// `streams`: how many streams per GPU the copies are spread over
  /// (1..64). Throws InvalidArgumentError for a null storage or a bad count.
  explicit BatchStorage(std::vector<Storage> storages, int streams = 4);
  ~BatchStorage();
  BatchStorage(BatchStorage&&) noexcept;
  BatchStorage& operator=(BatchStorage&&) noexcept;

  const std::vector<Storage>& storages() const noexcept { return storages_; }
  std::size_t size() const noexcept { return storages_.size(); }

  /// Copies storages()[i] into targets[i] for every i (any devices; same
  /// dtype and byte size per pair) and returns when every copy is done.
  /// Pairs that touch pageable host memory are issued from worker threads so
  /// that they overlap too. Throws InvalidArgumentError for a count, dtype or
  /// size mismatch (before anything is copied).
  void batch_copy(std::vector<Storage>& targets);

  /// New storages on `device`, filled by batch_copy.
  std::vector<Storage> to(Device device);

 private:
  struct Streams;
  std::vector<Storage> storages_;
  int streams_per_device_;
  std::unique_ptr<Streams> streams_;
};

}  // namespace genesis
