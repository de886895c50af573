// Building blocks of the CPU kernels: dtype dispatch and the strided loop.
//
// Note [CPU strided loop]: an N-operand loop over one iteration shape.
// Dimensions are first coalesced (adjacent dims merge when every operand
// steps through them as one; size-1 dims vanish), so a contiguous tensor is
// a single row. The loop then walks rows of the innermost dimension and
// hands each row to a functor row(ptrs, byte_strides, n), which checks for
// unit strides to take a vectorisable path. Large iterations split the
// linear element range across threads (parallel_for); a chunk may start in
// the middle of a row.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/tensor/backend.h"
#include "genesis/core/cast.h"
#include "genesis/core/dtype_dispatch.h"
#include "thread_pool.h"

namespace genesis::kernels::cpu {

inline constexpr int kMaxOperands = kMaxDims + 4;

/// The loop state of Note [CPU strided loop]: byte strides per operand.
struct Loop {
  int nops = 0;
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxOperands][kMaxDims] = {};  // bytes
  char* base[kMaxOperands] = {};

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

/// A Loop over `sizes` for operands with element strides `strides[i]` and
/// element sizes `itemsize[i]`, coalesced.
inline Loop make_loop(int ndim, const std::int64_t* sizes, int nops, char* const* base,
                      const std::int64_t* const* strides, const std::size_t* itemsize) {
  Loop l;
  l.nops = nops;
  for (int i = 0; i < nops; ++i) l.base[i] = base[i];
  // Drop size-1 dims, then merge dim d into the previous kept one when
  // stride[prev] == stride[d] * size[d] for every operand.
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    if (sizes[d] == 0) {  // empty: a single zero-length dim
      l.ndim = 1;
      l.sizes[0] = 0;
      return l;
    }
    if (l.ndim > 0) {
      bool merge = true;
      for (int i = 0; i < nops && merge; ++i) {
        merge = l.strides[i][l.ndim - 1] == strides[i][d] * static_cast<std::int64_t>(itemsize[i]) * sizes[d];
      }
      if (merge) {
        l.sizes[l.ndim - 1] *= sizes[d];
        for (int i = 0; i < nops; ++i) l.strides[i][l.ndim - 1] = strides[i][d] * static_cast<std::int64_t>(itemsize[i]);
        continue;
      }
    }
    l.sizes[l.ndim] = sizes[d];
    for (int i = 0; i < nops; ++i) l.strides[i][l.ndim] = strides[i][d] * static_cast<std::int64_t>(itemsize[i]);
    ++l.ndim;
  }
  if (l.ndim == 0) {  // a single element
    l.ndim = 1;
    l.sizes[0] = 1;
  }
  return l;
}

/// Loop over operands that all have `ops[0]`'s sizes.
inline Loop make_loop(const StridedOperand* const* ops, int nops, char* const* base) {
  const std::int64_t* strides[kMaxOperands];
  std::size_t itemsize[kMaxOperands];
  for (int i = 0; i < nops; ++i) {
    strides[i] = ops[i]->strides;
    itemsize[i] = dtype_size(ops[i]->dtype);
  }
  return make_loop(ops[0]->ndim, ops[0]->sizes, nops, base, strides, itemsize);
}

/// Runs row(ptrs, strides, n) over elements [begin, end) of the loop.
template <typename Row>
void run_range(const Loop& l, std::int64_t begin, std::int64_t end, Row&& row) {
  if (begin >= end) return;  // also keeps the modulo below away from empty dims
  const int inner = l.ndim - 1;
  std::int64_t idx[kMaxDims];
  std::int64_t rest = begin;
  for (int d = inner; d >= 0; --d) {
    idx[d] = rest % l.sizes[d];
    rest /= l.sizes[d];
  }
  char* ptrs[kMaxOperands];
  std::int64_t inner_strides[kMaxOperands];
  for (int i = 0; i < l.nops; ++i) inner_strides[i] = l.strides[i][inner];
  while (begin < end) {
    for (int i = 0; i < l.nops; ++i) {
      char* p = l.base[i];
      for (int d = 0; d < l.ndim; ++d) p += idx[d] * l.strides[i][d];
      ptrs[i] = p;
    }
    const std::int64_t n = std::min(l.sizes[inner] - idx[inner], end - begin);
    row(ptrs, inner_strides, n);
    begin += n;
    idx[inner] += n;
    for (int d = inner; d > 0 && idx[d] == l.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

/// The whole loop, split over threads when large.
template <typename Row>
void run(const Loop& l, Row&& row, std::int64_t grain = kParallelGrain) {
  const std::int64_t n = l.numel();
  if (n == 0) return;
  if (n < grain) {
    run_range(l, 0, n, row);
    return;
  }
  parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) { run_range(l, b, e, row); });
}

template <typename T>
inline T load(const char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
inline void store(char* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

/// An input operand's base pointer; an is_scalar operand is materialised
/// into `slot` (8 bytes, stride 0) in its dtype.
inline char* input_base(const StridedOperand& op, std::int64_t* slot) {
  if (!op.is_scalar) return static_cast<char*>(op.data);
  dispatch(op.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(op.scalar);
    std::memcpy(slot, &v, sizeof(T));
  });
  return reinterpret_cast<char*>(slot);
}

}  // namespace genesis::kernels::cpu
