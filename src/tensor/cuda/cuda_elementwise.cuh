// The element-wise engine behind fill, copy, unary, binary and where:
// out[i] = f(in0[i], in1[i], in2[i]) over operands of one shape.
//
// Note [CUDA element-wise paths]:
//   * flat: after coalescing (Note [CUDA strided iteration]) a single
//     dimension in which every operand has unit stride, or stride 0 / is a
//     constant (broadcast). Each thread moves packs of V elements with
//     aligned vector accesses (16 bytes for the widest operand, two packs
//     per thread per step so that 32+ bytes per operand are in flight),
//     grid-stride. Used only when every pointer is aligned to its pack;
//     otherwise the strided path runs with ndim == 1 (no divisions). Large
//     flat problems use the dense variant instead (one chunk per thread,
//     no grid-stride: Note [CUDA element-wise dense path]).
//   * strided: any strides (negative, zero); each thread handles kUnroll
//     elements blockDim apart (coalesced when the innermost dim is dense),
//     loading all of them before computing to keep loads in flight; 32-bit
//     index arithmetic when the element count fits.
#pragma once

#include "cuda_common.cuh"

namespace genesis::kernels::cuda_impl {

struct None {};

template <>
struct Input<None> {
  static Input make(const StridedOperand&) { return {}; }
  __device__ __forceinline__ None at(std::int64_t) const { return {}; }
};

template <typename O, typename F, typename T0 = None, typename T1 = None, typename T2 = None>
struct Ew {
  static constexpr int kIn = !std::is_same_v<T0, None> + !std::is_same_v<T1, None> + !std::is_same_v<T2, None>;
  static constexpr int kOps = kIn + 1;
  template <typename T>
  static constexpr std::size_t size_of() { return std::is_same_v<T, None> ? 0 : sizeof(T); }
  static constexpr std::size_t max2(std::size_t x, std::size_t y) { return x > y ? x : y; }
  static constexpr std::size_t kMaxSize = max2(max2(sizeof(O), size_of<T0>()), max2(size_of<T1>(), size_of<T2>()));
  // Elements per pack: 16 bytes of the widest operand.
  static constexpr int kVec = static_cast<int>(16 / kMaxSize);

  char* out;
  Input<T0> in0;
  Input<T1> in1;
  Input<T2> in2;
  F f;

