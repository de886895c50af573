// Kernels of convert_dtype_cuda (include/genesis/storage/convert_cuda.h).
// Arguments are validated in convert_cuda.cpp; this file only converts.
//
// Each element is converted by kernels::convert_element, the very function
// convert_dtype runs on the CPU (core/cast.h, Note [GPU cast = CPU cast]), and
// the element types come from the one dtype dispatch (core/dtype_dispatch.h),
// so the GPU and the CPU agree bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "convert_cuda_launch.h"
#include "genesis/core/cast.h"
#include "genesis/core/dtype_dispatch.h"
#include "genesis/core/half.h"
#include "genesis/cuda/check.h"

namespace genesis::detail {
namespace {

using kernels::convert_element;

// --- kernel --------------------------------------------------------------------

/// N elements per vector step: the smaller element type moves 16 bytes, the
/// larger one a multiple of 16, so both sides use whole 128-bit accesses.
template <typename S, typename D>
inline constexpr int kVec = 16 / (sizeof(S) < sizeof(D) ? sizeof(S) : sizeof(D));

template <typename T, int N>
struct alignas(16) Pack {
  T v[N];
};

constexpr int kThreads = 256;

// Elements [head, head + nvec * N) are converted N at a time through aligned
// 16-byte accesses; the `head` elements before and the tail after, one by one.
// An unaligned pair of buffers has head = count, nvec = 0.
//
// No __restrict__: in-place conversions (src == dst, equal sizes) are
// allowed, and each thread reads its elements before writing them.
template <typename S, typename D>
__global__ void __launch_bounds__(kThreads) convert_kernel(const S* src, D* dst, std::size_t count,
                                                           std::size_t head, std::size_t nvec) {
  constexpr int N = kVec<S, D>;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  const auto* in = reinterpret_cast<const Pack<S, N>*>(src + head);
  auto* out = reinterpret_cast<Pack<D, N>*>(dst + head);
  for (std::size_t v = tid; v < nvec; v += stride) {
    const Pack<S, N> a = in[v];
    Pack<D, N> b;
#pragma unroll
    for (int k = 0; k < N; ++k) b.v[k] = convert_element<D>(a.v[k]);
    out[v] = b;
  }

  const std::size_t body_end = head + nvec * N;
  const std::size_t nscalar = head + (count - body_end);
  for (std::size_t j = tid; j < nscalar; j += stride) {
    const std::size_t i = j < head ? j : body_end + (j - head);
    dst[i] = convert_element<D>(src[i]);
  }
}

template <typename S, typename D>
void launch(const void* src, void* dst, std::size_t count, cudaStream_t stream, int max_blocks) {
  constexpr int N = kVec<S, D>;
  const auto s_addr = reinterpret_cast<std::uintptr_t>(src);
  const auto d_addr = reinterpret_cast<std::uintptr_t>(dst);
  // Leading elements until src is 16-byte aligned (src is element aligned,
  // so this is a whole number); the vector path needs dst aligned there too.
  std::size_t head = ((16 - s_addr % 16) % 16) / sizeof(S);
  std::size_t nvec = 0;
  if (head < count && (d_addr + head * sizeof(D)) % 16 == 0) {
    nvec = (count - head) / N;
  } else {
    head = count;
  }
  const std::size_t nscalar = count - nvec * N;
  const std::size_t work = nvec > nscalar ? nvec : nscalar;
  std::size_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > static_cast<std::size_t>(max_blocks)) blocks = static_cast<std::size_t>(max_blocks);
  if (blocks == 0) blocks = 1;
  convert_kernel<S, D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const S*>(src), static_cast<D*>(dst), count, head, nvec);
  // A bad configuration or a missing kernel image shows here; faults inside
  // the kernel show at the next synchronisation.
  GENESIS_CUDA_CHECK(cudaGetLastError());
}

using LaunchFn = void (*)(const void*, void*, std::size_t, cudaStream_t, int);

LaunchFn pick(DType src, DType dst) {
  return kernels::dispatch_element(src, [dst](auto s) {
    return kernels::dispatch_element(dst, [](auto d) -> LaunchFn {
      return &launch<typename decltype(s)::type, typename decltype(d)::type>;
    });
  });
}

}  // namespace

void launch_convert_kernel(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t count,
                           std::uintptr_t stream, int max_blocks) {
  const LaunchFn fn = pick(src_dtype, dst_dtype);
  GENESIS_CHECK(fn != nullptr, "convert_dtype_cuda: no kernel for ", dtype_name(src_dtype), " -> ",
                dtype_name(dst_dtype));
  fn(src, dst, count, reinterpret_cast<cudaStream_t>(stream), max_blocks);
}

}  // namespace genesis::detail
