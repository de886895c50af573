// CPU kernels that produce values without arithmetic inputs: fill, copy
// (strided, with dtype cast), iota and random (Note [Random numbers]).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "genesis/storage/convert.h"
#include "genesis/tensor/random_element.h"

namespace genesis::kernels::cpu {

void fill(const KernelContext&, const StridedOperand& out, Scalar value) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(value);
    const StridedOperand* ops[] = {&out};
    char* base[] = {static_cast<char*>(out.data)};
    run(make_loop(ops, 1, base), [&](char** p, const std::int64_t* s, std::int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (std::int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (std::int64_t i = 0; i < n; ++i) store<T>(p[0] + i * s[0], v);
      }
    });
  });
}

namespace {
bool is_contiguous(const StridedOperand& op) {
  std::int64_t expected = 1;
  for (int d = op.ndim - 1; d >= 0; --d) {
    if (op.sizes[d] != 1 && op.strides[d] != expected) return false;
    expected *= op.sizes[d];
  }
  return true;
}
// A copy whose two operands have their unit strides in different dims of
// the last two (a transpose): walking either one row by row strides through
// the other's memory, so the two dims are walked in 32 x 32 tiles instead.
template <typename D, typename S>
bool transposed_copy(const Loop& l) {
  if (l.ndim < 2) return false;
  const int a = l.ndim - 2, b = l.ndim - 1;
  const std::int64_t dsz = sizeof(D), ssz = sizeof(S);
  const bool crossed = (l.strides[0][b] == dsz && l.strides[1][a] == ssz) ||
                       (l.strides[0][a] == dsz && l.strides[1][b] == ssz);
  if (!crossed || l.sizes[a] < 32 || l.sizes[b] < 32) return false;
  constexpr std::int64_t kTile = 32;
  const std::int64_t rows = l.sizes[a], cols = l.sizes[b];
  const std::int64_t outer = l.numel() / (rows * cols);
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
  parallel_for(outer * row_tiles, std::max<std::int64_t>(1, kParallelGrain / (kTile * cols)),
               [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t t = lo; t < hi; ++t) {
      std::int64_t o = t / row_tiles;
      const std::int64_t r0 = (t % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
      char* dbase = l.base[0];
      const char* sbase = l.base[1];
      for (int d = a - 1; d >= 0; --d) {
        const std::int64_t i = o % l.sizes[d];
        o /= l.sizes[d];
        dbase += i * l.strides[0][d];
        sbase += i * l.strides[1][d];
      }
      for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const std::int64_t c1 = std::min(cols, c0 + kTile);
        for (std::int64_t r = r0; r < r1; ++r) {
          for (std::int64_t c = c0; c < c1; ++c) {
            store<D>(dbase + r * l.strides[0][a] + c * l.strides[0][b],
                     cast<D>(load<S>(sbase + r * l.strides[1][a] + c * l.strides[1][b])));
          }
        }
      }
    }
  });
  return true;
}

}  // namespace

void copy(const KernelContext&, const StridedOperand& dst, const StridedOperand& src) {
  if (is_contiguous(dst) && is_contiguous(src) && !src.is_scalar) {
    // Both packed: the storage layer's converter (multithreaded, and a
    // memcpy when the dtypes match).
    convert_dtype(src.data, src.dtype, dst.data, dst.dtype, static_cast<std::size_t>(dst.numel()));
    return;
  }
  std::int64_t slot = 0;
  char* base[] = {static_cast<char*>(dst.data), input_base(src, &slot)};
  const StridedOperand* ops[] = {&dst, &src};
  const Loop loop = make_loop(ops, 2, base);
  dispatch(dst.dtype, [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch(src.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      if (transposed_copy<D, S>(loop)) return;
      run(loop, [&](char** p, const std::int64_t* s, std::int64_t n) {
        if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
          D* o = reinterpret_cast<D*>(p[0]);
          const S* in = reinterpret_cast<const S*>(p[1]);
          for (std::int64_t i = 0; i < n; ++i) o[i] = cast<D>(in[i]);
        } else {
          for (std::int64_t i = 0; i < n; ++i) store<D>(p[0] + i * s[0], cast<D>(load<S>(p[1] + i * s[1])));
        }
      });
    });
  });
}

void iota(const KernelContext&, const StridedOperand& out, Scalar start, Scalar step) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data);
    const std::int64_t n = out.numel();
    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        if constexpr (std::is_integral_v<T>) {
          // Unsigned: i * step may pass 2^63 on the way to a value in range
          // (arange(-2**63, 2**63-1, 2**62)); wrapping gives the exact result.
          o[i] = static_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(start.to_int64()) +
                                                          static_cast<std::uint64_t>(i) *
                                                              static_cast<std::uint64_t>(step.to_int64())));
        } else {
          o[i] = cast<T>(start.to_double() + static_cast<double>(i) * step.to_double());
        }
      }
    });
  });
}

void random(const KernelContext&, const StridedOperand& out, const RandomParams& p) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data);
    parallel_for(out.numel(), kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) o[i] = random_element<T>(p, static_cast<std::uint64_t>(i));
    });
  });
}

}  // namespace genesis::kernels::cpu
