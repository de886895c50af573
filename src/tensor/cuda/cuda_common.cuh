// Shared machinery of the CUDA kernels (src/tensor/cuda/*.cu): dtype
// dispatch (genesis/core/dtype_dispatch.h, shared with the CPU), stream resolution,
// launch checks, dimension coalescing and the strided offset calculator.
// Device code; included by .cu files only.
//
// Note [CUDA strided iteration]: an N-operand iteration is first coalesced
// on the host exactly like the CPU loop (Note [CPU strided loop]): size-1
// dims vanish and adjacent dims merge when every operand steps through them
// as one, so a contiguous tensor becomes one dimension of unit stride and a
// kernel can tell "all operands contiguous" from ndim == 1. Strides are kept
// in BYTES per operand (operands of one call may differ in dtype). On the
// device, element i is split into coordinates by repeated division, in
// 32-bit arithmetic when the element count fits (integer division by a
// runtime divisor is several times cheaper in 32 bits), else in 64 bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/tensor/backend.h"
#include "genesis/core/cast.h"
#include "genesis/core/dtype_dispatch.h"

namespace genesis::kernels::cuda_impl {

/// Hardware limits of a launch grid (compute capability 3.0 and later): x
/// up to 2^31 - 1 blocks, y and z up to 65535. Kernels that put more work
/// in a dimension loop over it (grid-stride) or take another path.
constexpr std::int64_t kMaxGridX = 0x7fffffff;
constexpr std::int64_t kMaxGridYZ = 65535;

/// Makes ctx.device current for the scope and resolves kCurrentStream (~0)
/// to the calling thread's current stream of that device.
class LaunchScope {
 public:
  explicit LaunchScope(const KernelContext& ctx) : guard_(ctx.device.index()) {
    stream_ = ctx.stream == ~memory::StreamId{0}
                  ? reinterpret_cast<cudaStream_t>(cuda::current_stream(ctx.device.index()).id())
                  : reinterpret_cast<cudaStream_t>(ctx.stream);
  }
  cudaStream_t stream() const noexcept { return stream_; }
  memory::StreamId stream_id() const noexcept { return reinterpret_cast<memory::StreamId>(stream_); }

 private:
  cuda::DeviceGuard guard_;
  cudaStream_t stream_ = nullptr;
};

/// Checks the launch that was just queued (configuration errors show up
/// here; faults inside the kernel surface at the next synchronisation).
#define GENESIS_CUDA_CHECK_LAUNCH() GENESIS_CUDA_CHECK(cudaGetLastError())

inline constexpr int kThreads = 256;

inline int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n;
  }();
  return sms;
}

/// Resident blocks per SM of a kernel launched with `threads` threads
/// (queried once per kernel; 1 if the query fails).
template <auto Kernel, int kBlockThreads = 256>
int blocks_per_sm() {
  static const int n = [] {
    int v = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, Kernel, kBlockThreads, 0) != cudaSuccess || v < 1) {
      (void)cudaGetLastError();
      v = 1;
    }
    return v;
  }();
  return n;
}

/// Blocks for a grid-stride kernel over `work_items` items of `threads`
/// each: never more than the work needs, and at most one full wave of
/// resident blocks (`per_sm` per SM): every block then loops over an equal
/// share, and no second, partly filled wave leaves the GPU half idle.
inline unsigned grid_for(std::int64_t work_items, int per_sm = 8, int threads = kThreads) {
  const std::int64_t max_blocks = static_cast<std::int64_t>(sm_count()) * per_sm;
  const std::int64_t need = (work_items + threads - 1) / threads;
  if (need < 1) return 1;
  return static_cast<unsigned>(need < max_blocks ? need : max_blocks);
}

/// Most operands of one iteration: out, src and up to kMaxDims indices.
inline constexpr int kMaxIterOperands = kMaxDims + 2;

/// A coalesced N-operand iteration (Note [CUDA strided iteration]).
/// Trivially copyable: passed to kernels by value.
template <int N>
struct Iter {
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};  // bytes

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  /// True when every operand has unit element stride (or stride 0) in the
  /// single remaining dimension: the contiguous fast path applies.
  bool is_flat() const noexcept { return ndim == 1; }
};

