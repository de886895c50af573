// Tensor: sizes, strides and an offset over a Storage.
//
// Note [Tensor handles]: a Tensor is a refcounted handle to a TensorImpl
// {storage, shape, strides, offset, dtype}. Copying a Tensor shares the
// TensorImpl (like a Python reference): an in-place operation through one
// copy is seen through every copy. Views (view, transpose, slicing, ...) are
// new TensorImpls over the same Storage, so they see each other's writes and
// keep the memory alive. Strides and the offset count elements of the dtype;
// strides may be 0 (expand) or negative (NumPy slices with negative steps).
//
// Every operation runs on the tensor's device through that device's kernel
// table (Note [Kernel tables] in tensor/backend.h); on CUDA the work is
// queued on the current stream and nothing synchronises, except where the
// size of a result depends on the data (boolean masks, nonzero) or a value
// goes to the host (item(), printing, tolist()).
//
// Thread safety: like a std::shared_ptr. Concurrent reads of tensors are
// safe; writing the same elements from two threads is a data race.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/storage.h"
#include "genesis/tensor/scalar.h"

namespace genesis {

using Shape = std::vector<std::int64_t>;

class Tensor;
class IndexItem;

/// dtype and device of a new tensor: `zeros({2, 3}, DType::kInt32)`,
/// `rand({4}, cuda::parse_device("cuda"))`, `ones({2}, {DType::kFloat16, dev})`.
struct TensorOptions {
  DType dtype = DType::kFloat32;
  Device device{};
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}                   // NOLINT: implicit on purpose
  TensorOptions(Device dev) : device(dev) {}             // NOLINT
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

/// One dimension or several: `x.sum(1)`, `x.sum({0, 2})`. Negative dims
/// count from the end.
class DimList {
 public:
  DimList(std::int64_t d) : dims_{d} {}  // NOLINT
  DimList(int d) : dims_{d} {}           // NOLINT
  DimList(std::initializer_list<std::int64_t> d) : dims_(d) {}
  DimList(std::vector<std::int64_t> d) : dims_(std::move(d)) {}  // NOLINT
  const std::vector<std::int64_t>& dims() const noexcept { return dims_; }

 private:
  std::vector<std::int64_t> dims_;
};

/// max(dim) / min(dim): `auto [values, indices] = x.max(1);`
struct ValuesIndices;

/// A Tensor or a Scalar: the operand type of element-wise operations, so that
/// `add(x, 2)`, `add(2, x)` and `add(x, y)` are one function.
class TensorOrScalar;

namespace detail {
/// The refcounted state behind a Tensor (Note [Tensor handles]).
/// Invariants: shape.size() == strides.size() <= kernels::kMaxDims;
/// numel == prod(shape); every element offset + sum_d i_d * strides[d] lies
/// in [0, storage.numel()) when numel > 0.
struct TensorImpl {
  Storage storage;
  Shape shape;
  Shape strides;
  std::int64_t offset = 0;
  DType dtype = DType::kFloat32;
};
}  // namespace detail

class Tensor {
 public:
  /// An undefined tensor (defined() is false); every other call throws.
  Tensor() = default;
  /// A tensor over `storage` (whose dtype it takes) with the given layout.
  /// Throws InvalidArgumentError when an element would fall outside the
  /// storage or shape and strides differ in length.
  Tensor(Storage storage, Shape shape, Shape strides, std::int64_t offset);

