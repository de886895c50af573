// Reduction machinery of the CUDA backend (ReduceOp contract in
// genesis/tensor/backend.h): the reduction functors and the two kernels.
//
// Note [CUDA reduction paths]: the input's dims split into kept dims (the
// outputs) and reduced dims; each group is coalesced on its own (Note [CUDA
// strided iteration]). Then:
//   * column kernel, when the innermost kept dim is dense in the input (sum
//     over dim 0 of a matrix, any reduction over outer dims): a block owns 32
//     x V adjacent outputs (V from a 16-byte vector load) and its 8 thread
//     rows walk the reduced elements; every step reads whole coalesced row
//     segments, and shared memory merges the 8 thread rows;
//   * row kernel otherwise (sum over the last dim, full reductions, any
//     layout): TX threads per output stride over the reduced elements (with
//     16-byte loads when they are dense and aligned), warp shuffles and
//     shared memory merge them.
// When there are too few outputs to fill the GPU, the reduced range is cut
// into `splits` chunks (blockIdx.y); each chunk writes a partial
// accumulator and reduce_partials_kernel merges them per output, in chunk
// order; a full reduction (one output) instead interleaves its splits and
// merges in its last block (Note [One-pass full reductions]). The split
// depends only on the shape, so results are deterministic.
// Accumulators follow the CPU (int64 for bool/integers, float for the 16-bit
// floats, double for float32/float64): sums differ from the CPU only by the
// order of additions.
#pragma once

#include <limits>

#include "cuda_common.cuh"
#include "genesis/memory/device_allocators.h"

namespace genesis::kernels::cuda_impl {

template <typename T>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, std::int64_t,
                                     std::conditional_t<kIsHalfLike<T>, float, double>>;

// Result stored as the op's output type O (the input type, or bool for
// any/all), or as int64 when the output is int64 and O is not (sum/prod of
// bool and integers); out_is_int64 is uniform across the grid.
template <typename T, typename Acc>
__device__ __forceinline__ void store_result(char* p, bool out_is_int64, Acc v) {
  if constexpr (!std::is_same_v<T, std::int64_t>) {
    if (out_is_int64) {
      *reinterpret_cast<std::int64_t*>(p) = cast<std::int64_t>(v);
      return;
    }
  }
  *reinterpret_cast<T*>(p) = cast<T>(v);
}

// numeric_limits is host-only constexpr; the device needs these spelled out
// (same bit patterns as the x86 CPU's numeric_limits).
template <typename A>
__device__ __forceinline__ A quiet_nan() {
  if constexpr (std::is_same_v<A, float>) return __int_as_float(0x7fc00000);
  else return __longlong_as_double(0x7ff8000000000000ll);
}
template <typename A>
__device__ __forceinline__ A infinity() {
  if constexpr (std::is_same_v<A, float>) return __int_as_float(0x7f800000);
  else return __longlong_as_double(0x7ff0000000000000ll);
}
template <typename A>
__device__ __forceinline__ A int_max() {
  using U = std::make_unsigned_t<A>;
  if constexpr (std::is_signed_v<A>) return static_cast<A>(static_cast<U>(~U(0)) >> 1);
  else return static_cast<A>(~U(0));
}
template <typename A>
__device__ __forceinline__ A int_lowest() {
  if constexpr (std::is_signed_v<A>) return static_cast<A>(-int_max<A>() - 1);
  else return A(0);
}

template <typename T>
struct RSum {
  using In = T;
  using Out = T;  // or int64 (ReduceGeom::out_is_int64)
  using Acc = sum_acc_t<T>;
  static constexpr bool kMean = false;
  __device__ Acc init() const { return Acc(0); }
  __device__ Acc combine(Acc a, T x) const { return merge(a, static_cast<Acc>(static_cast<compute_t<T>>(x))); }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (std::is_integral_v<Acc>) return static_cast<Acc>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
    else return a + b;
  }
  __device__ Acc finish(Acc a, std::int64_t) const { return a; }
};

template <typename T>
struct RMean : RSum<T> {
  using Acc = typename RSum<T>::Acc;
  __device__ Acc finish(Acc a, std::int64_t n) const {
    return n == 0 ? quiet_nan<Acc>() : a / static_cast<Acc>(n);
  }
};

