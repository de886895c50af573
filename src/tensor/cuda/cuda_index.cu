// CUDA gather and scatter (advanced indexing; Note [Advanced indexing] in
// genesis/tensor/index.h and the gather/scatter contracts in backend.h).
//
// Note [CUDA gather paths]: out, src (dst, values for scatter) and the index
// operands share one iteration shape and are coalesced together (Note [CUDA
// strided iteration]). Then
//   * row gather: when the innermost dim is dense in out and src and no
//     index varies along it (x[idx] picking whole rows), each row's source
//     address is computed once and the row is copied by TX threads with
//     16-byte accesses when everything is 16-byte aligned, in small blocks
//     of one row segment each;
//   * general: one element per thread-iteration, index values loaded from
//     their own strided operands, wrapped when negative.
// An index is checked where it is loaded when the tensor layer did not
// check it (IndexInfo::sink; Note [Asynchronous kernel errors]).
// Only bytes move, so kernels are instantiated per element size, except
// accumulating scatter, which adds in the dtype (atomics; 8- and 16-bit types
// through a compare-and-swap on their 32-bit word, computing exactly the
// CPU's cast<T>(C(old) + C(v))).
#include <algorithm>
#include <cstring>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::kernels::cuda_impl {
namespace {

struct IndexInfo {
  int num = 0;
  const char* ptr[kMaxDims] = {};
  std::int64_t size[kMaxDims] = {};
  std::int64_t stride[kMaxDims] = {};  // bytes in the indexed tensor
  std::int64_t dim[kMaxDims] = {};     // the indexed dim as the user numbers it (error messages)
  // Non-null: the indices were not validated on the host; the kernel checks
  // each one and reports through the device's record (Note [Asynchronous
  // kernel errors] in genesis/cuda/async_errors.h).
  cuda::AsyncErrorSink sink;
};

IndexInfo index_info(const IndexArgs& index, std::size_t itemsize, int device) {
  static_assert(kMaxDims <= cuda::kAsyncIndexSlots, "one error slot per index operand");
  IndexInfo info;
  info.num = index.num_indices;
  for (int k = 0; k < index.num_indices; ++k) {
    info.ptr[k] = static_cast<const char*>(index.indices[k].data);
    info.size[k] = index.indexed_sizes[k];
    info.stride[k] = index.indexed_strides[k] * static_cast<std::int64_t>(itemsize);
    info.dim[k] = index.report_dims != nullptr ? index.report_dims[k] : k;
  }
  if (index.unchecked) info.sink = cuda::async_error_sink(device);
  return info;
}

// Records an index out of range (the error path: never taken by valid
// input). Scalars only: taking the address of the kernel's IndexInfo for a
// call that is not inlined would make every thread copy it to local memory
// (that tripled the time of a large row gather).
__device__ __noinline__ void report_index_error(cuda::AsyncErrorRecord* r, int* host_flag, int k, long long v,
                                                long long size, long long dim) {
  if (v >= 0) atomicMax(&r->index_max[k], v);
  else atomicMin(&r->index_min[k], v);
  r->index_size[k] = size;  // every reporter writes the same values
  r->index_dim[k] = dim;
  atomicOr(&r->index_flags, 1u << k);
  __threadfence_system();  // the record before the host flag
  *reinterpret_cast<volatile int*>(host_flag) = 1;
}

// Byte offset contributed by the index operands (operands 2.. of `off`).
// Clears `ok` (and contributes nothing) for an index out of range, which is
// possible only when info.sink is set.
template <int N>
__device__ __forceinline__ std::int64_t indexed_offset(const IndexInfo& info, const std::int64_t (&off)[N], bool& ok) {
  std::int64_t r = 0;
#pragma unroll
  for (int k = 0; k < N - 2; ++k) {
    if (k < info.num) {
      std::int64_t v = *reinterpret_cast<const std::int64_t*>(info.ptr[k] + off[2 + k]);
      if (info.sink.record != nullptr && (v >= info.size[k] || v < -info.size[k])) {
        report_index_error(info.sink.record, info.sink.host_flag, k, v, info.size[k], info.dim[k]);
        ok = false;
        v = 0;
      }
      if (v < 0) v += info.size[k];
      r += v * info.stride[k];
    }
  }
  return r;
}

constexpr int kGatherUnroll = 4;
constexpr int kRowUnroll = 4;     // 16-byte loads in flight per thread in gather_rows_kernel
constexpr int kRowThreads = 128;  // threads per gather_rows_kernel block

// General gather: operands out(0), src(1), indices(2..). Each thread keeps
// kGatherUnroll independent index -> value chains in flight (an element's
// source address depends on a load of its index).
template <typename U, int N, typename Index>
__global__ void __launch_bounds__(kThreads) gather_kernel(char* out, const char* src, IndexInfo info, Iter<N> it, Index n) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x * kGatherUnroll;
  for (Index base = static_cast<Index>(blockIdx.x) * blockDim.x * kGatherUnroll + threadIdx.x; base < n; base += step) {
    U v[kGatherUnroll];
    std::int64_t to[kGatherUnroll];
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * blockDim.x;
      if (i < n) {
        std::int64_t off[N];
        iter_offsets<Index, N>(it, i, off);
        to[u] = off[0];
        bool ok = true;
        const std::int64_t from = off[1] + indexed_offset<N>(info, off, ok);
        v[u] = ok ? *reinterpret_cast<const U*>(src + from) : U{};
      }
    }
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * blockDim.x;
      if (i < n) *reinterpret_cast<U*>(out + to[u]) = v[u];
    }
  }
}

