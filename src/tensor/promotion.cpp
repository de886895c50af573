// Type promotion and broadcasting (Note [Type promotion]).
#include "genesis/tensor/promotion.h"

#include <algorithm>

#include "genesis/core/error.h"
#include "tensor_internal.h"

namespace genesis {
namespace {

int category(DType t) {
  switch (dtype_kind(t)) {
    case DTypeKind::kBool: return 0;
    case DTypeKind::kUnsigned:
    case DTypeKind::kSigned: return 1;
    case DTypeKind::kFloat: return 2;
  }
  return 0;
}

// PyTorch's combine_categories(higher, lower): the lower-priority dtype only
// counts when its category is above the higher-priority one's.
DType combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower.value_or(DType::kFloat32);
  if (!lower) return *higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return *higher;
}

void fold(std::optional<DType>& state, DType t) { state = state ? promote_types(*state, t) : t; }

}  // namespace

DType promote_types(DType a, DType b) noexcept {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if ((a == DType::kFloat16 && b == DType::kBFloat16) || (a == DType::kBFloat16 && b == DType::kFloat16)) {
      return DType::kFloat32;
    }
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  // Both integers. uint8 with a signed type needs the next wider signed type.
  if (a == DType::kUInt8 || b == DType::kUInt8) {
    const DType other = a == DType::kUInt8 ? b : a;
    return other == DType::kInt8 ? DType::kInt16 : other;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType result_type(const std::vector<TensorOrScalar>& operands) {
  std::optional<DType> dim_result, zero_result, scalar_result;
  for (const auto& op : operands) {
    if (op.is_scalar()) {
      fold(scalar_result, op.scalar().default_dtype());
    } else {
      detail::check_defined(op.tensor(), "result_type");
      fold(op.tensor().dim() > 0 ? dim_result : zero_result, op.tensor().dtype());
    }
  }
  if (!dim_result && !zero_result) return scalar_result.value_or(DType::kFloat32);
  if (!dim_result) return combine(zero_result, scalar_result);
  return combine(dim_result, zero_result ? std::optional<DType>(combine(zero_result, scalar_result)) : scalar_result);
}

DType result_type(const TensorOrScalar& a, const TensorOrScalar& b) { return result_type(std::vector<TensorOrScalar>{a, b}); }

bool can_cast(DType from, DType to) noexcept { return category(from) <= category(to); }

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    GENESIS_CHECK(x == y || x == 1 || y == 1, "shapes ", detail::shape_str(a), " and ", detail::shape_str(b),
                  " cannot be broadcast together (dimension ", i, ": ", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace genesis
