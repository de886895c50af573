// Dtype dispatch: from a runtime DType (or an element size) to a compile-time
// element type. The one mapping every converter and kernel backend uses
// (storage's CPU and CUDA conversions, the tensor CPU and CUDA kernels), so a
// new dtype is added in one place. Host code; the functions it picks may be
// device code. The names live in genesis::kernels, where the kernel backends
// (nested namespaces of it) find them unqualified.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "genesis/core/cast.h"
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

/// As dispatch, but bool elements come as BoolByte (core/cast.h): code that
/// reads buffers whose bool bytes may hold any value (conversions of raw
/// storages) must not read them through C++ bool.
template <typename F>
decltype(auto) dispatch_element(DType t, F&& f) {
  if (t == DType::kBool) return f(TypeTag<BoolByte>{});
  return dispatch(t, std::forward<F>(f));
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
