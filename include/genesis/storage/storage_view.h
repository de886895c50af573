// StorageView: a zero-copy strided window on a Storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/storage/storage.h"

namespace genesis {

/// Elements of `base` at base.data + (offset + sum_i index_i * stride_i) *
/// itemsize, for index in shape. Offset and strides count elements of the
/// base's dtype (as in PyTorch); strides may be zero (broadcast) or negative.
/// The view holds a strong reference: the base lives at least as long.
class StorageView {
 public:
  /// Throws InvalidArgumentError for a null base, shape and stride of
  /// different lengths, a negative dimension or offset, or any element that
  /// would fall outside the base (the message names the extent).
  StorageView(Storage base, std::int64_t offset, std::vector<std::int64_t> shape, std::vector<std::int64_t> stride);
  /// The whole base, contiguous.
  explicit StorageView(Storage base);

  const Storage& base() const noexcept { return base_; }
  std::int64_t offset() const noexcept { return offset_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  const std::vector<std::int64_t>& stride() const noexcept { return stride_; }
  DType dtype() const { return base_.dtype(); }
  Device device() const { return base_.device(); }
  std::int64_t numel() const noexcept { return numel_; }
  /// numel x itemsize: the bytes the view's elements occupy if packed.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * base_.itemsize(); }
  /// base.data_ptr() + offset x itemsize.
  void* data_ptr() const;
  /// Row-major contiguous: strides equal the packed strides of the shape
  /// (dimensions of size 1 may have any stride; an empty view is contiguous).
  bool is_contiguous() const noexcept;

 private:
  Storage base_;
  std::int64_t offset_ = 0;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> stride_;
  std::int64_t numel_ = 0;
};

/// Row-major packed strides of `shape` (in elements).
std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape);

}  // namespace genesis