template <typename T>
struct RProd {
  using In = T;
  using Out = T;  // or int64 (ReduceGeom::out_is_int64)
  using Acc = sum_acc_t<T>;
  __device__ Acc init() const { return Acc(1); }
  __device__ Acc combine(Acc a, T x) const { return merge(a, static_cast<Acc>(static_cast<compute_t<T>>(x))); }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (std::is_integral_v<Acc>) return static_cast<Acc>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
    else return a * b;
  }
  __device__ Acc finish(Acc a, std::int64_t) const { return a; }
};

template <typename T, bool kMax>
struct RMinMax {
  using In = T;
  using Out = T;  // or int64 (ReduceGeom::out_is_int64)
  using Acc = compute_t<T>;
  __device__ Acc init() const {
    if constexpr (std::is_same_v<Acc, bool>) return !kMax;
    else if constexpr (std::is_integral_v<Acc>) return kMax ? int_lowest<Acc>() : int_max<Acc>();
    else return kMax ? -infinity<Acc>() : infinity<Acc>();
  }
  __device__ Acc combine(Acc a, T x) const { return merge(a, static_cast<Acc>(x)); }
  __device__ Acc merge(Acc a, Acc b) const {
    if constexpr (!std::is_integral_v<Acc>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    if constexpr (kMax) return b > a ? b : a;
    else return b < a ? b : a;
  }
  __device__ Acc finish(Acc a, std::int64_t) const { return a; }
};

template <typename T, bool kAny>
struct RAnyAll {
  using In = T;
  using Out = bool;
  using Acc = bool;
  __device__ Acc init() const { return !kAny; }
  __device__ Acc combine(Acc a, T x) const { return merge(a, cast<bool>(x)); }
  __device__ Acc merge(Acc a, Acc b) const { return kAny ? (a || b) : (a && b); }
  __device__ Acc finish(Acc a, std::int64_t) const { return a; }
};

// Warp shuffle for every accumulator type (bool travels as int).
template <typename Acc>
__device__ __forceinline__ Acc shfl_down(Acc v, int delta) {
  if constexpr (std::is_same_v<Acc, bool>) return __shfl_down_sync(0xffffffffu, static_cast<int>(v), delta) != 0;
  else if constexpr (sizeof(Acc) < 4) return static_cast<Acc>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), delta));
  else return __shfl_down_sync(0xffffffffu, v, delta);
}

/// Geometry shared by the reduction kernels.
struct ReduceGeom {
  Iter<2> kept;     // kept dims: strides of in [0] and out [1], bytes
  Iter<1> red;      // reduced dims: strides of in, bytes
  std::int64_t num_out = 1, num_red = 1;
  std::int64_t chunk = 0;  // reduced elements per split
  int splits = 1;
  bool out_is_int64 = false;
  // Non-null (one output, 256 x 1 blocks, splits > 1): the last block to
  // finish merges the partials itself (Note [One-pass full reductions]).
  unsigned int* done = nullptr;
  bool interleave = false;  // with done and the 16-byte row path: splits interleave (reduce_rows_kernel)
};

// Note [One-pass full reductions]: a full reduction (x.sum()) splits the
// input over one wave of blocks, each writing a partial. A second kernel
// merging the partials costs a kernel boundary plus a latency-bound merge,
// ~2% of a 1 GiB sum on an H200. Instead each block, after writing its
// partial, bumps a counter; the block that brings it to `splits` has seen
// every other block's increment, so (after a fence) every partial, and
// merges them in split order with all its threads: the same order every
// run. It then resets the counter, so the counter needs no memset before
// the next reduction: kernels of one stream run one after another, and each
// stream has its own counter (reduce_done_counter).
unsigned int* reduce_done_counter(int device, memory::StreamId stream);

template <int N>
__device__ __forceinline__ std::int64_t offset0(const Iter<N>& it, std::int64_t linear) {
  std::int64_t off[N];
  iter_offsets<std::int64_t, N>(it, linear, off);
  return off[0];
}

constexpr int kRowThreads = 256;

// Merges the TX = blockDim.x lanes of each thread row: shuffles within
// warps, then shared memory across the warps of a row. The result is in
// lane tx == 0. Every thread of the block must call it.
template <typename Op>
__device__ __forceinline__ typename Op::Acc merge_row_lanes(typename Op::Acc acc, const Op& op) {
  using Acc = typename Op::Acc;
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x;
  for (int d = 16; d > 0; d >>= 1) {
    const Acc other = shfl_down(acc, d);
    acc = op.merge(acc, other);
  }
  __shared__ Acc warp_acc[kRowThreads / 32];
  const int warps_per_row = TX / 32;
  if (warps_per_row > 1) {
    __syncthreads();  // an earlier call's readers are done with warp_acc
    if ((tx & 31) == 0) warp_acc[ty * warps_per_row + tx / 32] = acc;
    __syncthreads();
    if (tx == 0) {
      for (int w = 1; w < warps_per_row; ++w) acc = op.merge(acc, warp_acc[ty * warps_per_row + w]);
    }
  }
  return acc;
}