// Row gather: `outer` iterates rows (dims but the innermost); each row of
// `inner` elements of type U (a 16-byte vector when aligned) is dense in
// both out and src. Work items are (row, segment) pairs: `segs` segments of
// `seg_len` elements per row. blockDim = (TX, TY): TY items at a time per
// block; block b takes item groups b, b + gridDim.x, ... (the host launches
// one block per group).
template <typename U, int N>
__global__ void __launch_bounds__(kRowThreads) gather_rows_kernel(char* out, const char* src, IndexInfo info, Iter<N> outer,
                                                               std::int64_t items, std::int64_t segs,
                                                               std::int64_t seg_len, std::int64_t inner) {
  const std::int64_t bx = blockDim.x;
  for (std::int64_t group = blockIdx.x; group * blockDim.y < items; group += gridDim.x) {
    const std::int64_t item = group * blockDim.y + threadIdx.y;
    if (item >= items) continue;  // the last group may be partial (no block-wide sync below)
    const std::int64_t row = segs == 1 ? item : item / segs;
    const std::int64_t j0 = (item - row * segs) * seg_len;
    const std::int64_t j1 = j0 + seg_len < inner ? j0 + seg_len : inner;
    std::int64_t off[N];
    iter_offsets<std::int64_t, N>(outer, row, off);
    U* __restrict__ o = reinterpret_cast<U*>(out + off[0]);
    bool ok = true;
    const U* __restrict__ s = reinterpret_cast<const U*>(src + off[1] + indexed_offset<N>(info, off, ok));
    if (!ok) {  // an index out of range (reported): the row reads as zeros
      for (std::int64_t j = j0 + threadIdx.x; j < j1; j += bx) o[j] = U{};
      continue;
    }
    // kRowUnroll independent loads before their stores: a plain o[j] = s[j]
    // loop keeps one 16-byte load per thread in flight (the store may alias
    // the next load as far as the compiler knows), too few bytes to cover
    // HBM latency. out never overlaps src (gather contract), so __restrict__
    // holds.
    for (std::int64_t j = j0 + threadIdx.x; j < j1; j += bx * kRowUnroll) {
      U v[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (j + u * bx < j1) v[u] = s[j + u * bx];
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (j + u * bx < j1) o[j + u * bx] = v[u];
      }
    }
  }
}

