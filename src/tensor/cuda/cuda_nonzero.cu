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

}  // namespace genesis::kernels::cuda_impl