// Row kernel of Note [CUDA reduction paths]. blockDim = (TX, TY): TY
// outputs per block, TX threads per output; blockIdx.y = split.
template <typename Op, bool kVec>
__global__ void __launch_bounds__(kRowThreads)
    reduce_rows_kernel(const char* in, char* out, typename Op::Acc* partial, ReduceGeom g, Op op) {
  using T = typename Op::In;
  using Acc = typename Op::Acc;
  constexpr int V = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x;
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + ty;
  const bool valid = o < g.num_out;
  Acc acc = op.init();
  if (valid) {
    std::int64_t kept_off[2];
    iter_offsets<std::int64_t, 2>(g.kept, o, kept_off);
    const char* base = in + kept_off[0];
    const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
    const std::int64_t end = begin + g.chunk < g.num_red ? begin + g.chunk : g.num_red;
    if constexpr (kVec) {
      // Dense and aligned (checked on the host; chunk % V == 0).
      const T* row = reinterpret_cast<const T*>(base);
      if (g.interleave) {
        // One output, reduced by all splits together: split s takes packs
        // s*TX + tx, then every gridDim.y*TX packs after it, so that the
        // blocks sweep the input side by side and finish together (no tail
        // of blocks still reading their own far-away chunk).
        const std::int64_t packs = g.num_red / V;
        const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * TX;
        constexpr int kUnroll = 4;
        Acc part[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) part[u] = op.init();
        std::int64_t p = static_cast<std::int64_t>(blockIdx.y) * TX + tx;
        for (; p + (kUnroll - 1) * step < packs; p += kUnroll * step) {
          Pack<T, V> v[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) v[u] = reinterpret_cast<const Pack<T, V>*>(row)[p + u * step];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
            for (int j = 0; j < V; ++j) part[u] = op.combine(part[u], v[u].v[j]);
          }
        }
        for (; p < packs; p += step) {
          const Pack<T, V> v = reinterpret_cast<const Pack<T, V>*>(row)[p];
#pragma unroll
          for (int j = 0; j < V; ++j) part[0] = op.combine(part[0], v.v[j]);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc = op.merge(acc, part[u]);
        if (blockIdx.y == 0) {
          for (std::int64_t r = packs * V + tx; r < g.num_red; r += TX) acc = op.combine(acc, row[r]);
        }
      } else {
      const std::int64_t vend = begin + (end - begin) / V * V;
      const std::int64_t stride = static_cast<std::int64_t>(TX) * V;
      // kUnroll packs in flight per thread, each into its own accumulator
      // (independent loads and independent add chains).
      constexpr int kUnroll = 4;
      Acc part[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) part[u] = op.init();
      std::int64_t r = begin + static_cast<std::int64_t>(tx) * V;
      for (; r + (kUnroll - 1) * stride < vend; r += kUnroll * stride) {
        Pack<T, V> p[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) p[u] = *reinterpret_cast<const Pack<T, V>*>(row + r + u * stride);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int j = 0; j < V; ++j) part[u] = op.combine(part[u], p[u].v[j]);
        }
      }
      for (; r < vend; r += stride) {
        const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(row + r);
#pragma unroll
        for (int j = 0; j < V; ++j) part[0] = op.combine(part[0], p.v[j]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc = op.merge(acc, part[u]);
      for (std::int64_t r = vend + tx; r < end; r += TX) acc = op.combine(acc, row[r]);
      }
    } else {
      for (std::int64_t r = begin + tx; r < end; r += TX) {
        acc = op.combine(acc, *reinterpret_cast<const T*>(base + offset0<1>(g.red, r)));
      }
    }
  }
  acc = merge_row_lanes(acc, op);
  if (tx == 0 && valid) {
    if (g.splits > 1) {
      partial[o * g.splits + blockIdx.y] = acc;
    } else {
      std::int64_t kept_off[2];
      iter_offsets<std::int64_t, 2>(g.kept, o, kept_off);
      store_result<typename Op::Out>(out + kept_off[1], g.out_is_int64, op.finish(acc, g.num_red));
    }
  }
  if (g.done == nullptr) return;
  // Note [One-pass full reductions] (one output: o == 0, ty == 0).
  __shared__ bool last;
  if (tx == 0) {
    __threadfence();  // this block's partial before its count
    last = atomicAdd(g.done, 1u) == static_cast<unsigned>(g.splits) - 1u;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // every counted partial is visible after the count
  const volatile Acc* parts = partial;  // volatile: not from L1, which may hold nothing stale but is not coherent
  Acc total = op.init();
  for (int s = tx; s < g.splits; s += TX) total = op.merge(total, static_cast<Acc>(parts[s]));
  total = merge_row_lanes(total, op);
  if (tx == 0) {
    std::int64_t kept_off[2];
    iter_offsets<std::int64_t, 2>(g.kept, 0, kept_off);
    store_result<typename Op::Out>(out + kept_off[1], g.out_is_int64, op.finish(total, g.num_red));
    *g.done = 0;  // ready for the next reduction on this stream
  }
}

constexpr int kColX = 32, kColY = 8;

// Column kernel of Note [CUDA reduction paths]: blockDim = (32, 8); each
// thread owns V adjacent outputs of the dense innermost kept dim.
template <typename Op, int V>
__global__ void __launch_bounds__(kColX* kColY)
    reduce_cols_kernel(const char* in, char* out, typename Op::Acc* partial, ReduceGeom g, Op op,
                       std::int64_t inner, std::int64_t tiles) {
  using T = typename Op::In;
  using Acc = typename Op::Acc;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t outer = blockIdx.x / tiles;
  const std::int64_t j0 = (blockIdx.x % tiles) * (kColX * V) + static_cast<std::int64_t>(tx) * V;
  const std::int64_t o0 = outer * inner + j0;  // linear index of the first output
  Acc acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = op.init();
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t end = begin + g.chunk < g.num_red ? begin + g.chunk : g.num_red;
  if (j0 < inner) {
    std::int64_t kept_off[2];
    iter_offsets<std::int64_t, 2>(g.kept, o0, kept_off);
    const char* base = in + kept_off[0];
    // kUnroll reduced rows in flight per thread (loads first, then adds).
    constexpr int kUnroll = 4;
    std::int64_t r = begin + ty;
    for (; r + (kUnroll - 1) * kColY < end; r += kUnroll * kColY) {
      Pack<T, V> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        v[u] = *reinterpret_cast<const Pack<T, V>*>(base + offset0<1>(g.red, r + u * kColY));  // inner % V == 0
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = op.combine(acc[k], v[u].v[k]);
      }
    }
    for (; r < end; r += kColY) {
      const Pack<T, V> v = *reinterpret_cast<const Pack<T, V>*>(base + offset0<1>(g.red, r));
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = op.combine(acc[k], v.v[k]);
    }
  }
  __shared__ Acc sm[kColY][kColX * V];
#pragma unroll
  for (int k = 0; k < V; ++k) sm[ty][tx * V + k] = acc[k];
  __syncthreads();
  if (ty == 0 && j0 < inner) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      Acc a = sm[0][tx * V + k];
      for (int y = 1; y < kColY; ++y) a = op.merge(a, sm[y][tx * V + k]);
      const std::int64_t o = o0 + k;
      if (g.splits > 1) {
        partial[o * g.splits + blockIdx.y] = a;
      } else {
        std::int64_t kept_off[2];
        iter_offsets<std::int64_t, 2>(g.kept, o, kept_off);
        store_result<typename Op::Out>(out + kept_off[1], g.out_is_int64, op.finish(a, g.num_red));
      }
    }
  }
}