// Note [Row gather of one index]: the embedding-lookup shape, out[r, :] =
// src[idx[r], :] (one index operand, the rows one dimension), is the row
// gather that matters most, and the general row kernel above pays for its
// generality there: a 64-bit division per block for the (row, segment)
// split, offsets through Iter<N>, a loop over item groups. This kernel takes
// the row from blockIdx.x and the segment from blockIdx.y, so a block's
// work before its loads is one index load, and consecutive blocks (the
// order the scheduler starts them in) read different rows: the blocks of a
// wave spread over many source rows rather than walking a few rows segment
// by segment. Each block moves kLeanRowBytes (2 KiB) of a row. PyTorch's
// vectorized_gather_kernel uses the same grid order. Rows in blockIdx.x with
// 128 threads x 16 B was the fastest shape measured, ahead of PyTorch, while
// no shape of the earlier order (segments in blockIdx.x) caught up with it;
// streaming stores and read-only loads moved it by less than the noise and
// are not used (figures: bench/HISTORY.md, "Row gather: rows in
// blockIdx.x").
constexpr int kLeanRowThreads = 128;
constexpr int kLeanRowBytes = 2048;

template <typename U>
__global__ void __launch_bounds__(kLeanRowThreads)
    gather_rows_one_index_kernel(char* __restrict__ out, const char* __restrict__ src, const char* __restrict__ idx,
                                 std::int64_t idx_stride, std::int64_t out_row_stride, std::int64_t src_row_stride,
                                 std::int64_t step, std::int64_t size, std::int64_t dim, cuda::AsyncErrorSink sink,
                                 std::int64_t rows, std::int64_t units) {
  constexpr int kUnroll = kLeanRowBytes / kLeanRowThreads / static_cast<int>(sizeof(U));
  constexpr std::int64_t kPerBlock = std::int64_t{kLeanRowThreads} * kUnroll;
  const std::int64_t segs = (units + kPerBlock - 1) / kPerBlock;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    std::int64_t v = *reinterpret_cast<const std::int64_t*>(idx + r * idx_stride);
    U* __restrict__ o = reinterpret_cast<U*>(out + r * out_row_stride);
    const bool bad = sink.record != nullptr && (v >= size || v < -size);
    if (bad && threadIdx.x == 0 && blockIdx.y == 0) report_index_error(sink.record, sink.host_flag, 0, v, size, dim);
    if (v < 0) v += size;
    const U* __restrict__ s = reinterpret_cast<const U*>(src + r * src_row_stride + v * step);
    for (std::int64_t seg = blockIdx.y; seg < segs; seg += gridDim.y) {
      const std::int64_t j = seg * kPerBlock + threadIdx.x;
      if (bad) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {  // the row reads as zeros, like the general kernels
          if (j + u * kLeanRowThreads < units) o[j + u * kLeanRowThreads] = U{};
        }
        continue;
      }
      U x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (j + u * kLeanRowThreads < units) x[u] = s[j + u * kLeanRowThreads];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (j + u * kLeanRowThreads < units) o[j + u * kLeanRowThreads] = x[u];
      }
    }
  }
}

// out[i] op= v for accumulating scatter.
template <typename T>
__device__ __forceinline__ void atomic_accumulate(char* p, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v) *reinterpret_cast<bool*>(p) = true;  // every racing writer stores the same byte
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    atomicAdd(reinterpret_cast<T*>(p), v);
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    atomicAdd(reinterpret_cast<unsigned*>(p), static_cast<unsigned>(v));  // wraps like the CPU
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    // 8/16-bit: CAS on the containing aligned 32-bit word.
    using C = compute_t<T>;
    using Bits = uint_of_size_t<sizeof(T)>;
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto* word = reinterpret_cast<unsigned*>(addr & ~std::uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(addr & 3u) * 8u;
    const unsigned mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned old = *word, assumed = 0;
    do {
      assumed = old;
      const auto cur_bits = static_cast<Bits>((assumed & mask) >> shift);
      T cur;
      memcpy(&cur, &cur_bits, sizeof(T));
      const T next = cast<T>(static_cast<C>(static_cast<C>(cur) + static_cast<C>(v)));
      Bits next_bits;
      memcpy(&next_bits, &next, sizeof(T));
      const unsigned replaced = (assumed & ~mask) | (static_cast<unsigned>(next_bits) << shift);
      old = atomicCAS(word, assumed, replaced);
    } while (old != assumed);
  }
}

