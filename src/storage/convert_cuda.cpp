// convert_dtype_cuda: argument checks and dispatch; the kernels are in
// convert_cuda.cu. See include/genesis/storage/convert_cuda.h.
#include "genesis/storage/convert_cuda.h"

#include <cstdint>
#include <limits>

#include "genesis/core/error.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"

#if GENESIS_WITH_CUDA
#include "convert_cuda_launch.h"  // the kernels exist only in CUDA builds
#endif

namespace genesis {

namespace {

// Where a pointer lives: -1 for managed memory (usable from any device),
// otherwise the device index. Throws InvalidArgumentError for host memory.
int device_of(const void* p, const char* which) {
  const cuda::PointerAttributes attr = cuda::pointer_attributes(p);
  switch (attr.type) {
    case cuda::MemoryType::kDevice: return attr.device;
    case cuda::MemoryType::kManaged: return -1;
    case cuda::MemoryType::kHost:
      GENESIS_THROW(InvalidArgumentError, "convert_dtype_cuda: the ", which, " buffer ", p,
                    " is pinned host memory; it needs device (or managed) memory: copy it to the GPU first, or "
                    "use convert_dtype on the CPU");
    case cuda::MemoryType::kUnregistered: break;
  }
  GENESIS_THROW(InvalidArgumentError, "convert_dtype_cuda: the ", which, " buffer ", p,
                " is not CUDA memory (ordinary host memory?); it needs device (or managed) memory: copy it "
                "to the GPU first, or use convert_dtype on the CPU");
}

}  // namespace

void convert_dtype_cuda(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t count,
                        memory::StreamId stream) {
  GENESIS_CHECK(is_valid_dtype(src_dtype), "convert_dtype_cuda: invalid source dtype value ",
                static_cast<unsigned>(src_dtype));
  GENESIS_CHECK(is_valid_dtype(dst_dtype), "convert_dtype_cuda: invalid destination dtype value ",
                static_cast<unsigned>(dst_dtype));
  if (count == 0) return;
  GENESIS_CHECK(src != nullptr, "convert_dtype_cuda: source pointer is null with count ", count);
  GENESIS_CHECK(dst != nullptr, "convert_dtype_cuda: destination pointer is null with count ", count);
  if (cuda::device_count() == 0) cuda::detail::throw_cuda_unavailable("convert_dtype_cuda()", __FILE__, __LINE__);

  const std::size_t src_size = dtype_size(src_dtype);
  const std::size_t dst_size = dtype_size(dst_dtype);
  const auto s_begin = reinterpret_cast<std::uintptr_t>(src);
  const auto d_begin = reinterpret_cast<std::uintptr_t>(dst);
  // The GPU, unlike the CPU, faults on misaligned element accesses.
  GENESIS_CHECK(s_begin % src_size == 0, "convert_dtype_cuda: source pointer ", src, " is not aligned to its ",
                dtype_name(src_dtype), " elements (", src_size, " bytes)");
  GENESIS_CHECK(d_begin % dst_size == 0, "convert_dtype_cuda: destination pointer ", dst,
                " is not aligned to its ", dtype_name(dst_dtype), " elements (", dst_size, " bytes)");
  const bool in_place = s_begin == d_begin && src_size == dst_size;
  if (!in_place) {
    GENESIS_CHECK(count <= std::numeric_limits<std::size_t>::max() / 8, "convert_dtype_cuda: count ", count,
                  " is too large");
    const bool overlap = s_begin < d_begin + count * dst_size && d_begin < s_begin + count * src_size;
    GENESIS_CHECK(!overlap, "convert_dtype_cuda: source and destination buffers overlap (",
                  dtype_name(src_dtype), " -> ", dtype_name(dst_dtype),
                  "); only src == dst with equally sized dtypes is supported");
  }

  // Past this point a GPU exists (checked above), so CUDA is compiled in.
  const int src_device = device_of(src, "source");
  const int dst_device = device_of(dst, "destination");
  GENESIS_CHECK(src_device < 0 || dst_device < 0 || src_device == dst_device,
                "convert_dtype_cuda: the source is on cuda:", src_device, " and the destination on cuda:",
                dst_device, "; copy one of them to the other GPU first");
  // Run where the device memory is; with managed memory only, where the stream is.
  int device = dst_device >= 0 ? dst_device : src_device;
  if (device < 0) device = cuda::is_special_stream(stream) ? cuda::current_device() : cuda::stream_device(stream);
  cuda::DeviceGuard guard(device);
  if (!cuda::is_special_stream(stream)) {
    const int stream_device = cuda::stream_device(stream);
    GENESIS_CHECK(stream_device == device, "convert_dtype_cuda: the stream belongs to cuda:", stream_device,
                  " but the buffers to cuda:", device, "; use a stream of cuda:", device);
  }

  if (src_dtype == dst_dtype) {
    if (in_place) return;  // as on the CPU: nothing to do
    // Bool, float16 and bfloat16 are normalised by the cast rules (bool bytes
    // to 0/1, signalling NaNs quieted), so only the others are plain copies.
    if (src_dtype != DType::kBool && src_dtype != DType::kFloat16 && src_dtype != DType::kBFloat16) {
      cuda::memcpy_async(dst, src, count * src_size, cuda::CopyKind::kDefault, stream);
      return;
    }
  }
  // 8 blocks of 256 threads fill an SM (2048 resident threads on sm_90); more
  // blocks than that only add scheduling, the kernel loops (grid-stride).
  const int max_blocks = 8 * cuda::get_device_properties(device).multi_processor_count;
#if GENESIS_WITH_CUDA
  detail::launch_convert_kernel(src, src_dtype, dst, dst_dtype, count, stream, max_blocks);
#else
  (void)max_blocks;  // unreachable: device_count() is 0 without CUDA
#endif
}

}  // namespace genesis
