// Tensor creation (empty, zeros, ones, full, arange, rand, from data) and the
// random generator's seed.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "genesis/storage/storage.h"
#include "genesis/storage/storage_view.h"
#include "genesis/tensor/tensor.h"

namespace genesis {

/// Uninitialised memory from the device's caching allocator. All creation
/// functions throw InvalidArgumentError for a negative size or a CUDA device
/// that does not exist, and OutOfMemoryError.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions options = {});
/// full() whose dtype follows the value (bool, int64 or float32) unless given.
Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype, Device device);

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

/// [start, end) by step (torch.arange): the dtype is int64 when start, end
/// and step are all integers, float32 otherwise, unless `dtype` is given.
/// Throws InvalidArgumentError for step 0 or a step of the wrong sign.
Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt, Device device = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt,
              Device device = {});

/// Uniform [0, 1), standard normal, and uniform integers in [low, high)
/// (randint's default dtype is int64). The same numbers on every device for
/// a seed (Note [Random numbers] in tensor/philox.h).
Tensor rand(const Shape& shape, TensorOptions options = {});
Tensor randn(const Shape& shape, TensorOptions options = {});
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape,
               TensorOptions options = TensorOptions(DType::kInt64));

/// Seeds the generators of every device and rewinds their counters
/// (torch.manual_seed). The initial seed is 67280421310721 (PyTorch's
/// default), so a program that never seeds is still reproducible.
void manual_seed(std::uint64_t seed);
/// The current seed.
std::uint64_t initial_seed();

/// A tensor over a StorageView's elements (zero copy: the tensor shares the view's storage).
Tensor from_storage_view(const StorageView& view);

/// A tensor of `shape` holding `count` values of `src_dtype` read from host
/// memory, converted to `dtype` (default: src_dtype), on `device`.
Tensor from_blob_copy(const void* data, DType src_dtype, const Shape& shape,
                      std::optional<DType> dtype = std::nullopt, Device device = {});

namespace detail {
[[noreturn]] void throw_ragged(std::int64_t expected, std::size_t got);
/// InvalidArgumentError unless `count` values fill `shape`.
void check_count(std::size_t count, const Shape& shape);

template <typename T>
constexpr DType inferred_dtype() {
  // torch.tensor's inference: Python floats -> float32, ints -> int64.
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  else if constexpr (std::is_floating_point_v<T>) return DType::kFloat32;
  else if constexpr (std::is_integral_v<T>) return DType::kInt64;
  else return dtype_of<T>();
}
template <typename T>
using tensor_source_t = std::conditional_t<std::is_same_v<T, bool>, bool,
                        std::conditional_t<std::is_floating_point_v<T>, double,
                        std::conditional_t<std::is_integral_v<T>, std::int64_t, T>>>;
template <typename T>
Tensor tensor_from(const std::vector<T>& flat, const Shape& shape, std::optional<DType> dtype, Device device) {
  check_count(flat.size(), shape);
  using S = tensor_source_t<T>;
  std::vector<S> converted(flat.begin(), flat.end());
  if constexpr (std::is_same_v<S, bool>) {
    std::vector<std::uint8_t> bytes(converted.begin(), converted.end());
    return from_blob_copy(bytes.data(), DType::kBool, shape, dtype.value_or(DType::kBool), device);
  } else {
    return from_blob_copy(converted.data(), dtype_of<S>(), shape, dtype.value_or(inferred_dtype<T>()), device);
  }
}
}  // namespace detail

/// genesis.tensor(data): a 0-d tensor from a value, a 1-d/2-d/3-d tensor from
/// nested braces (rows of one length; InvalidArgumentError otherwise).
/// Floating values default to float32, integers to int64, bools to bool.
template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
Tensor tensor(T value, std::optional<DType> dtype = std::nullopt, Device device = {}) {
  return detail::tensor_from(std::vector<T>{value}, Shape{}, dtype, device);
}
template <typename T>
Tensor tensor(std::initializer_list<T> data, std::optional<DType> dtype = std::nullopt, Device device = {}) {
  return detail::tensor_from(std::vector<T>(data), Shape{static_cast<std::int64_t>(data.size())}, dtype, device);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> data, std::optional<DType> dtype = std::nullopt,
              Device device = {}) {
  std::vector<T> flat;
  const std::int64_t cols = data.size() ? static_cast<std::int64_t>(data.begin()->size()) : 0;
  for (const auto& row : data) {
    if (static_cast<std::int64_t>(row.size()) != cols) detail::throw_ragged(cols, row.size());
    flat.insert(flat.end(), row.begin(), row.end());
  }
  return detail::tensor_from(flat, Shape{static_cast<std::int64_t>(data.size()), cols}, dtype, device);
}
template <typename T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> data,
              std::optional<DType> dtype = std::nullopt, Device device = {}) {
  std::vector<T> flat;
  const std::int64_t rows = data.size() ? static_cast<std::int64_t>(data.begin()->size()) : 0;
  const std::int64_t cols = rows ? static_cast<std::int64_t>(data.begin()->begin()->size()) : 0;
  for (const auto& plane : data) {
    if (static_cast<std::int64_t>(plane.size()) != rows) detail::throw_ragged(rows, plane.size());
    for (const auto& row : plane) {
      if (static_cast<std::int64_t>(row.size()) != cols) detail::throw_ragged(cols, row.size());
      flat.insert(flat.end(), row.begin(), row.end());
    }
  }
  return detail::tensor_from(flat, Shape{static_cast<std::int64_t>(data.size()), rows, cols}, dtype, device);
}
/// A tensor of `shape` from row-major values.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, std::optional<DType> dtype = std::nullopt,
              Device device = {}) {
  return detail::tensor_from(values, shape, dtype, device);
}

}  // namespace genesis