// Scatter: operands dst(0), values(1), indices(2..). kAccumulate adds in T.
// `abort_flag` (unchecked indices only): set by check_indices_kernel when any
// index is out of range; then nothing at all is written, so a failed
// assignment leaves the tensor as it was.
template <typename T, bool kAccumulate, int N, typename Index>
__global__ void __launch_bounds__(kThreads) scatter_kernel(char* dst, Input<T> values, IndexInfo info, Iter<N> it, Index n,
                                                           const int* abort_flag) {
  if (abort_flag != nullptr && *reinterpret_cast<const volatile int*>(abort_flag) != 0) return;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    std::int64_t off[N];
    iter_offsets<Index, N>(it, i, off);
    bool ok = true;
    char* to = dst + off[0] + indexed_offset<N>(info, off, ok);
    if (!ok) continue;  // unreachable after check_indices_kernel; kept as the last guard
    const T v = values.at(off[1]);
    if constexpr (kAccumulate) atomic_accumulate<T>(to, v);
    else *reinterpret_cast<T*>(to) = v;
  }
}

// The first pass of a scatter through unchecked indices: loads every index
// the scatter will use, reports those out of range (indexed_offset) and
// sets *abort_flag. No host wait: the scatter that follows on the stream reads
// *abort_flag itself (Note [Asynchronous kernel errors]).
template <int N, typename Index>
__global__ void __launch_bounds__(kThreads) check_indices_kernel(IndexInfo info, Iter<N> it, Index n, int* abort_flag) {
  bool all_ok = true;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    std::int64_t off[N];
    iter_offsets<Index, N>(it, i, off);
    (void)indexed_offset<N>(info, off, all_ok);
  }
  if (!all_ok) *abort_flag = 1;
}

// Calls f(std::integral_constant<int, N>) with N = 2 + number of indices,
// rounded up to one of the instantiated operand counts.
template <typename F>
void dispatch_nops(int num_indices, F&& f) {
  if (num_indices <= 1) return f(std::integral_constant<int, 3>{});
  if (num_indices == 2) return f(std::integral_constant<int, 4>{});
  if (num_indices <= 4) return f(std::integral_constant<int, 6>{});
  return f(std::integral_constant<int, kMaxIterOperands>{});
}

template <int N>
Iter<N> index_iter(const StridedOperand& a, const StridedOperand& b, const IndexArgs& index) {
  const std::int64_t* strides[N] = {};
  std::size_t itemsize[N] = {};
  const std::int64_t zeros[kMaxDims] = {};
  strides[0] = a.strides;
  strides[1] = b.is_scalar ? zeros : b.strides;
  itemsize[0] = itemsize[1] = dtype_size(a.dtype);
  for (int k = 0; k < N - 2; ++k) {
    strides[2 + k] = k < index.num_indices ? index.indices[k].strides : zeros;
    itemsize[2 + k] = 8;
  }
  return make_iter<N>(a.ndim, a.sizes, strides, itemsize, N);
}