  // --------------------------------------------------------- metadata ---
  bool defined() const noexcept { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& sizes() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  /// Size / stride of one dimension; negative `dim` counts from the end.
  /// Throws IndexError for a dimension out of range.
  std::int64_t size(std::int64_t dim) const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return static_cast<std::int64_t>(impl().shape.size()); }
  std::int64_t ndim() const { return dim(); }
  std::int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage.device(); }
  std::int64_t storage_offset() const { return impl().offset; }
  const Storage& storage() const { return impl().storage; }
  std::size_t element_size() const { return dtype_size(dtype()); }
  /// numel x element_size.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  /// Address of element [0, ..., 0] (device memory for CUDA tensors).
  void* data_ptr() const;
  /// The same, typed; TypeMismatchError unless T is the dtype's C++ type.
  template <typename T>
  T* data_ptr() const {
    check_data_type(detail::dtype_of<T>());
    return static_cast<T*>(data_ptr());
  }
  /// Row-major contiguous (dims of size 1 may have any stride).
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  /// True over read-only memory (a read-only NumPy array, a DLPack tensor
  /// flagged read-only): every write fails (Note [Read-only memory] in
  /// storage/storage.h).
  bool is_read_only() const { return impl().storage.is_read_only(); }
  /// True when both are handles to the same TensorImpl.
  bool is_same(const Tensor& o) const noexcept { return impl_ == o.impl_; }

  // ---------------------------------------------- conversion and copies ---
  /// The same data on `device` and/or as `dtype`; *this (shared) when
  /// nothing changes. Copies across devices go through storage/copy.h.
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  Tensor cpu() const { return to(Device{}); }
  /// A contiguous tensor with the same values (*this if already contiguous).
  Tensor contiguous() const;
  /// A new contiguous tensor with a copy of the data.
  Tensor clone() const;
  /// Copies `src` (broadcast to this shape, any dtype, any device) into this
  /// tensor's elements. Returns *this.
  Tensor& copy_(const Tensor& src);
  /// The value of a one-element tensor (synchronises a CUDA stream).
  /// Throws InvalidArgumentError when numel() != 1.
  Scalar item() const;
  template <typename T>
  T item() const;
  /// All elements in row-major order as T (converted per Note [Cast
  /// semantics]); copies to the host.
  template <typename T>
  std::vector<T> tolist() const;

  /// PyTorch's repr: `tensor([[1., 2.],\n        [3., 4.]])` with dtype and
  /// device suffixes and "..." summaries beyond 1000 elements.
  std::string str() const;

  // ------------------------------------------------------ element-wise ---
  Tensor add(const TensorOrScalar& o) const;
  Tensor sub(const TensorOrScalar& o) const;
  Tensor mul(const TensorOrScalar& o) const;
  Tensor div(const TensorOrScalar& o) const;
  Tensor pow(const TensorOrScalar& exponent) const;
  Tensor eq(const TensorOrScalar& o) const;
  Tensor ne(const TensorOrScalar& o) const;
  Tensor lt(const TensorOrScalar& o) const;
  Tensor le(const TensorOrScalar& o) const;
  Tensor gt(const TensorOrScalar& o) const;
  Tensor ge(const TensorOrScalar& o) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  /// In-place forms: the result is cast to this tensor's dtype, which must
  /// be able to hold it (no float result into an int tensor, no int into
  /// bool: TypeMismatchError, as PyTorch). The other operand broadcasts to
  /// this shape, never the other way round.
  Tensor& add_(const TensorOrScalar& o);
  Tensor& sub_(const TensorOrScalar& o);
  Tensor& mul_(const TensorOrScalar& o);
  Tensor& div_(const TensorOrScalar& o);
  Tensor& pow_(const TensorOrScalar& exponent);
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& relu_();
  Tensor& fill_(Scalar value);
  Tensor& zero_() { return fill_(Scalar(0)); }

  Tensor& operator+=(const TensorOrScalar& o);
  Tensor& operator-=(const TensorOrScalar& o);
  Tensor& operator*=(const TensorOrScalar& o);
  Tensor& operator/=(const TensorOrScalar& o);

