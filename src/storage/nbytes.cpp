#include "genesis/storage/detail/nbytes.h"

#include <sys/types.h>

#include <limits>

#include "genesis/core/error.h"

namespace genesis::storage::detail {

std::size_t checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const char* who) {
  std::size_t n = dtype_size(dtype);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t d = shape[i];
    GENESIS_CHECK(d >= 0, who, ": dimension ", i, " is negative (", d, ")");
    std::size_t out = 0;
    GENESIS_CHECK(!__builtin_mul_overflow(n, static_cast<std::size_t>(d), &out), who,
                  ": byte size of the shape overflows");
    n = out;
  }
  // off_t is signed: ftruncate and mmap offsets cannot go beyond its maximum.
  GENESIS_CHECK(n <= static_cast<std::size_t>(std::numeric_limits<off_t>::max()), who, ": byte size ", n,
                " is too large");
  return n;
}

}  // namespace genesis::storage::detail