bool try_gather_rows(cudaStream_t stream, const StridedOperand& out, const StridedOperand& src, const IndexArgs& index,
                     const IndexInfo& info) {
  bool done = false;
  dispatch_nops(index.num_indices, [&](auto nops) {
    constexpr int N = decltype(nops)::value;
    Iter<N> it = index_iter<N>(out, src, index);
    const auto isz = static_cast<std::int64_t>(dtype_size(out.dtype));
    const int last = it.ndim - 1;
    if (it.strides[0][last] != isz || it.strides[1][last] != isz) return;
    for (int k = 2; k < N; ++k) {
      if (it.strides[k][last] != 0) return;
    }
    const std::int64_t inner = it.sizes[last];
    if (inner * isz < 64) return;  // short rows: the general kernel is as good
    // Rows iterate the other dims.
    Iter<N> outer = it;
    outer.ndim = it.ndim - 1;
    if (outer.ndim == 0) {
      outer.ndim = 1;
      outer.sizes[0] = 1;
      for (int k = 0; k < N; ++k) outer.strides[k][0] = 0;
    }
    const std::int64_t rows = outer.numel();
    // 16-byte path when every row start and the row length are 16-byte aligned.
    bool vec = (inner * isz) % 16 == 0 && aligned_to(out.data, 16) && aligned_to(src.data, 16);
    for (int d = 0; d < outer.ndim && vec; ++d) vec = outer.strides[0][d] % 16 == 0 && outer.strides[1][d] % 16 == 0;
    for (int k = 0; k < info.num && vec; ++k) vec = info.stride[k] % 16 == 0;
    const std::int64_t units = vec ? inner * isz / 16 : inner;
    if constexpr (N == 3) {
      // One index operand over one row dimension: Note [Row gather of one index].
      const std::int64_t per_block = kLeanRowBytes / (vec ? 16 : isz);
      const std::int64_t segs = (units + per_block - 1) / per_block;
      if (info.num == 1 && outer.ndim == 1) {
        const dim3 grid(static_cast<unsigned>(std::min(rows, kMaxGridX)),
                        static_cast<unsigned>(std::min(segs, kMaxGridYZ)));
        auto* o = static_cast<char*>(out.data);
        const auto* s = static_cast<const char*>(src.data);
        auto launch = [&](auto tag) {
          using U = typename decltype(tag)::type;
          gather_rows_one_index_kernel<U><<<grid, kLeanRowThreads, 0, stream>>>(
              o, s, info.ptr[0], outer.strides[2][0], outer.strides[0][0], outer.strides[1][0], info.stride[0],
              info.size[0], info.dim[0], info.sink, rows, units);
        };
        if (vec) {
          launch(TypeTag<uint4>{});
        } else {
          dispatch_size(static_cast<std::size_t>(isz), launch);
        }
        GENESIS_CUDA_CHECK_LAUNCH();
        done = true;
        return;
      }
    }
    // Small blocks, each one row segment of kRowUnroll packs per thread
    // (all loads in flight before any store), many of them: the block
    // scheduler keeps every SM busy to the end. On 8192 rows of 32 KiB,
    // 128 threads x 4 packs was the fastest of the shapes tried: a block per
    // whole row, one wave of persistent blocks, fewer packs per thread,
    // streaming stores and the Hopper bulk-copy engine (cp.async.bulk
    // through shared memory) were all slower (figures: bench/HISTORY.md,
    // "GPU index checks without a host wait, one-pass sums").
    // Short rows: TY rows per block.
    const int tx = units >= kRowThreads ? kRowThreads : units >= 64 ? 64 : 32;
    const int ty = kRowThreads / tx;
    const std::int64_t seg_len = static_cast<std::int64_t>(tx) * kRowUnroll;
    const std::int64_t segs = (units + seg_len - 1) / seg_len;
    const std::int64_t items = rows * segs;
    const std::int64_t blocks = (items + ty - 1) / ty;
    if (blocks > 0x7fffffff) return;
    const dim3 grid(static_cast<unsigned>(blocks)), block(static_cast<unsigned>(tx), static_cast<unsigned>(ty));
    auto* o = static_cast<char*>(out.data);
    const auto* s = static_cast<const char*>(src.data);
    if (vec) {
      gather_rows_kernel<uint4, N><<<grid, block, 0, stream>>>(o, s, info, outer, items, segs, seg_len, units);
    } else {
      dispatch_size(static_cast<std::size_t>(isz), [&](auto tag) {
        using U = typename decltype(tag)::type;
        gather_rows_kernel<U, N><<<grid, block, 0, stream>>>(o, s, info, outer, items, segs, seg_len, units);
      });
    }
    GENESIS_CUDA_CHECK_LAUNCH();
    done = true;
  });
  return done;
}

}  // namespace

void gather(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src, const IndexArgs& index) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  LaunchScope scope(ctx);
  const IndexInfo info = index_info(index, dtype_size(out.dtype), ctx.device.index());
  if (try_gather_rows(scope.stream(), out, src, index, info)) return;
  dispatch_nops(index.num_indices, [&](auto nops) {
    constexpr int N = decltype(nops)::value;
    const Iter<N> it = index_iter<N>(out, src, index);
    dispatch_size(dtype_size(out.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      auto* o = static_cast<char*>(out.data);
      const auto* s = static_cast<const char*>(src.data);
      const std::int64_t items = (n + kGatherUnroll - 1) / kGatherUnroll;
      if (fits_int32(n)) {
        const unsigned grid = grid_for(items, blocks_per_sm<gather_kernel<U, N, std::uint32_t>>());
        gather_kernel<U, N, std::uint32_t><<<grid, kThreads, 0, scope.stream()>>>(o, s, info, it, static_cast<std::uint32_t>(n));
      } else {
        const unsigned grid = grid_for(items, blocks_per_sm<gather_kernel<U, N, std::uint64_t>>());
        gather_kernel<U, N, std::uint64_t><<<grid, kThreads, 0, scope.stream()>>>(o, s, info, it, static_cast<std::uint64_t>(n));
      }
    });
  });
  GENESIS_CUDA_CHECK_LAUNCH();
}