  __device__ __forceinline__ O eval(T0 a, T1 b, T2 c) const {
    if constexpr (kIn == 0) return f();
    else if constexpr (kIn == 1) return f(a);
    else if constexpr (kIn == 2) return f(a, b);
    else return f(a, b, c);
  }
};

template <typename T, int V>
__device__ __forceinline__ void load_pack(const Input<T>& in, std::int64_t i, T (&dst)[V]) {
  if constexpr (std::is_same_v<T, None>) {
    (void)in, (void)i, (void)dst;
  } else {
    if (in.is_const) {
#pragma unroll
      for (int j = 0; j < V; ++j) dst[j] = in.value;
    } else {
      const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(in.ptr + i * static_cast<std::int64_t>(sizeof(T)));
#pragma unroll
      for (int j = 0; j < V; ++j) dst[j] = p.v[j];
    }
  }
}

constexpr int kFlatUnroll = 2;

template <typename E, typename O, typename T0, typename T1, typename T2>
__global__ void __launch_bounds__(kThreads) ew_flat_kernel(E e, std::int64_t n) {
  constexpr int V = E::kVec;
  const std::int64_t packs = n / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p0 = static_cast<std::int64_t>(blockIdx.x) * blockDim.x * kFlatUnroll + threadIdx.x; p0 < packs;
       p0 += stride * kFlatUnroll) {
    T0 a[kFlatUnroll][V];
    T1 b[kFlatUnroll][V];
    T2 c[kFlatUnroll][V];
#pragma unroll
    for (int u = 0; u < kFlatUnroll; ++u) {
      const std::int64_t p = p0 + u * static_cast<std::int64_t>(blockDim.x);
      if (p < packs) {
        load_pack<T0, V>(e.in0, p * V, a[u]);
        load_pack<T1, V>(e.in1, p * V, b[u]);
        load_pack<T2, V>(e.in2, p * V, c[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kFlatUnroll; ++u) {
      const std::int64_t p = p0 + u * static_cast<std::int64_t>(blockDim.x);
      if (p < packs) {
        Pack<O, V> r;
#pragma unroll
        for (int j = 0; j < V; ++j) r.v[j] = e.eval(a[u][j], b[u][j], c[u][j]);
        *reinterpret_cast<Pack<O, V>*>(e.out + p * V * static_cast<std::int64_t>(sizeof(O))) = r;
      }
    }
  }
  // Tail: the last n % V elements, one thread each.
  const std::int64_t tail = packs * V + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) {
    const std::int64_t i = tail;
    *reinterpret_cast<O*>(e.out + i * static_cast<std::int64_t>(sizeof(O))) =
        e.eval(e.in0.at(i * static_cast<std::int64_t>(sizeof(T0))), e.in1.at(i * static_cast<std::int64_t>(sizeof(T1))),
               e.in2.at(i * static_cast<std::int64_t>(sizeof(T2))));
  }
}

// Note [CUDA element-wise dense path]: for large flat problems a one-wave
// grid-stride launch leaves ~7% of HBM bandwidth unused on H200 (each thread
// walks the whole array, so its loads wait on its own previous stores and
// the tail of the last sweep idles most SMs). The dense kernel instead gives
// each thread one chunk of kDenseUnroll packs (blockDim apart, so warps stay
// coalesced), issues all of its loads before any store, and launches enough
// 128-thread blocks to cover the array once (no loop): the block scheduler
// then keeps every SM full until the very end, as PyTorch's vectorized
// kernel does.
constexpr int kDenseThreads = 128;
constexpr int kDenseUnroll = 4;
// Below this many packs the grid-stride kernel is as fast (the launch
// dominates) and already tuned; 2^18 packs = 1 Mi float32 elements.
constexpr std::int64_t kDenseMinPacks = std::int64_t{1} << 18;

template <typename E, typename O, typename T0, typename T1, typename T2>
__global__ void __launch_bounds__(kDenseThreads) ew_dense_kernel(E e, std::int64_t n) {
  constexpr int V = E::kVec;
  const std::int64_t packs = n / V;
  const std::int64_t p0 =
      static_cast<std::int64_t>(blockIdx.x) * (kDenseThreads * kDenseUnroll) + static_cast<std::int64_t>(threadIdx.x);
  T0 a[kDenseUnroll][V];
  T1 b[kDenseUnroll][V];
  T2 c[kDenseUnroll][V];
#pragma unroll
  for (int u = 0; u < kDenseUnroll; ++u) {
    const std::int64_t p = p0 + u * kDenseThreads;
    if (p < packs) {
      load_pack<T0, V>(e.in0, p * V, a[u]);
      load_pack<T1, V>(e.in1, p * V, b[u]);
      load_pack<T2, V>(e.in2, p * V, c[u]);
    }
  }
#pragma unroll
  for (int u = 0; u < kDenseUnroll; ++u) {
    const std::int64_t p = p0 + u * kDenseThreads;
    if (p < packs) {
      Pack<O, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = e.eval(a[u][j], b[u][j], c[u][j]);
      *reinterpret_cast<Pack<O, V>*>(e.out + p * V * static_cast<std::int64_t>(sizeof(O))) = r;
    }
  }
  // Tail: the last n % V (< V <= 16 < kDenseThreads) elements, threads of
  // block 0.
  if (blockIdx.x == 0) {
    const std::int64_t i = packs * V + static_cast<std::int64_t>(threadIdx.x);
    if (i < n) {
      *reinterpret_cast<O*>(e.out + i * static_cast<std::int64_t>(sizeof(O))) =
          e.eval(e.in0.at(i * static_cast<std::int64_t>(sizeof(T0))), e.in1.at(i * static_cast<std::int64_t>(sizeof(T1))),
                 e.in2.at(i * static_cast<std::int64_t>(sizeof(T2))));
    }
  }
}

constexpr int kStridedUnroll = 4;

template <typename Index, typename E, typename O, typename T0, typename T1, typename T2>
__global__ void __launch_bounds__(kThreads) ew_strided_kernel(E e, Iter<E::kOps> it, Index n) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x * kStridedUnroll;
  for (Index base = static_cast<Index>(blockIdx.x) * blockDim.x * kStridedUnroll + threadIdx.x; base < n;
       base += step) {
    T0 a[kStridedUnroll];
    T1 b[kStridedUnroll];
    T2 c[kStridedUnroll];
    std::int64_t out_off[kStridedUnroll];
#pragma unroll
    for (int u = 0; u < kStridedUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * blockDim.x;
      if (i < n) {
        std::int64_t off[E::kOps];
        iter_offsets<Index, E::kOps>(it, i, off);
        out_off[u] = off[0];
        if constexpr (E::kIn > 0) a[u] = e.in0.at(off[E::kIn > 0 ? 1 : 0]);
        if constexpr (E::kIn > 1) b[u] = e.in1.at(off[E::kIn > 1 ? 2 : 0]);
        if constexpr (E::kIn > 2) c[u] = e.in2.at(off[E::kIn > 2 ? 3 : 0]);
      }
    }
#pragma unroll
    for (int u = 0; u < kStridedUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * blockDim.x;
      if (i < n) *reinterpret_cast<O*>(e.out + out_off[u]) = e.eval(a[u], b[u], c[u]);
    }
  }
}

// Note [CUDA element-wise row path]: when the coalesced iteration keeps two
// or more dims and the innermost one is long (a slice of a matrix such as
// m[::2, ::3], a column-strided view, a broadcast row), a block takes one
// row (blockIdx.y) and a chunk of kRowsThreads * kRowsUnroll elements of it
// (blockIdx.x): the row's base offsets are computed once per block, and each
// element's offset is a multiply by the inner stride, with no per-element
// division. One wave of the grid then covers many rows at once. It beat the
// grid-stride strided kernel with divisions per element on every strided
// slice measured, and 256 threads x 4 elements was the best block shape over
// them (figures: bench/HISTORY.md, "Strided copies: the element-wise row
// path").
constexpr int kRowsThreads = 256;
constexpr int kRowsUnroll = 4;
constexpr std::int64_t kRowsMinInner = 256;

template <int N>
struct InnerStrides {
  std::int64_t s[N];  // bytes per step of the innermost dim, per operand
};

template <typename E, typename O, typename T0, typename T1, typename T2>
__global__ void __launch_bounds__(kRowsThreads)
    ew_rows_kernel(E e, Iter<E::kOps> outer, std::int64_t inner, InnerStrides<E::kOps> step, std::int64_t rows) {
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * (kRowsThreads * kRowsUnroll) + threadIdx.x;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    std::int64_t base[E::kOps];
    iter_offsets<std::int64_t, E::kOps>(outer, r, base);
    T0 a[kRowsUnroll];
    T1 b[kRowsUnroll];
    T2 c[kRowsUnroll];
#pragma unroll
    for (int u = 0; u < kRowsUnroll; ++u) {
      const std::int64_t j = j0 + u * kRowsThreads;
      if (j < inner) {
        if constexpr (E::kIn > 0) a[u] = e.in0.at(base[1] + j * step.s[E::kIn > 0 ? 1 : 0]);
        if constexpr (E::kIn > 1) b[u] = e.in1.at(base[2] + j * step.s[E::kIn > 1 ? 2 : 0]);
        if constexpr (E::kIn > 2) c[u] = e.in2.at(base[3] + j * step.s[E::kIn > 2 ? 3 : 0]);
      }
    }
#pragma unroll
    for (int u = 0; u < kRowsUnroll; ++u) {
      const std::int64_t j = j0 + u * kRowsThreads;
      if (j < inner) *reinterpret_cast<O*>(e.out + base[0] + j * step.s[0]) = e.eval(a[u], b[u], c[u]);
    }
  }
}

