// CUDA mask compaction (the nonzero entry): the coordinates of every true
// element of a bool mask, in row-major order, with CUB's DeviceSelect.
//
// The selection runs over the linear indices 0..numel-1 (a counting
// iterator) flagged by the mask read through its strides (a transform
// iterator: no copy of a strided mask), and writes through a tabulate
// output iterator that turns selected linear index number r straight into
// row r of the [count, ndim] int64 output: one pass over the mask, no
// intermediate index buffer. The count is known (out.sizes[0], computed by
// the tensor layer beforehand), so nothing here waits for the device; CUB's
// own count goes to a scratch word. Temporary memory comes from Genesis's
// caching allocator on the stream and is released right after the call is
// queued (stream-ordered reuse).
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::kernels::cuda_impl {
namespace {

struct MaskShape {
  int ndim = 0;
  bool contiguous = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};  // elements
};

// Flag of linear index i: the mask element at its coordinates.
struct MaskFlag {
  const bool* mask;
  MaskShape shape;
  __device__ bool operator()(std::int64_t i) const {
    if (shape.contiguous) return mask[i];
    std::int64_t off = 0;
    for (int d = shape.ndim - 1; d >= 0; --d) {
      const std::int64_t q = i / shape.sizes[d];
      off += (i - q * shape.sizes[d]) * shape.strides[d];
      i = q;
    }
    return mask[off];
  }
};

// Writes the coordinates of linear index `lin` as output row `r`.
struct WriteCoords {
  std::int64_t* out;
  MaskShape shape;
  __device__ void operator()(std::int64_t r, std::int64_t lin) const {
    const int nd = shape.ndim;
    std::int64_t* row = out + r * nd;
    for (int d = nd - 1; d >= 0; --d) {
      const std::int64_t q = lin / shape.sizes[d];
      row[d] = lin - q * shape.sizes[d];
      lin = q;
    }
  }
};

}  // namespace

void nonzero(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& mask) {
  const std::int64_t total = mask.numel();
  const std::int64_t count = out.sizes[0];
  if (total == 0 || count == 0 || mask.ndim == 0) return;  // ndim 0: rows of zero coordinates, nothing to write
  LaunchScope scope(ctx);
  MaskShape shape;
  shape.ndim = mask.ndim;
  std::int64_t expected = 1;
  shape.contiguous = true;
  for (int d = mask.ndim - 1; d >= 0; --d) {
    shape.sizes[d] = mask.sizes[d];
    shape.strides[d] = mask.strides[d];
    if (mask.sizes[d] != 1 && mask.strides[d] != expected) shape.contiguous = false;
    expected *= mask.sizes[d];
  }
  const thrust::counting_iterator<std::int64_t> items(0);
  const auto flags = thrust::make_transform_iterator(items, MaskFlag{static_cast<const bool*>(mask.data), shape});
  const auto dest = thrust::make_tabulate_output_iterator(WriteCoords{static_cast<std::int64_t*>(out.data), shape});

  memory::CachingAllocator& alloc = memory::cuda_allocator(ctx.device.index());
  std::size_t temp_bytes = 0;
  GENESIS_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, items, flags, dest,
                                                static_cast<std::int64_t*>(nullptr), total, scope.stream()));
  // One block: CUB's temporary storage, then the selected-count word.
  const std::size_t count_at = (temp_bytes + 255) / 256 * 256;
  char* scratch = static_cast<char*>(alloc.allocate(count_at + sizeof(std::int64_t), scope.stream_id()));
  const cudaError_t err = cub::DeviceSelect::Flagged(scratch, temp_bytes, items, flags, dest,
                                                     reinterpret_cast<std::int64_t*>(scratch + count_at), total,
                                                     scope.stream());
  alloc.deallocate(scratch);  // stream-ordered: reused on this stream only after the selection
  GENESIS_CUDA_CHECK(err);
  GENESIS_CUDA_CHECK_LAUNCH();
}

// Fused mask selection (the masked_select entry, contract in backend.h):
//   * row == 1 (a mask of src's full shape): one CUB DeviceSelect::Flagged
//     pass over the elements, moved as unsigned integers of their size;
//   * row > 1 (a mask over leading dims selecting whole rows): an exclusive
//     scan of the mask gives each selected row its output position, then
//     masked_rows_kernel copies the selected rows, TY rows per block and TX
//     threads per row, with 16-byte accesses when everything is aligned.
// The count is known beforehand (out.sizes[0]), so nothing here waits for
// the device: CUB's own selected-count goes to a scratch word.
namespace {

struct BoolToInt64 {
  __device__ std::int64_t operator()(bool b) const { return b ? 1 : 0; }
};

constexpr int kRowUnroll = 4;  // 16-byte loads in flight per thread

template <typename U>
__global__ void __launch_bounds__(kThreads) masked_rows_kernel(U* __restrict__ out, const U* __restrict__ src,
                                                              const bool* __restrict__ mask,
                                                              const std::int64_t* __restrict__ pos, std::int64_t n,
                                                              std::int64_t units) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.y;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < n; r += stride) {
    if (!mask[r]) continue;
    const U* s = src + r * units;
    U* o = out + pos[r] * units;
    const std::int64_t bx = blockDim.x;
    // Loads first, then stores: kRowUnroll independent loads per thread
    // keep more bytes in flight than a load-store-load chain.
    for (std::int64_t j = threadIdx.x; j < units; j += bx * kRowUnroll) {
      U v[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (j + u * bx < units) v[u] = s[j + u * bx];
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        if (j + u * bx < units) o[j + u * bx] = v[u];
      }
    }
  }
}

}  // namespace