void scatter(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& values, const IndexArgs& index,
             bool accumulate) {
  const std::int64_t n = dst.numel();
  if (n == 0) return;
  LaunchScope scope(ctx);
  const IndexInfo info = index_info(index, dtype_size(dst.dtype), ctx.device.index());
  // Unchecked indices: a checking pass first (no write may happen if any
  // index is bad); its flag lives in a stream-ordered scratch block.
  memory::CachingAllocator* alloc = nullptr;
  int* abort_flag = nullptr;
  if (info.sink.record != nullptr) {
    alloc = &memory::cuda_allocator(ctx.device.index());
    abort_flag = static_cast<int*>(alloc->allocate(sizeof(int), scope.stream_id()));
  }
  struct Release {
    memory::CachingAllocator* alloc;
    int* p;
    ~Release() {
      if (p != nullptr) alloc->deallocate(p);  // stream-ordered: after the kernels queued below
    }
  } release{alloc, abort_flag};
  dispatch_nops(index.num_indices, [&](auto nops) {
    constexpr int N = decltype(nops)::value;
    const Iter<N> it = index_iter<N>(dst, values, index);
    auto* d = static_cast<char*>(dst.data);
    const unsigned grid = grid_for(n);
    if (abort_flag != nullptr) {
      GENESIS_CUDA_CHECK(cudaMemsetAsync(abort_flag, 0, sizeof(int), scope.stream()));
      if (fits_int32(n)) {
        check_indices_kernel<N, std::uint32_t><<<grid, kThreads, 0, scope.stream()>>>(info, it, static_cast<std::uint32_t>(n), abort_flag);
      } else {
        check_indices_kernel<N, std::uint64_t><<<grid, kThreads, 0, scope.stream()>>>(info, it, static_cast<std::uint64_t>(n), abort_flag);
      }
      GENESIS_CUDA_CHECK_LAUNCH();
    }
    if (!accumulate) {
      // Plain writes move bits: per element size; a constant value is
      // converted in the dtype first.
      dispatch(dst.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using U = uint_of_size_t<sizeof(T)>;
        Input<U> in;
        if (values.is_scalar) {
          const T v = scalar_to<T>(values.scalar);
          in.is_const = true;
          std::memcpy(&in.value, &v, sizeof(T));
        } else {
          in.ptr = static_cast<const char*>(values.data);
        }
        if (fits_int32(n)) {
          scatter_kernel<U, false, N, std::uint32_t><<<grid, kThreads, 0, scope.stream()>>>(d, in, info, it, static_cast<std::uint32_t>(n), abort_flag);
        } else {
          scatter_kernel<U, false, N, std::uint64_t><<<grid, kThreads, 0, scope.stream()>>>(d, in, info, it, static_cast<std::uint64_t>(n), abort_flag);
        }
      });
    } else {
      dispatch(dst.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const Input<T> in = Input<T>::make(values);
        if (fits_int32(n)) {
          scatter_kernel<T, true, N, std::uint32_t><<<grid, kThreads, 0, scope.stream()>>>(d, in, info, it, static_cast<std::uint32_t>(n), abort_flag);
        } else {
          scatter_kernel<T, true, N, std::uint64_t><<<grid, kThreads, 0, scope.stream()>>>(d, in, info, it, static_cast<std::uint64_t>(n), abort_flag);
        }
      });
    }
  });
  GENESIS_CUDA_CHECK_LAUNCH();
}

}  // namespace genesis::kernels::cuda_impl
