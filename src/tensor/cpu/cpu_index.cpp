// CPU kernels of advanced indexing: gather, scatter and mask compaction
// (Note [Advanced indexing] in genesis/tensor/index.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_loops.h"

namespace genesis::kernels::cpu {
namespace {

// Byte offset added by the index operands at row position i.
inline std::int64_t indexed_offset(const IndexArgs& index, char* const* p, const std::int64_t* s, int first,
                                   std::int64_t i, std::int64_t itemsize) {
  std::int64_t off = 0;
  for (int k = 0; k < index.num_indices; ++k) {
    std::int64_t v = load<std::int64_t>(p[first + k] + i * s[first + k]);
    if (v < 0) v += index.indexed_sizes[k];
    off += v * index.indexed_strides[k];
  }
  return off * itemsize;
}

Loop index_loop(const StridedOperand& a, const StridedOperand& b, const IndexArgs& index, char* a_base,
                char* b_base) {
  const StridedOperand* ops[kMaxOperands] = {&a, &b};
  char* base[kMaxOperands] = {a_base, b_base};
  for (int k = 0; k < index.num_indices; ++k) {
    ops[2 + k] = &index.indices[k];
    base[2 + k] = static_cast<char*>(index.indices[k].data);
  }
  return make_loop(ops, 2 + index.num_indices, base);
}

}  // namespace

void gather(const KernelContext&, const StridedOperand& out, const StridedOperand& src, const IndexArgs& index) {
  const Loop loop = index_loop(out, src, index, static_cast<char*>(out.data), static_cast<char*>(src.data));
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr auto isz = static_cast<std::int64_t>(sizeof(T));
    run(loop, [&](char** p, const std::int64_t* s, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        const char* from = p[1] + i * s[1] + indexed_offset(index, p, s, 2, i, isz);
        store<T>(p[0] + i * s[0], load<T>(from));
      }
    });
  });
}

void scatter(const KernelContext&, const StridedOperand& dst, const StridedOperand& values, const IndexArgs& index,
             bool accumulate) {
  std::int64_t slot = 0;
  const Loop loop = index_loop(dst, values, index, static_cast<char*>(dst.data), input_base(values, &slot));
  dispatch(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr auto isz = static_cast<std::int64_t>(sizeof(T));
    auto row = [&](char** p, const std::int64_t* s, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        char* to = p[0] + i * s[0] + indexed_offset(index, p, s, 2, i, isz);
        const T v = load<T>(p[1] + i * s[1]);
        if (accumulate) {
          using C = compute_t<T>;
          if constexpr (std::is_same_v<T, bool>) store<T>(to, load<T>(to) || v);
          else store<T>(to, cast<T>(static_cast<C>(static_cast<C>(load<T>(to)) + static_cast<C>(v))));
        } else {
          store<T>(to, v);
        }
      }
    };
    // Several positions may name one element: accumulation must not race,
    // and plain writes stay in order (the last wins), so run on one thread.
    run_range(loop, 0, loop.numel(), row);
  });
}

namespace {

// Walks mask elements [begin, end) in row-major order with incremental
// coordinates and offset, calling f(coords) for each true element.
template <typename F>
void walk_mask(const StridedOperand& mask, std::int64_t begin, std::int64_t end, F&& f) {
  const int nd = mask.ndim;
  std::int64_t idx[kMaxDims] = {};
  std::int64_t off = 0, rest = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % mask.sizes[d];
    rest /= mask.sizes[d];
    off += idx[d] * mask.strides[d];
  }
  const char* base = static_cast<const char*>(mask.data);
  for (std::int64_t lin = begin; lin < end; ++lin) {
    if (load<bool>(base + off)) f(idx);
    for (int d = nd - 1; d >= 0; --d) {
      off += mask.strides[d];
      if (++idx[d] < mask.sizes[d]) break;
      off -= mask.strides[d] * mask.sizes[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void nonzero(const KernelContext&, const StridedOperand& out, const StridedOperand& mask) {
  auto* o = static_cast<std::int64_t*>(out.data);
  const int nd = mask.ndim;
  const std::int64_t total = mask.numel();
  if (total == 0) return;
  // Two passes over fixed chunks: count the true elements of each chunk,
  // then let each chunk write its rows at the prefix sum of the counts
  // before it, so the output is in row-major order whatever the threads.
  constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  const std::int64_t chunks = (total + kChunk - 1) / kChunk;
  std::vector<std::int64_t> first_row(static_cast<std::size_t>(chunks) + 1, 0);
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t n = 0;
      walk_mask(mask, c * kChunk, std::min(total, (c + 1) * kChunk), [&](const std::int64_t*) { ++n; });
      first_row[static_cast<std::size_t>(c) + 1] = n;
    }
  });
  for (std::size_t c = 1; c < first_row.size(); ++c) first_row[c] += first_row[c - 1];
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t row = first_row[static_cast<std::size_t>(c)];
      walk_mask(mask, c * kChunk, std::min(total, (c + 1) * kChunk), [&](const std::int64_t* idx) {
        for (int d = 0; d < nd; ++d) o[row * nd + d] = idx[d];
        ++row;
      });
    }
  });
}

void masked_select(const KernelContext&, const StridedOperand& out, const StridedOperand& src,
                   const StridedOperand& mask) {
  // Contract (backend.h): mask contiguous bool [n], src contiguous [n, row],
  // out contiguous [count, row]. Rows move as bytes; the same two-pass chunk
  // scheme as nonzero keeps the output in order whatever the threads.
  const std::int64_t n = mask.numel();
  if (n == 0 || out.numel() == 0) return;
  const bool* m = static_cast<const bool*>(mask.data);
  const std::int64_t row_bytes = src.sizes[1] * static_cast<std::int64_t>(dtype_size(src.dtype));
  const char* s = static_cast<const char*>(src.data);
  char* o = static_cast<char*>(out.data);
  // Chunks of about 64K elements' worth of bytes, at least one row each.
  const std::int64_t chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / std::max<std::int64_t>(1, row_bytes));
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<std::int64_t> first_row(static_cast<std::size_t>(chunks) + 1, 0);
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t k = 0;
      for (std::int64_t i = c * chunk, end = std::min(n, (c + 1) * chunk); i < end; ++i) k += m[i] ? 1 : 0;
      first_row[static_cast<std::size_t>(c) + 1] = k;
    }
  });
  for (std::size_t c = 1; c < first_row.size(); ++c) first_row[c] += first_row[c - 1];
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      std::int64_t r = first_row[static_cast<std::size_t>(c)];
      for (std::int64_t i = c * chunk, end = std::min(n, (c + 1) * chunk); i < end; ++i) {
        if (!m[i]) continue;
        std::memcpy(o + r * row_bytes, s + i * row_bytes, static_cast<std::size_t>(row_bytes));
        ++r;
      }
    }
  });
}

}  // namespace genesis::kernels::cpu
