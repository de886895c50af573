// CUDA fill and copy (strided, with dtype cast, with a tiled transpose path).
//
// Note [CUDA copy paths]: copy picks, after coalescing dst and src
// (Note [CUDA strided iteration]):
//   1. same dtype, dst's innermost dim dense while src is dense along dst's
//      second-innermost dim (a transpose, `x.T.contiguous()`): a tiled
//      transpose through shared memory (transpose_kernel), so that both the
//      reads and the writes are coalesced;
//   2. same dtype, both dense: cudaMemcpyAsync (the copy engine path
//      PyTorch also takes; it runs at the HBM ceiling);
//   3. otherwise the element-wise engine (Note [CUDA element-wise paths]):
//      flat vectorised path when both are dense, strided path else. Same
//      dtype copies are instantiated per element size (bytes only move).
// Every element converts by genesis::kernels::cast, the CPU's rule.
#include <cstring>

#include "cuda_common.cuh"
#include "cuda_elementwise.cuh"
#include "cuda_kernels.h"

namespace genesis::kernels::cuda_impl {
namespace {

template <typename T>
struct FillF {
  T v;
  __device__ __forceinline__ T operator()() const { return v; }
};

template <typename D, typename S>
struct CastF {
  __device__ __forceinline__ D operator()(S s) const { return cast<D>(s); }
};

template <typename T>
struct SameF {
  __device__ __forceinline__ T operator()(T s) const { return s; }
};

// Tile of the transpose: kTile x kTile elements, kTile x kRows threads, each
// thread moving kTile / kRows = 16 elements per phase: 16 independent loads
// in flight per thread keep enough bytes moving to approach the copy
// bandwidth (a 32 x 32 tile with 4 per thread leaves HBM idle between tiles).
constexpr int kTile = 64;
constexpr int kRows = 4;

// dst[b][r][c] = src[b][r][c] where dst steps dst_rs bytes per r and
// sizeof(T) per c, and src steps sizeof(T) per r and src_cs bytes per c.
// One block per tile (flattened into blockIdx.x), batch in blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(kTile* kRows)
    transpose_kernel(char* dst, const char* src, std::int64_t rows, std::int64_t cols, std::int64_t dst_rs,
                     std::int64_t src_cs, std::int64_t dst_bs, std::int64_t src_bs, std::int64_t tiles_c) {
  __shared__ T tile[kTile][kTile + 1];  // +1: the column reads hit distinct banks
  const std::int64_t t = blockIdx.x;
  const std::int64_t r0 = (t / tiles_c) * kTile;
  const std::int64_t c0 = (t % tiles_c) * kTile;
  dst += blockIdx.y * dst_bs;
  src += blockIdx.y * src_bs;
  // Read: consecutive threads step along r, where src is dense.
  const std::int64_t r = r0 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const std::int64_t c = c0 + threadIdx.y + k;
    if (r < rows && c < cols) {
      tile[threadIdx.y + k][threadIdx.x] =
          *reinterpret_cast<const T*>(src + r * static_cast<std::int64_t>(sizeof(T)) + c * src_cs);
    }
  }
  __syncthreads();
  // Write: consecutive threads step along c, where dst is dense.
  const std::int64_t c = c0 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kTile; k += kRows) {
    const std::int64_t rr = r0 + threadIdx.y + k;
    if (rr < rows && c < cols) {
      *reinterpret_cast<T*>(dst + rr * dst_rs + c * static_cast<std::int64_t>(sizeof(T))) =
          tile[threadIdx.x][threadIdx.y + k];
    }
  }
}

// Path 1 of Note [CUDA copy paths]; false when it does not apply.
bool try_transpose(cudaStream_t stream, const StridedOperand& dst, const StridedOperand& src) {
  if (dst.dtype != src.dtype || src.is_scalar) return false;
  const StridedOperand* ops[] = {&dst, &src};
  const Iter<2> it = make_iter<2>(ops);
  const auto isz = static_cast<std::int64_t>(dtype_size(dst.dtype));
  if (it.ndim < 2 || it.ndim > 3) return false;
  const int r = it.ndim - 2, c = it.ndim - 1;
  if (it.strides[0][c] != isz || it.strides[1][r] != isz || it.strides[1][c] == isz) return false;
  const std::int64_t rows = it.sizes[r], cols = it.sizes[c];
  if (rows < kTile / 2 || cols < kTile / 2) return false;  // thin: the strided path is as good
  const std::int64_t batch = it.ndim == 3 ? it.sizes[0] : 1;
  const std::int64_t tiles_c = (cols + kTile - 1) / kTile, tiles_r = (rows + kTile - 1) / kTile;
  if (batch > kMaxGridYZ || tiles_c * tiles_r > kMaxGridX) return false;
  const dim3 grid(static_cast<unsigned>(tiles_c * tiles_r), static_cast<unsigned>(batch));
  const dim3 block(kTile, kRows);
  const std::int64_t dst_bs = it.ndim == 3 ? it.strides[0][0] : 0, src_bs = it.ndim == 3 ? it.strides[1][0] : 0;
  dispatch_size(static_cast<std::size_t>(isz), [&](auto tag) {
    using T = typename decltype(tag)::type;
    transpose_kernel<T><<<grid, block, 0, stream>>>(static_cast<char*>(dst.data), static_cast<const char*>(src.data),
                                                    rows, cols, it.strides[0][r], it.strides[1][c], dst_bs, src_bs,
                                                    tiles_c);
  });
  GENESIS_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace

void fill(const KernelContext& ctx, const StridedOperand& out, Scalar value) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  const StridedOperand* ops[] = {&out};
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Filled by bit pattern: one instantiation per element size.
    const T v = scalar_to<T>(value);
    using U = uint_of_size_t<sizeof(T)>;
    U bits;
    std::memcpy(&bits, &v, sizeof(T));
    launch_elementwise<U>(scope.stream(), FillF<U>{bits}, ops);
  });
}

void copy(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& src) {
  if (dst.numel() == 0) return;
  LaunchScope scope(ctx);
  if (try_transpose(scope.stream(), dst, src)) return;
  const StridedOperand* ops[] = {&dst, &src};
  if (dst.dtype == src.dtype && !src.is_scalar) {
    const Iter<2> it = make_iter<2>(ops);
    const auto isz = static_cast<std::int64_t>(dtype_size(dst.dtype));
    if (it.ndim == 1 && it.strides[0][0] == isz && it.strides[1][0] == isz) {
      GENESIS_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<std::size_t>(it.sizes[0] * isz),
                                         cudaMemcpyDeviceToDevice, scope.stream()));
      return;
    }
    dispatch_size(dtype_size(dst.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      launch_elementwise<U, U>(scope.stream(), SameF<U>{}, ops);
    });
    return;
  }
  dispatch(dst.dtype, [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch(src.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      launch_elementwise<D, S>(scope.stream(), CastF<D, S>{}, ops);
    });
  });
}

}  // namespace genesis::kernels::cuda_impl
