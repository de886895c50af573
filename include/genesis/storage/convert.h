// convert_dtype: element-wise dtype conversion of raw CPU buffers.
//
// Note [Cast semantics]: the rules follow NumPy's and PyTorch's `astype` /
// `.to(dtype)` on CPU, with every case C++ leaves undefined given a fixed,
// documented result:
//   * to bool: nonzero -> true, zero (and -0.0) -> false, NaN -> true. A bool
//     source byte is read as "nonzero" (any byte other than 0 is true); bool
//     outputs are always 0 or 1.
//   * bool -> number: 0 or 1.
//   * integer -> integer: two's-complement wrap-around modulo 2^bits
//     (int32 300 -> uint8 44, int16 -1 -> uint8 255).
//   * integer -> floating: round to nearest even, once (int64 -> float16 or
//     bfloat16 included: no double rounding through float or double).
//   * floating -> floating: round to nearest even, once; overflow -> +-inf;
//     NaN stays NaN (see genesis/core/half.h, Note [Half conversions]).
//   * floating -> integer: truncate toward zero. Out-of-range values, +-inf
//     and NaN give, for int64 and int32, the minimum of the target type
//     (INT64_MIN / INT32_MIN: what NumPy and PyTorch produce on x86 CPUs).
//     For int16, int8 and uint8 the value is first converted to int64 by
//     that rule and then wrapped modulo 2^bits, as PyTorch does (-1.0 ->
//     uint8 255, 300.0 -> uint8 44, 200.0 -> int8 -56; NaN and +-inf -> 0).
//
// Large conversions (>= 1<<20 elements) are split into contiguous chunks on
// several std::threads; the result does not depend on the split.
#pragma once

#include <cstddef>

#include "genesis/core/dtype.h"

namespace genesis {

/// Element count from which convert_dtype uses several threads.
inline constexpr std::size_t kConvertParallelThreshold = std::size_t{1} << 20;

/// Converts `count` elements from `src` (of `src_dtype`) into `dst` (of
/// `dst_dtype`) on the CPU, following Note [Cast semantics], for every pair of
/// the ten dtypes. Both buffers must be host memory, need no alignment beyond
/// their element type's, and must not overlap, except that `src == dst` is
/// allowed when both dtypes have the same size (an in-place conversion, and a
/// no-op when the dtypes are equal). `count == 0` does nothing and accepts
/// null pointers.
///
/// Throws InvalidArgumentError if `src_dtype` or `dst_dtype` is not a valid
/// DType value, if `count > 0` and either pointer is null, or if the two
/// buffers overlap in any other way than the allowed in-place case.
void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                   std::size_t count);

}  // namespace genesis
