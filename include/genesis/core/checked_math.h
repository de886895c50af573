// Overflow-checked size arithmetic: element counts, byte sizes, extents.
//
// Note [Size overflow]: sizes, strides and offsets are int64 and user input
// can be anything (2**32 x 2**32 x 2**32, expand to 2**62 rows, narrow
// past 2**63). A wrapped product looks like a small, valid size, so every
// computation of a size from user-given numbers goes through these helpers,
// which fail with InvalidArgumentError instead of wrapping. The rule for a
// shape: the product of its nonzero sizes must fit in int64 (as NumPy's
// "array is too big"), so that contiguous strides (which treat 0 as 1) and
// every partial product of a valid shape fit as well.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace genesis {

/// a * b in `out`; false (out unspecified) when the exact result does not fit.
[[nodiscard]] inline bool mul_fits(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
[[nodiscard]] inline bool add_fits(std::int64_t a, std::int64_t b, std::int64_t& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}

/// a * b; InvalidArgumentError "<what>: a * b overflows int64 ..." otherwise.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);
/// a + b; InvalidArgumentError "<what>: a + b overflows int64 ..." otherwise.
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);

/// The number of elements of `shape` (Note [Size overflow]).
/// InvalidArgumentError for a negative size ("<who>: negative dimension -1
/// in shape [2, -1]") or a shape too large ("<who>: shape [4294967296,
/// 4294967296, 4294967296] has more than 2^63-1 elements"). `who` may be
/// empty (no prefix).
std::int64_t checked_numel(std::span<const std::int64_t> shape, std::string_view who = {});

/// numel * itemsize; InvalidArgumentError naming the shape when the byte
/// size exceeds 2^63-1.
std::int64_t checked_nbytes(std::span<const std::int64_t> shape, std::size_t itemsize, std::string_view who = {});

/// "[2, 3]".
std::string shape_string(std::span<const std::int64_t> shape);

}  // namespace genesis
