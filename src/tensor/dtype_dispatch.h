// Dtype dispatch shared by the CPU and CUDA kernels: from a runtime DType (or
// an element size) to a compile-time element type. Host code only; the CUDA
// kernels include it through cuda_common.cuh, the CPU ones through
// cpu_loops.h. Both backends live in namespaces nested in genesis::kernels,
// so these names need no qualification there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "genesis/core/dtype.h"
#include "genesis/core/half.h"

namespace genesis::kernels {

template <typename T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) with the C++ element type of `t`.
template <typename F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kBool: return f(TypeTag<bool>{});
    case DType::kUInt8: return f(TypeTag<std::uint8_t>{});
    case DType::kInt8: return f(TypeTag<std::int8_t>{});
    case DType::kInt16: return f(TypeTag<std::int16_t>{});
    case DType::kInt32: return f(TypeTag<std::int32_t>{});
    case DType::kInt64: return f(TypeTag<std::int64_t>{});
    case DType::kFloat16: return f(TypeTag<Half>{});
    case DType::kBFloat16: return f(TypeTag<BFloat16>{});
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: break;
  }
  return f(TypeTag<double>{});
}

/// Calls f(TypeTag<U>{}) with an unsigned integer type of `bytes` bytes:
/// kernels that only move elements (same-dtype copy, gather, scatter) are
/// instantiated per element size, not per dtype.
template <typename F>
decltype(auto) dispatch_size(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(TypeTag<std::uint8_t>{});
    case 2: return f(TypeTag<std::uint16_t>{});
    case 4: return f(TypeTag<std::uint32_t>{});
    default: break;
  }
  return f(TypeTag<std::uint64_t>{});
}

/// The unsigned integer type of N bytes.
template <std::size_t N>
using uint_of_size_t = std::conditional_t<N == 1, std::uint8_t,
                                          std::conditional_t<N == 2, std::uint16_t,
                                                             std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;

}  // namespace genesis::kernels
