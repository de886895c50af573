// Running long tensor operations without the GIL.
//
// Note [GIL release]: a large element-wise operation, reduction, copy or
// fill takes milliseconds to seconds; holding the GIL all that time stops
// every other Python thread (a data loader thread, a progress bar, a server
// loop). So the bindings run operations on at least kNoGilElements elements
// with the GIL released, the threshold from which the CPU backend splits
// work over threads too (below it, releasing and re-taking the GIL would
// cost more than it frees). While released, the code touches no Python
// object:
//   * arguments are converted first, with the GIL; tensors are copied into
//     local handles (a refcount), so another thread rebinding a Python
//     tensor cannot pull the memory from under the operation;
//   * the allocation site (py_location.h) is taken before, with the GIL;
//   * results are wrapped into Python objects after, with the GIL;
//   * a storage whose deleter holds a Python object (from_numpy, DLPack)
//     takes the GIL itself in that deleter, so dropping a reference inside
//     is safe.
// Locals the released region uses are declared before it, so they are
// destroyed after the GIL is back.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include <pybind11/pybind11.h>

#include "genesis/tensor/tensor.h"

namespace genesis::python {

namespace py = pybind11;

/// Elements from which an operation runs without the GIL (the CPU backend's
/// parallel grain, kernels::cpu::kParallelGrain).
inline constexpr std::int64_t kNoGilElements = std::int64_t{1} << 15;

/// Runs fn() without the GIL when `elements` >= kNoGilElements, else with
/// it; returns what fn returns. fn must follow Note [GIL release].
template <typename Fn>
decltype(auto) without_gil_if_large(std::int64_t elements, Fn&& fn) {
  std::optional<py::gil_scoped_release> release;
  if (elements >= kNoGilElements) release.emplace();
  return std::forward<Fn>(fn)();
}

/// Elements of a tensor, 0 for an undefined one (the operation then raises
/// its own error, with the GIL).
inline std::int64_t elements(const Tensor& t) { return t.defined() ? t.numel() : 0; }

/// The element count of the broadcast of two shapes: 0 when they do not
/// broadcast (the operation will raise), saturating instead of overflowing.
inline std::int64_t broadcast_elements(const Shape& a, const Shape& b) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  std::int64_t count = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return 0;
    const std::int64_t d = x > y ? x : y;
    if (d == 0) return 0;
    count = count > kMax / d ? kMax : count * d;
  }
  return count;
}

/// Elements of a tensor of `shape`: 0 for a negative size (creation raises),
/// saturating instead of overflowing.
inline std::int64_t shape_elements(const Shape& shape) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t count = 1;
  for (const std::int64_t d : shape) {
    if (d <= 0) return 0;
    count = count > kMax / d ? kMax : count * d;
  }
  return count;
}

/// Elements an element-wise operation of `a` and `b` produces (at least the
/// larger operand's).
inline std::int64_t operation_elements(const TensorOrScalar& a, const TensorOrScalar& b) {
  const std::int64_t na = a.is_scalar() ? 1 : elements(a.tensor());
  const std::int64_t nb = b.is_scalar() ? 1 : elements(b.tensor());
  std::int64_t n = na > nb ? na : nb;
  if (!a.is_scalar() && !b.is_scalar() && na > 0 && nb > 0) {
    const std::int64_t both = broadcast_elements(a.tensor().shape(), b.tensor().shape());
    if (both > n) n = both;
  }
  return n;
}

}  // namespace genesis::python