void masked_select(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src,
                   const StridedOperand& mask) {
  const std::int64_t n = mask.numel();
  const std::int64_t count = out.sizes[0];
  const std::int64_t row = src.sizes[1];
  if (n == 0 || count == 0 || row == 0) return;
  LaunchScope scope(ctx);
  memory::CachingAllocator& alloc = memory::cuda_allocator(ctx.device.index());
  const auto* m = static_cast<const bool*>(mask.data);
  const std::size_t isz = dtype_size(src.dtype);

  if (row == 1) {
    dispatch_size(isz, [&](auto tag) {
      using U = typename decltype(tag)::type;
      const auto* in = static_cast<const U*>(src.data);
      auto* o = static_cast<U*>(out.data);
      std::size_t temp_bytes = 0;
      GENESIS_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, in, m, o, static_cast<std::int64_t*>(nullptr),
                                                    n, scope.stream()));
      const std::size_t count_at = (temp_bytes + 255) / 256 * 256;
      char* scratch = static_cast<char*>(alloc.allocate(count_at + sizeof(std::int64_t), scope.stream_id()));
      const cudaError_t err = cub::DeviceSelect::Flagged(scratch, temp_bytes, in, m, o,
                                                         reinterpret_cast<std::int64_t*>(scratch + count_at), n,
                                                         scope.stream());
      alloc.deallocate(scratch);  // stream-ordered: reused on this stream only after the selection
      GENESIS_CUDA_CHECK(err);
    });
    GENESIS_CUDA_CHECK_LAUNCH();
    return;
  }

  // Output position of every row: exclusive sum of the mask (in int64: the
  // scan's accumulator follows its input type, bool would saturate).
  const auto flags = thrust::make_transform_iterator(m, BoolToInt64{});
  std::size_t temp_bytes = 0;
  GENESIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, flags, static_cast<std::int64_t*>(nullptr), n,
                                                   scope.stream()));
  const std::size_t pos_at = (temp_bytes + 255) / 256 * 256;
  char* scratch =
      static_cast<char*>(alloc.allocate(pos_at + static_cast<std::size_t>(n) * sizeof(std::int64_t), scope.stream_id()));
  auto* pos = reinterpret_cast<std::int64_t*>(scratch + pos_at);
  cudaError_t err = cub::DeviceScan::ExclusiveSum(scratch, temp_bytes, flags, pos, n, scope.stream());
  if (err == cudaSuccess) {
    const std::int64_t row_bytes = row * static_cast<std::int64_t>(isz);
    const bool vec = row_bytes % 16 == 0 && aligned_to(out.data, 16) && aligned_to(src.data, 16);
    const std::int64_t units = vec ? row_bytes / 16 : row;
    const int tx = units >= 256 ? 256 : units >= 128 ? 128 : units >= 64 ? 64 : 32;
    const int ty = kThreads / tx;
    const std::int64_t need = (n + ty - 1) / ty;
    // Grid-stride over rows beyond a few waves (also keeps grid.x in range).
    const std::int64_t cap = static_cast<std::int64_t>(sm_count()) * 64;
    const dim3 grid(static_cast<unsigned>(need < cap ? need : cap)), block(static_cast<unsigned>(tx), static_cast<unsigned>(ty));
    if (vec) {
      masked_rows_kernel<uint4><<<grid, block, 0, scope.stream()>>>(static_cast<uint4*>(out.data),
                                                                     static_cast<const uint4*>(src.data), m, pos, n, units);
    } else {
      dispatch_size(isz, [&](auto tag) {
        using U = typename decltype(tag)::type;
        masked_rows_kernel<U><<<grid, block, 0, scope.stream()>>>(static_cast<U*>(out.data),
                                                                  static_cast<const U*>(src.data), m, pos, n, units);
      });
    }
    err = cudaGetLastError();
  }
  alloc.deallocate(scratch);  // stream-ordered, after the scan and the copy
  GENESIS_CUDA_CHECK(err);
}

}  // namespace genesis::kernels::cuda_impl
