// Scalar: one number of kind bool, integer or floating, as passed to
// operations (`x + 2.5`, fill values, index assignment).
//
// A Scalar is "weak" in type promotion (Note [Type promotion] in
// tensor/promotion.h): like a Python number it only contributes its kind,
// never its width, so `int8_tensor + 1` stays int8 and `float16_tensor + 2.5`
// stays float16.
#pragma once

#include <cstdint>
#include <type_traits>

#include "genesis/core/dtype.h"
#include "genesis/core/half.h"

namespace genesis {

/// A bool, an int64 or a double. Trivially copyable, usable from device code
/// (kernels take it by value).
class Scalar {
 public:
  enum class Kind : std::uint8_t { kBool, kInt, kFloat };

  GENESIS_HOST_DEVICE constexpr Scalar() noexcept : kind_(Kind::kInt), i_(0) {}
  GENESIS_HOST_DEVICE constexpr Scalar(bool b) noexcept : kind_(Kind::kBool), i_(b ? 1 : 0) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  GENESIS_HOST_DEVICE constexpr Scalar(T v) noexcept : kind_(Kind::kInt), i_(static_cast<std::int64_t>(v)) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  GENESIS_HOST_DEVICE constexpr Scalar(T v) noexcept : kind_(Kind::kFloat), d_(static_cast<double>(v)) {}
  GENESIS_HOST_DEVICE constexpr Scalar(Half v) noexcept : kind_(Kind::kFloat), d_(static_cast<double>(static_cast<float>(v))) {}
  GENESIS_HOST_DEVICE constexpr Scalar(BFloat16 v) noexcept
      : kind_(Kind::kFloat), d_(static_cast<double>(static_cast<float>(v))) {}

  GENESIS_HOST_DEVICE constexpr Kind kind() const noexcept { return kind_; }
  GENESIS_HOST_DEVICE constexpr bool is_bool() const noexcept { return kind_ == Kind::kBool; }
  GENESIS_HOST_DEVICE constexpr bool is_integral() const noexcept { return kind_ == Kind::kInt; }
  GENESIS_HOST_DEVICE constexpr bool is_floating() const noexcept { return kind_ == Kind::kFloat; }

  /// The value as double (exact for bool, rounds int64 beyond 2^53).
  GENESIS_HOST_DEVICE constexpr double to_double() const noexcept {
    return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_);
  }
  /// The value as int64; a floating value is truncated toward zero (the
  /// caller checks the range where it matters).
  GENESIS_HOST_DEVICE constexpr std::int64_t to_int64() const noexcept {
    return kind_ == Kind::kFloat ? static_cast<std::int64_t>(d_) : i_;
  }
  GENESIS_HOST_DEVICE constexpr bool to_bool() const noexcept {
    return kind_ == Kind::kFloat ? d_ != 0.0 || d_ != d_ : i_ != 0;
  }

  /// The dtype a Scalar has on its own: bool, int64 or float32 (PyTorch's
  /// default dtype for Python floats).
  constexpr DType default_dtype() const noexcept {
    return kind_ == Kind::kBool ? DType::kBool : kind_ == Kind::kInt ? DType::kInt64 : DType::kFloat32;
  }

 private:
  Kind kind_;
  union {
    std::int64_t i_;
    double d_;
  };
};

/// Whether `value` converts to `dtype` without overflow: any value for bool
/// (nonzero is true) and the floating dtypes (out of range is inf); for an
/// integer dtype, an integer within its range or a finite float whose
/// truncation toward zero is.
bool fits_in(Scalar value, DType dtype) noexcept;
/// InvalidArgumentError unless fits_in(value, dtype): "value 1099511627776
/// cannot be converted to int32 without overflow". What fills and
/// assignments check, so that a value out of range fails instead of wrapping.
void check_fits(Scalar value, DType dtype);

}  // namespace genesis
