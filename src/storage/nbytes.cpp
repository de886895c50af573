#include "genesis/storage/detail/nbytes.h"

#include <sys/types.h>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"

namespace genesis::storage::detail {

std::size_t checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const char* who) {
  // Note [Size overflow]; int64 bytes also stay within off_t, which
  // ftruncate and mmap offsets need.
  static_assert(sizeof(off_t) == sizeof(std::int64_t));
  // A DType cast from a number outside the enum has no size: every storage
  // (and so every tensor) is refused here rather than made with 0-byte
  // elements, which later code would divide by.
  GENESIS_CHECK(dtype_size(dtype) != 0, who, ": invalid dtype value ", static_cast<int>(dtype),
                " (expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)");
  return static_cast<std::size_t>(genesis::checked_nbytes(shape, dtype_size(dtype), who));
}

}  // namespace genesis::storage::detail
