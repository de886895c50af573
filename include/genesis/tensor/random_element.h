// The value of element i of a random fill, for every backend (Note [Random
// numbers] in tensor/philox.h). A kernel's whole job is
//   out[i] = random_element<T>(params, i);
// so CPU and CUDA agree by construction: same counters, same transforms,
// same rounding and clamping.
#pragma once

#include <cstdint>
#include <type_traits>

#include "genesis/core/half.h"
#include "genesis/tensor/backend.h"
#include "genesis/core/cast.h"
#include "genesis/tensor/philox.h"

namespace genesis::kernels {

template <typename T>
GENESIS_HOST_DEVICE inline T random_element(const RandomParams& p, std::uint64_t i) noexcept {
  const philox::Block blk = philox::element_block(p.seed, p.offset, i);
  if constexpr (std::is_same_v<T, bool>) {
    return false;  // the tensor layer never asks for random bools
  } else if constexpr (std::is_integral_v<T>) {
    const auto range = static_cast<std::uint64_t>(p.int_high) - static_cast<std::uint64_t>(p.int_low);
    return cast<T>(philox::integer(blk, p.int_low, range));
  } else {
    if (p.kind == RandomKind::kInteger) {
      const auto range = static_cast<std::uint64_t>(p.int_high) - static_cast<std::uint64_t>(p.int_low);
      return cast<T>(philox::integer(blk, p.int_low, range));
    }
    if (p.kind == RandomKind::kNormal) return cast<T>(p.low + p.high * philox::normal_double(blk));
    if constexpr (std::is_same_v<T, double>) {
      return p.low + (p.high - p.low) * philox::uniform_double(blk);
    } else {
      // 24 random bits, scaled in double, rounded once to T. Rounding may
      // reach `high` in a narrow type; such draws become `low`, keeping the
      // result in [low, high).
      const double v = p.low + (p.high - p.low) * static_cast<double>(philox::uniform_float(blk));
      const T r = cast<T>(v);
      if (p.high > p.low && static_cast<double>(static_cast<float>(r)) >= p.high) return cast<T>(p.low);
      return r;
    }
  }
}

}  // namespace genesis::kernels
