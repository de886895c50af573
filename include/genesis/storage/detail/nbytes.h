// Byte size of a shape, checked: shared by the storages that map memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/core/dtype.h"

namespace genesis::storage::detail {

/// Product of the dims times the element size. Throws InvalidArgumentError
/// (naming `who`) for a negative dim, an overflow, or a size beyond what
/// off_t can describe (a wrapped size would map less than callers index).
std::size_t checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const char* who);

}  // namespace genesis::storage::detail
