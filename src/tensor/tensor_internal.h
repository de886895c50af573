// Helpers shared by the tensor layer's sources (not public API).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/backend.h"
#include "genesis/tensor/tensor.h"

namespace genesis::detail {

/// Kernel context of a tensor's device on its current stream.
inline kernels::KernelContext kernel_ctx(Device device) { return kernels::KernelContext{device, kCurrentStream}; }

/// The entry `member` of `device`'s kernel table, or InvalidArgumentError
/// "<name> is not available on cuda yet" (Note [Kernel tables]).
template <typename Fn>
Fn kernel_entry(Device device, Fn kernels::KernelTable::*member, const char* name) {
  const Fn fn = kernels::kernels_for(device.type()).*member;
  if (GENESIS_UNLIKELY(fn == nullptr)) {
    GENESIS_THROW(InvalidArgumentError, name, " is not available on ",
                  device.is_cuda() ? "cuda" : "cpu", " yet (no kernel registered for ", device.str(), ")");
  }
  return fn;
}

/// The operand of `t` with its own shape.
kernels::StridedOperand operand(const Tensor& t);
/// The operand of `t` broadcast to `shape` (stride 0 on new or size-1 dims).
kernels::StridedOperand operand(const Tensor& t, const Shape& shape);
/// A broadcast constant operand of `shape` (is_scalar) in `dtype`.
kernels::StridedOperand scalar_operand(Scalar s, DType dtype, const Shape& shape);

/// `dim` in [-ndim, ndim) -> [0, ndim); IndexError otherwise. For ndim 0,
/// -1 and 0 are accepted (as PyTorch, which treats a scalar as 1-d here)
/// when `scalar_ok`.
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, bool scalar_ok = true);

/// Number of elements of a shape; InvalidArgumentError for a negative size.
std::int64_t shape_numel(const Shape& shape);

/// "[2, 3]".
std::string shape_str(const Shape& shape);

/// True when the two tensors' elements may share memory.
bool may_overlap(const Tensor& a, const Tensor& b);
/// True when a and b are exactly the same elements (same storage, offset,
/// shape and strides).
bool same_elements(const Tensor& a, const Tensor& b);

/// InvalidArgumentError when several elements of `t` share one memory
/// location (an expanded tensor): writing it would race and depend on order.
void check_no_internal_overlap(const Tensor& t, const char* what);

/// InvalidArgumentError naming `what` when `t` is over read-only memory
/// (Note [Read-only memory]); every operation that writes into an existing
/// tensor calls it first.
void check_writable(const Tensor& t, const char* what);

/// Checks that `t` is defined (InvalidArgumentError naming `what`).
void check_defined(const Tensor& t, const char* what);

/// For dst.copy_(src) across devices (Note [Cross-device copies]): either
/// copies src straight into dst and returns an undefined tensor, or returns
/// src's data on dst's device for a same-device copy kernel to finish.
Tensor bring_to_device(const Tensor& src, Tensor& dst);

/// A new tensor over `t`'s storage with another layout (a view).
Tensor make_view(const Tensor& t, Shape shape, Shape strides, std::int64_t offset);

/// The integers every value of [first, second] of which `dtype` holds
/// exactly: its range for integer dtypes, +-2^digits for floating ones
/// (2^11 for float16, 2^24 for float32, ...), [0, 1] for bool.
std::pair<std::int64_t, std::int64_t> exact_integer_range(DType dtype) noexcept;

}  // namespace genesis::detail
