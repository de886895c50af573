// DType: element types of storages and tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

namespace genesis {

/// Element types. The order is stable: bindings and files store the value.
enum class DType : std::uint8_t {
  kBool = 0,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

/// What family a dtype belongs to; drives type promotion later.
enum class DTypeKind : std::uint8_t { kBool, kUnsigned, kSigned, kFloat };

inline constexpr int kNumDTypes = 10;

/// Whether `t` is one of the enumerators (a DType read from raw memory or
/// cast from an integer may not be).
constexpr bool is_valid_dtype(DType t) noexcept {
  return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes);
}

/// Size of one element in bytes.
constexpr std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::kBool: case DType::kUInt8: case DType::kInt8: return 1;
    case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt32: case DType::kFloat32: return 4;
    case DType::kInt64: case DType::kFloat64: return 8;
  }
  return 0;
}

constexpr DTypeKind dtype_kind(DType t) noexcept {
  switch (t) {
    case DType::kBool: return DTypeKind::kBool;
    case DType::kUInt8: return DTypeKind::kUnsigned;
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64: return DTypeKind::kSigned;
    case DType::kFloat16: case DType::kBFloat16: case DType::kFloat32: case DType::kFloat64: return DTypeKind::kFloat;
  }
  return DTypeKind::kBool;
}

constexpr bool is_floating(DType t) noexcept { return dtype_kind(t) == DTypeKind::kFloat; }

/// Canonical name as PyTorch spells it: "float32", "bfloat16", "bool", ...
std::string_view dtype_name(DType t) noexcept;

/// Parses a name; accepts the canonical names and the usual aliases
/// ("float", "double", "half", "int", "long", "uint8", "bf16", "fp16", ...).
/// Throws InvalidArgumentError naming the accepted names otherwise.
DType dtype_from_name(std::string_view name);

std::ostream& operator<<(std::ostream& os, DType t);

}  // namespace genesis