// Merges the `splits` partials of each output in split order (one warp per
// output; 8 outputs per block) and stores the result.
template <typename Op>
__global__ void __launch_bounds__(256) reduce_partials_kernel(const typename Op::Acc* partial, char* out, ReduceGeom g,
                                                              Op op) {
  using T = typename Op::In;
  using Acc = typename Op::Acc;
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * 8 + threadIdx.y;
  if (o >= g.num_out) return;  // whole warps leave together
  const int lane = threadIdx.x;
  Acc acc = op.init();
  for (int s = lane; s < g.splits; s += 32) acc = op.merge(acc, partial[o * g.splits + s]);
  for (int d = 16; d > 0; d >>= 1) acc = op.merge(acc, shfl_down(acc, d));
  if (lane == 0) {
    std::int64_t kept_off[2];
    iter_offsets<std::int64_t, 2>(g.kept, o, kept_off);
    store_result<typename Op::Out>(out + kept_off[1], g.out_is_int64, op.finish(acc, g.num_red));
  }
}

/// Queues the reduction `op` of `in` into `out` (keepdim layout).
template <typename Op>
void launch_reduce(const LaunchScope& scope, int device, const StridedOperand& out, const StridedOperand& in, Op op) {
  using T = typename Op::In;
  using Acc = typename Op::Acc;
  const auto isz = static_cast<std::int64_t>(sizeof(T));
  ReduceGeom g;
  g.out_is_int64 = out.dtype == DType::kInt64 && in.dtype != DType::kInt64;
  // Split dims (Note [CUDA reduction paths]).
  std::int64_t ksz[kMaxDims] = {}, kin[kMaxDims] = {}, kout[kMaxDims] = {}, rsz[kMaxDims] = {}, rin[kMaxDims] = {};
  int kn = 0, rn = 0;
  for (int d = 0; d < in.ndim; ++d) {
    if (in.sizes[d] == 1) continue;
    if (out.sizes[d] == 1) {
      rsz[rn] = in.sizes[d];
      rin[rn++] = in.strides[d];
    } else {
      ksz[kn] = in.sizes[d];
      kin[kn] = in.strides[d];
      kout[kn++] = out.strides[d];
    }
  }
  {
    const std::int64_t* st[2] = {kin, kout};
    const std::size_t is[2] = {sizeof(T), dtype_size(out.dtype)};
    g.kept = make_iter<2>(kn, ksz, st, is);
    const std::int64_t* rs[1] = {rin};
    const std::size_t ris[1] = {sizeof(T)};
    g.red = make_iter<1>(rn, rsz, rs, ris);
  }
  g.num_out = g.kept.numel();
  g.num_red = rn == 0 ? 1 : g.red.numel();
  if (g.num_out == 0) return;
  if (rn == 0) {  // nothing reduced: numel 1 per output
    g.red.ndim = 1;
    g.red.sizes[0] = 1;
    g.red.strides[0][0] = 0;
  }
  const int sms = sm_count();
  const char* in_ptr = static_cast<const char*>(in.data);
  char* out_ptr = static_cast<char*>(out.data);

  // Column kernel?
  const int kin_inner = g.kept.ndim - 1;
  const bool columns = kn > 0 && g.num_red > 1 && g.kept.strides[0][kin_inner] == isz;
  std::int64_t blocks_x = 0;
  int vec = 1;
  std::int64_t inner = 0, tiles = 0;
  constexpr int kColV = (16 / sizeof(T)) < (32 / sizeof(Acc)) ? static_cast<int>(16 / sizeof(T)) : static_cast<int>(32 / sizeof(Acc));
  constexpr int kColVec = kColV < 1 ? 1 : kColV;
  constexpr std::int64_t V = 16 / sizeof(T);
  int tx = 32, ty = 8;
  bool row_vec = false;
  int per_sm = 1;  // resident blocks per SM of the chosen kernel
  if (columns) {
    inner = g.kept.sizes[kin_inner];
    bool vec_ok = kColVec > 1 && inner % kColVec == 0 && aligned_to(in_ptr, kColVec * sizeof(T));
    for (int d = 0; d < g.kept.ndim - 1 && vec_ok; ++d) vec_ok = g.kept.strides[0][d] % (kColVec * isz) == 0;
    for (int d = 0; d < g.red.ndim && vec_ok; ++d) vec_ok = g.red.strides[0][d] % (kColVec * isz) == 0;
    vec = vec_ok ? kColVec : 1;
    tiles = (inner + kColX * vec - 1) / (kColX * vec);
    blocks_x = (g.num_out / inner) * tiles;
    per_sm = vec > 1 ? blocks_per_sm<reduce_cols_kernel<Op, kColVec>>() : blocks_per_sm<reduce_cols_kernel<Op, 1>>();
  } else {
    tx = g.num_red >= 2048 ? 256 : g.num_red >= 512 ? 128 : g.num_red >= 128 ? 64 : 32;
    ty = kRowThreads / tx;
    blocks_x = (g.num_out + ty - 1) / ty;
    row_vec = g.red.ndim == 1 && g.red.strides[0][0] == isz && aligned_to(in_ptr, V * sizeof(T));
    for (int d = 0; d < g.kept.ndim && row_vec; ++d) row_vec = g.kept.strides[0][d] % (V * isz) == 0;
    per_sm = row_vec ? blocks_per_sm<reduce_rows_kernel<Op, true>>() : blocks_per_sm<reduce_rows_kernel<Op, false>>();
  }
  // Splits of the reduced range when the outputs alone do not fill the GPU:
  // as many as fit in ONE wave of resident blocks (rounding up would leave
  // a second, nearly empty wave as long as the first).
  const std::int64_t wave = static_cast<std::int64_t>(sms) * per_sm;
  const std::int64_t min_chunk = columns ? 64 : static_cast<std::int64_t>(tx) * 16;
  std::int64_t splits = 1;
  if (blocks_x < wave && g.num_red > min_chunk) {
    splits = std::min<std::int64_t>(std::max<std::int64_t>(1, wave / blocks_x), (g.num_red + min_chunk - 1) / min_chunk);
    splits = std::min(splits, kMaxGridYZ);  // splits go in gridDim.y
  }
  g.chunk = (g.num_red + splits - 1) / splits;
  if (row_vec) g.chunk = (g.chunk + V - 1) / V * V;
  if (g.chunk < 1) g.chunk = 1;
  splits = (g.num_red + g.chunk - 1) / g.chunk;
  if (splits < 1) splits = 1;
  g.splits = static_cast<int>(splits);
  if (blocks_x > 0x7fffffff) GENESIS_THROW(InvalidArgumentError, "reduce: too many outputs for one launch (", g.num_out, ")");

  Acc* partial = nullptr;
  memory::CachingAllocator& alloc = memory::cuda_allocator(device);
  if (g.splits > 1) {
    partial = static_cast<Acc*>(alloc.allocate(static_cast<std::size_t>(g.num_out * g.splits) * sizeof(Acc), scope.stream_id()));
  }
  if (!columns && g.num_out == 1 && tx == kRowThreads && g.splits > 1) {
    g.done = reduce_done_counter(device, scope.stream_id());
    // Interleaved splits: a 1 GiB float32 sum runs ahead of PyTorch with
    // them and behind it with one contiguous chunk per split (figures:
    // bench/HISTORY.md, "GPU index checks without a host wait, one-pass
    // sums").
    g.interleave = g.done != nullptr && row_vec;
  }
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(g.splits));
  cudaError_t err = cudaSuccess;
  if (columns) {
    const dim3 block(kColX, kColY);
    if (vec > 1) {
      reduce_cols_kernel<Op, kColVec><<<grid, block, 0, scope.stream()>>>(in_ptr, out_ptr, partial, g, op, inner, tiles);
    } else {
      reduce_cols_kernel<Op, 1><<<grid, block, 0, scope.stream()>>>(in_ptr, out_ptr, partial, g, op, inner, tiles);
    }
  } else {
    const dim3 block(static_cast<unsigned>(tx), static_cast<unsigned>(ty));
    if (row_vec) {
      reduce_rows_kernel<Op, true><<<grid, block, 0, scope.stream()>>>(in_ptr, out_ptr, partial, g, op);
    } else {
      reduce_rows_kernel<Op, false><<<grid, block, 0, scope.stream()>>>(in_ptr, out_ptr, partial, g, op);
    }
  }
  err = cudaGetLastError();
  if (err == cudaSuccess && g.splits > 1 && g.done == nullptr) {
    const auto blocks = static_cast<unsigned>((g.num_out + 7) / 8);
    reduce_partials_kernel<Op><<<blocks, dim3(32, 8), 0, scope.stream()>>>(partial, out_ptr, g, op);
    err = cudaGetLastError();
  }
  // Stream-ordered: the block is reused on this stream only after the
  // kernels queued above (caching allocator stream semantics).
  if (partial != nullptr) alloc.deallocate(partial);
  GENESIS_CUDA_CHECK(err);
}

/// The two halves of `reduce`, compiled apart (cuda_reduce_sum.cu,
/// cuda_reduce_minmax.cu) to keep each file's kernel count moderate.
void reduce_sum_family(const LaunchScope& scope, int device, ReduceOp op, const StridedOperand& out,
                       const StridedOperand& in);
void reduce_minmax_family(const LaunchScope& scope, int device, ReduceOp op, const StridedOperand& out,
                          const StridedOperand& in);

}  // namespace genesis::kernels::cuda_impl