/// Coalesces operands that all have `ndim`/`sizes` (element strides in
/// `strides[i]`, element sizes `itemsize[i]`) into an Iter<N>.
template <int N>
Iter<N> make_iter(int ndim, const std::int64_t* sizes, const std::int64_t* const* strides,
                  const std::size_t* itemsize, int nops = N) {
  Iter<N> it;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 1) continue;
    if (sizes[d] == 0) {
      it.ndim = 1;
      it.sizes[0] = 0;
      return it;
    }
    if (it.ndim > 0) {
      bool merge = true;
      for (int i = 0; i < nops && merge; ++i) {
        merge = it.strides[i][it.ndim - 1] == strides[i][d] * static_cast<std::int64_t>(itemsize[i]) * sizes[d];
      }
      if (merge) {
        it.sizes[it.ndim - 1] *= sizes[d];
        for (int i = 0; i < nops; ++i) it.strides[i][it.ndim - 1] = strides[i][d] * static_cast<std::int64_t>(itemsize[i]);
        continue;
      }
    }
    it.sizes[it.ndim] = sizes[d];
    for (int i = 0; i < nops; ++i) it.strides[i][it.ndim] = strides[i][d] * static_cast<std::int64_t>(itemsize[i]);
    ++it.ndim;
  }
  if (it.ndim == 0) {
    it.ndim = 1;
    it.sizes[0] = 1;
  }
  return it;
}

/// Iteration over StridedOperands of one shape (ops[0]'s sizes).
template <int N>
Iter<N> make_iter(const StridedOperand* const* ops) {
  const std::int64_t* strides[N];
  std::size_t itemsize[N];
  for (int i = 0; i < N; ++i) {
    strides[i] = ops[i]->strides;
    itemsize[i] = dtype_size(ops[i]->dtype);
  }
  return make_iter<N>(ops[0]->ndim, ops[0]->sizes, strides, itemsize);
}

/// Byte offsets of element `linear` for each operand.
template <typename Index, int N>
__device__ __forceinline__ void iter_offsets(const Iter<N>& it, Index linear, std::int64_t (&off)[N]) {
  if (it.ndim == 1) {  // no division for a single dimension
#pragma unroll
    for (int i = 0; i < N; ++i) off[i] = static_cast<std::int64_t>(linear) * it.strides[i][0];
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) off[i] = 0;
  for (int d = it.ndim - 1; d > 0; --d) {
    const Index size = static_cast<Index>(it.sizes[d]);
    const Index q = linear / size;
    const Index r = linear - q * size;
    linear = q;
#pragma unroll
    for (int i = 0; i < N; ++i) off[i] += static_cast<std::int64_t>(r) * it.strides[i][d];
  }
  // The outermost coordinate is what is left: no division.
#pragma unroll
  for (int i = 0; i < N; ++i) off[i] += static_cast<std::int64_t>(linear) * it.strides[i][0];
}

/// True when the byte extent of an iteration fits 32-bit linear indices.
inline bool fits_int32(std::int64_t numel) { return numel <= 0x7fffffff; }

/// A value read as T from an input operand that may be a broadcast constant
/// (is_scalar). The constant is converted on the host with the same cast
/// rules as the CPU (scalar_to).
template <typename T>
struct Input {
  const char* ptr = nullptr;
  bool is_const = false;
  T value{};

  static Input make(const StridedOperand& op) {
    Input in;
    if (op.is_scalar) {
      in.is_const = true;
      in.value = scalar_to<T>(op.scalar);
    } else {
      in.ptr = static_cast<const char*>(op.data);
    }
    return in;
  }
  __device__ __forceinline__ T at(std::int64_t byte_off) const {
    return is_const ? value : *reinterpret_cast<const T*>(ptr + byte_off);
  }
};

/// Power-of-two sized aligned group of elements for 16-byte (or narrower)
/// vector accesses.
template <typename T, int V>
struct alignas((sizeof(T) * V) < 16 ? sizeof(T) * V : 16) Pack {
  T v[V];
};

template <typename T, int V>
inline constexpr std::size_t kPackAlign = alignof(Pack<T, V>);

inline bool aligned_to(const void* p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) % a) == 0; }

}  // namespace genesis::kernels::cuda_impl
