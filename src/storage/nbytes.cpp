#include "genesis/storage/detail/nbytes.h"

#include <sys/types.h>

#include "genesis/core/checked_math.h"

namespace genesis::storage::detail {

std::size_t checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const char* who) {
  // Note [Size overflow]; int64 bytes also stay within off_t, which
  // ftruncate and mmap offsets need.
  static_assert(sizeof(off_t) == sizeof(std::int64_t));
  return static_cast<std::size_t>(genesis::checked_nbytes(shape, dtype_size(dtype), who));
}

}  // namespace genesis::storage::detail