  // -------------------------------------------------------- reductions ---
  /// Sum over every element, or over `dims` (keepdim keeps them as size 1).
  /// bool and integer inputs sum to int64 unless `dtype` says otherwise.
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(const DimList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(const DimList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  /// Floating inputs only (InvalidArgumentError otherwise, like PyTorch),
  /// unless `dtype` names a floating dtype to compute in.
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(const DimList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  /// Max / min of every element (0-d); errors on an empty tensor.
  Tensor max() const;
  Tensor min() const;
  /// Values and (first) indices along one dimension.
  ValuesIndices max(std::int64_t dim, bool keepdim = false) const;
  ValuesIndices min(std::int64_t dim, bool keepdim = false) const;
  /// Max / min over several dims (torch.amax / amin).
  Tensor amax(const DimList& dims, bool keepdim = false) const;
  Tensor amin(const DimList& dims, bool keepdim = false) const;
  /// Index of the max / min of the flattened tensor, or along `dim`.
  Tensor argmax(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<std::int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor any() const;
  Tensor all() const;
  /// Along `dims` (bool results).
  Tensor any(const DimList& dims, bool keepdim = false) const;
  Tensor all(const DimList& dims, bool keepdim = false) const;

  Tensor matmul(const Tensor& other) const;

  // ------------------------------------------------- shape (views) ------
  /// A view with a new shape (one -1 is inferred). Throws InvalidArgumentError
  /// naming shape and strides when the layout cannot be viewed that way (use
  /// reshape, which copies then).
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(std::int64_t dim0, std::int64_t dim1) const;
  Tensor permute(const Shape& dims) const;
  /// All dimensions reversed (PyTorch's .T).
  Tensor T() const;
  /// Dims start..end merged into one (a view when possible).
  Tensor flatten(std::int64_t start_dim = 0, std::int64_t end_dim = -1) const;
  Tensor squeeze() const;
  Tensor squeeze(std::int64_t dim) const;
  Tensor unsqueeze(std::int64_t dim) const;
  /// Broadcast view (stride 0); -1 keeps a size. Throws InvalidArgumentError
  /// when a non-1 dimension would change.
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  /// The view x[..., start:stop:step, ...] along `dim` (NumPy slice rules,
  /// negative steps included).
  Tensor slice(std::int64_t dim, std::optional<std::int64_t> start, std::optional<std::int64_t> stop,
               std::int64_t step = 1) const;
  /// x[..., index, ...] along `dim` (a view, the dim removed). IndexError
  /// out of range.
  Tensor select(std::int64_t dim, std::int64_t index) const;
  Tensor narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  std::vector<Tensor> split(std::int64_t split_size, std::int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<std::int64_t>& sizes, std::int64_t dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, std::int64_t dim = 0) const;

  // ---------------------------------------------------------- indexing ---
  /// NumPy indexing (tensor/index.h): `x[{0, Slice(1, None), Ellipsis}]`.
  Tensor operator[](const std::vector<IndexItem>& items) const;
  /// x[i] (a template so that braced lists `x[{}]`, `x[{true}]` always mean
  /// index lists).
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Tensor operator[](I i) const {
    return select(0, static_cast<std::int64_t>(i));
  }
  /// x[index_tensor] (also a template, for the same reason).
  template <typename T, std::enable_if_t<std::is_same_v<T, Tensor>, int> = 0>
  Tensor operator[](const T& index) const {
    return index_with_tensor(index);
  }
  /// x[items] = value.
  Tensor& index_put_(const std::vector<IndexItem>& items, const Tensor& value, bool accumulate = false);
  Tensor& index_put_(const std::vector<IndexItem>& items, Scalar value, bool accumulate = false);

  // ---------------------------------------------------------- internals ---
  Tensor index_with_tensor(const Tensor& index) const;
  void check_data_type(DType requested) const;
  const detail::TensorImpl& impl() const;
  detail::TensorImpl& mutable_impl();

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

struct ValuesIndices {
  Tensor values;
  Tensor indices;
};

class TensorOrScalar {
 public:
  TensorOrScalar(const Tensor& t) : tensor_(t) {}  // NOLINT: implicit on purpose
  TensorOrScalar(Scalar s) : scalar_(s), is_scalar_(true) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  TensorOrScalar(T v) : scalar_(v), is_scalar_(true) {}  // NOLINT
  bool is_scalar() const noexcept { return is_scalar_; }
  const Tensor& tensor() const noexcept { return tensor_; }
  Scalar scalar() const noexcept { return scalar_; }

 private:
  Tensor tensor_;
  Scalar scalar_{};
  bool is_scalar_ = false;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace genesis
