// Shape operations over several tensors or shapes: stack, cat, broadcasting,
// and the size and stride rules of views.
#pragma once

#include <vector>

#include "genesis/tensor/tensor.h"

namespace genesis {

/// Joins tensors of one shape along a new dimension `dim` (0..ndim).
/// Dtypes promote; all on one device. InvalidArgumentError for an empty list
/// or differing shapes (naming the first mismatch).
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// Joins tensors along an existing dimension; the other sizes must match.
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
/// The broadcast of `t` to `shape` (a view).
Tensor broadcast_to(const Tensor& t, const Shape& shape);
/// Tensors broadcast to their common shape (views).
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors);

/// Shape with one -1 replaced so that numel matches; InvalidArgumentError
/// when impossible (names the shape and numel).
Shape infer_size(const Shape& shape, std::int64_t numel);
/// Strides for viewing (shape, strides) as `new_shape` without a copy, or
/// nullopt when impossible (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape);

}  // namespace genesis
