// Overflow-checked size arithmetic (Note [Size overflow] in core/checked_math.h).
#include "genesis/core/checked_math.h"

#include <algorithm>
#include <string>

#include "genesis/core/error.h"

namespace genesis {

namespace {
std::string prefix(std::string_view who) { return who.empty() ? std::string() : std::string(who) + ": "; }
}  // namespace

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  GENESIS_CHECK(mul_fits(a, b, out), prefix(what), a, " * ", b, " overflows int64 (the result is beyond +-(2^63-1))");
  return out;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  GENESIS_CHECK(add_fits(a, b, out), prefix(what), a, " + ", b, " overflows int64 (the result is beyond +-(2^63-1))");
  return out;
}

namespace {
// The product of the nonzero sizes (Note [Size overflow]); `empty` says
// whether a size is 0.
std::int64_t nonzero_product(std::span<const std::int64_t> shape, std::string_view who, bool& empty) {
  std::int64_t nonzero = 1;
  empty = false;
  for (const std::int64_t s : shape) {
    GENESIS_CHECK(s >= 0, prefix(who), "negative dimension ", s, " in shape ", shape_string(shape));
    if (s == 0) {
      empty = true;
      continue;
    }
    if (GENESIS_UNLIKELY(!mul_fits(nonzero, s, nonzero))) {
      if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
        GENESIS_THROW(InvalidArgumentError, prefix(who), "shape ", shape_string(shape),
                      " is too large: its nonzero sizes multiply to more than 2^63-1");
      }
      GENESIS_THROW(InvalidArgumentError, prefix(who), "shape ", shape_string(shape), " has more than 2^63-1 elements");
    }
  }
  return nonzero;
}
}  // namespace

std::int64_t checked_numel(std::span<const std::int64_t> shape, std::string_view who) {
  bool empty = false;
  const std::int64_t n = nonzero_product(shape, who, empty);
  return empty ? 0 : n;
}

std::int64_t checked_nbytes(std::span<const std::int64_t> shape, std::size_t itemsize, std::string_view who) {
  bool empty = false;
  const std::int64_t n = nonzero_product(shape, who, empty);
  // Checked for the nonzero sizes too: byte strides (NumPy, DLPack) of an
  // empty shape must fit as well.
  std::int64_t bytes = 0;
  if (GENESIS_UNLIKELY(!mul_fits(n, static_cast<std::int64_t>(itemsize), bytes))) {
    if (empty) {
      GENESIS_THROW(InvalidArgumentError, prefix(who), "shape ", shape_string(shape), " of ", itemsize,
                    "-byte elements is too large: the byte size of its nonzero sizes overflows 2^63-1");
    }
    GENESIS_THROW(InvalidArgumentError, prefix(who), "shape ", shape_string(shape), " (", n, " elements of ", itemsize,
                  " bytes) is too large: its byte size overflows 2^63-1");
  }
  return empty ? 0 : bytes;
}

}  // namespace genesis
