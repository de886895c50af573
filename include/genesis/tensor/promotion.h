// Type promotion and broadcasting (NumPy / PyTorch rules).
//
// Note [Type promotion]: the result dtype of an operation follows PyTorch's
// torch.result_type. Dtypes are ordered in categories bool < integer <
// floating. Operands come in three priorities: tensors with at least one
// dimension, 0-d tensors, and Scalars ("weak", like Python numbers). The
// highest-priority group decides the dtype; a lower group only matters when
// its category is higher, and then it contributes its own dtype (0-d tensor)
// or the category's default (Scalar: int64, float32):
//   int8 tensor + int64 0-d tensor -> int8;  int8 tensor + 2.5 -> float32;
//   float16 tensor + 2.5 -> float16;  bool tensor + 1 -> int64;
//   uint8 + int8 -> int16;  float16 + bfloat16 -> float32.
#pragma once

#include <vector>

#include "genesis/core/dtype.h"
#include "genesis/tensor/tensor.h"

namespace genesis {

/// torch.promote_types: the smallest dtype both can be converted to without
/// losing their category (uint8 + int8 -> int16, int64 + float16 -> float16).
DType promote_types(DType a, DType b) noexcept;

/// torch.result_type over tensors and Scalars (Note [Type promotion]).
DType result_type(const std::vector<TensorOrScalar>& operands);
DType result_type(const TensorOrScalar& a, const TensorOrScalar& b);

/// torch.can_cast: false when `from`'s category is above `to`'s (float into
/// an integer, integer or float into bool). In-place and out= results obey it.
bool can_cast(DType from, DType to) noexcept;

/// The broadcast of two shapes (NumPy rule: align right, sizes equal or 1).
/// Throws InvalidArgumentError naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace genesis
