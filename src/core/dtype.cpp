#include "genesis/core/dtype.h"

#include <string>

#include "genesis/core/error.h"

namespace genesis {

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "unknown";
}

DType dtype_from_name(std::string_view name) {
  std::string_view n = name;
  if (n.substr(0, 8) == "genesis.") n.remove_prefix(8);
  if (n.substr(0, 6) == "torch.") n.remove_prefix(6);
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    if (dtype_name(t) == n) return t;
  }
  struct Alias { std::string_view alias; DType type; };
  static constexpr Alias aliases[] = {
      {"float", DType::kFloat32},   {"fp32", DType::kFloat32},    {"f4", DType::kFloat32},
      {"double", DType::kFloat64},  {"fp64", DType::kFloat64},    {"f8", DType::kFloat64},
      {"half", DType::kFloat16},    {"fp16", DType::kFloat16},    {"f2", DType::kFloat16},
      {"bf16", DType::kBFloat16},   {"int", DType::kInt32},       {"i4", DType::kInt32},
      {"long", DType::kInt64},      {"i8", DType::kInt64},        {"short", DType::kInt16},
      {"i2", DType::kInt16},        {"byte", DType::kUInt8},      {"u1", DType::kUInt8},
      {"char", DType::kInt8},       {"i1", DType::kInt8},         {"bool_", DType::kBool},
  };
  for (const auto& a : aliases)
    if (a.alias == n) return a.type;
  GENESIS_CHECK(false, "unknown dtype '", std::string(name),
                "': expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64");
  return DType::kFloat32;  // unreachable
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << "genesis." << dtype_name(t); }

}  // namespace genesis