/// Queues out = f(inputs...) on `stream`. ops[0] is out; ops[1..] the
/// inputs (their dtypes match T0..T2; constant inputs are folded into the
/// Input values, their strides are all 0).
template <typename O, typename T0 = None, typename T1 = None, typename T2 = None, typename F>
void launch_elementwise(cudaStream_t stream, F f, const StridedOperand* const* ops) {
  using E = Ew<O, F, T0, T1, T2>;
  constexpr int N = E::kOps;
  const Iter<N> it = make_iter<N>(ops);
  const std::int64_t n = it.numel();
  if (n == 0) return;
  E e{static_cast<char*>(ops[0]->data), {}, {}, {}, f};
  if constexpr (E::kIn > 0) e.in0 = Input<T0>::make(*ops[1]);
  if constexpr (E::kIn > 1) e.in1 = Input<T1>::make(*ops[2]);
  if constexpr (E::kIn > 2) e.in2 = Input<T2>::make(*ops[3]);

  // Flat path: one dim, unit or zero strides, packs aligned.
  bool flat = it.is_flat();
  constexpr int V = E::kVec;
  if (flat) {
    flat = it.strides[0][0] == static_cast<std::int64_t>(sizeof(O)) && aligned_to(e.out, kPackAlign<O, V>);
    auto input_ok = [&](auto tag, const auto& in, int k) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, None>) {
        return true;
      } else {
        if (in.is_const) return true;
        if (it.strides[k][0] == 0) return false;  // broadcast memory: strided path reads one element
        return it.strides[k][0] == static_cast<std::int64_t>(sizeof(T)) && aligned_to(in.ptr, kPackAlign<T, V>);
      }
    };
    flat = flat && input_ok(TypeTag<T0>{}, e.in0, 1) && input_ok(TypeTag<T1>{}, e.in1, 2) &&
           input_ok(TypeTag<T2>{}, e.in2, 3);
  }
  if (flat && n >= V) {
    const std::int64_t packs = n / V;
    static_assert(V <= kDenseThreads, "the dense kernel's tail needs one thread of block 0 per element");
    const std::int64_t dense_blocks = (packs + kDenseThreads * kDenseUnroll - 1) / (kDenseThreads * kDenseUnroll);
    if (packs >= kDenseMinPacks && dense_blocks <= 0x7fffffff) {  // Note [CUDA element-wise dense path]
      ew_dense_kernel<E, O, T0, T1, T2><<<static_cast<unsigned>(dense_blocks), kDenseThreads, 0, stream>>>(e, n);
      GENESIS_CUDA_CHECK_LAUNCH();
      return;
    }
    const std::int64_t blocks_needed = (packs + kThreads * kFlatUnroll - 1) / (kThreads * kFlatUnroll);
    // The tail (< V elements) is handled by threads of block 0; one block
    // has kThreads >= V threads, so any grid covers it.
    const unsigned grid = grid_for(blocks_needed * kThreads, blocks_per_sm<ew_flat_kernel<E, O, T0, T1, T2>>());
    ew_flat_kernel<E, O, T0, T1, T2><<<grid, kThreads, 0, stream>>>(e, n);
    GENESIS_CUDA_CHECK_LAUNCH();
    return;
  }
  const int last = it.ndim - 1;
  const std::int64_t inner = it.sizes[last];
  const std::int64_t chunks = (inner + kRowsThreads * kRowsUnroll - 1) / (kRowsThreads * kRowsUnroll);
  if (it.ndim >= 2 && inner >= kRowsMinInner && chunks <= 0x7fffffff) {  // Note [CUDA element-wise row path]
    Iter<N> outer = it;
    outer.ndim = last;
    InnerStrides<N> step{};
    for (int k = 0; k < N; ++k) step.s[k] = it.strides[k][last];
    const std::int64_t rows = outer.numel();
    const dim3 grid(static_cast<unsigned>(chunks),
                    static_cast<unsigned>(rows < kMaxGridYZ ? rows : kMaxGridYZ));
    ew_rows_kernel<E, O, T0, T1, T2><<<grid, kRowsThreads, 0, stream>>>(e, outer, inner, step, rows);
    GENESIS_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::int64_t items = (n + kStridedUnroll - 1) / kStridedUnroll;
  if (fits_int32(n)) {
    const unsigned grid = grid_for(items, blocks_per_sm<ew_strided_kernel<std::uint32_t, E, O, T0, T1, T2>>());
    ew_strided_kernel<std::uint32_t, E, O, T0, T1, T2><<<grid, kThreads, 0, stream>>>(e, it, static_cast<std::uint32_t>(n));
  } else {
    const unsigned grid = grid_for(items, blocks_per_sm<ew_strided_kernel<std::uint64_t, E, O, T0, T1, T2>>());
    ew_strided_kernel<std::uint64_t, E, O, T0, T1, T2><<<grid, kThreads, 0, stream>>>(e, it, static_cast<std::uint64_t>(n));
  }
  GENESIS_CUDA_CHECK_LAUNCH();
}

}  // namespace genesis::kernels::cuda_impl
