// The CUDA memory operations of memops.h; without CUDA each one refuses here.
#include "genesis/cuda/memops.h"

#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {

#if GENESIS_WITH_CUDA

namespace {

cudaMemcpyKind as_kind(CopyKind kind) noexcept {
  switch (kind) {
    case CopyKind::kHostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost: return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice: return cudaMemcpyDeviceToDevice;
    case CopyKind::kDefault: break;
  }
  return cudaMemcpyDefault;
}

}  // namespace

void memcpy_async(void* dst, const void* src, std::size_t nbytes, CopyKind kind, StreamId stream) {
  GENESIS_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, as_kind(kind), detail::to_cuda_stream(stream)));
}

void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::size_t nbytes,
                       StreamId stream) {
  GENESIS_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, detail::to_cuda_stream(stream)));
}

void memset_async(void* dst, int value, std::size_t nbytes, StreamId stream) {
  GENESIS_CUDA_CHECK(cudaMemsetAsync(dst, value, nbytes, detail::to_cuda_stream(stream)));
}

void synchronize_stream(StreamId stream) { GENESIS_CUDA_CHECK(cudaStreamSynchronize(detail::to_cuda_stream(stream))); }

bool stream_idle(StreamId stream) {
  const cudaError_t err = cudaStreamQuery(detail::to_cuda_stream(stream));
  if (err == cudaErrorNotReady) return false;
  GENESIS_CUDA_CHECK(err);
  return true;
}

int stream_device(StreamId stream) {
  int device = -1;
  GENESIS_CUDA_CHECK(cudaStreamGetDevice(detail::to_cuda_stream(stream), &device));
  return device;
}

PointerAttributes pointer_attributes(const void* ptr) {
  cudaPointerAttributes attr{};
  GENESIS_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  switch (attr.type) {
    case cudaMemoryTypeDevice: return {MemoryType::kDevice, attr.device};
    case cudaMemoryTypeManaged: return {MemoryType::kManaged, -1};
    case cudaMemoryTypeHost: return {MemoryType::kHost, -1};
    default: return {MemoryType::kUnregistered, -1};
  }
}

// Out of memory is the normal "exhausted" answer (a caching allocator frees
// its cache and retries), so it is nullptr, not an error. The failed call
// also set the thread's last error: it is cleared, or the next kernel launch
// check would report this OOM as its own failure.
void* malloc_device(std::size_t nbytes) {
  void* ptr = nullptr;
  const cudaError_t e = cudaMalloc(&ptr, nbytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (e != cudaSuccess) detail::throw_cuda_error(static_cast<int>(e), "cudaMalloc(&ptr, nbytes)", __FILE__, __LINE__);
  return ptr;
}

// In a noexcept path, possibly at process exit while the runtime unloads
// (cudaErrorCudartUnloading: the memory dies with the context), nothing can
// be done with an error; a sticky one surfaces at the next checked call.
void free_device(void* ptr) noexcept {
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

void* malloc_pinned_host(std::size_t nbytes) {
  void* ptr = nullptr;
  const cudaError_t e = cudaHostAlloc(&ptr, nbytes, cudaHostAllocDefault | cudaHostAllocPortable);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (e != cudaSuccess) {
    detail::throw_cuda_error(static_cast<int>(e), "cudaHostAlloc(&ptr, nbytes, flags)", __FILE__, __LINE__);
  }
  return ptr;
}

void free_pinned_host(void* ptr) noexcept {
  if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

bool is_pinned_host(const void* ptr) noexcept {
  if (ptr == nullptr || device_count() == 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is an answer, not an error
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

#else  // !GENESIS_WITH_CUDA: every operation needs a GPU this build cannot reach.

#define GENESIS_NO_CUDA(what) detail::throw_cuda_unavailable(what, __FILE__, __LINE__)

void memcpy_async(void*, const void*, std::size_t, CopyKind, StreamId) { GENESIS_NO_CUDA("cuda::memcpy_async()"); }
void memcpy_peer_async(void*, int, const void*, int, std::size_t, StreamId) {
  GENESIS_NO_CUDA("cuda::memcpy_peer_async()");
}
void memset_async(void*, int, std::size_t, StreamId) { GENESIS_NO_CUDA("cuda::memset_async()"); }
void synchronize_stream(StreamId) { GENESIS_NO_CUDA("cuda::synchronize_stream()"); }
bool stream_idle(StreamId) { GENESIS_NO_CUDA("cuda::stream_idle()"); }
int stream_device(StreamId) { GENESIS_NO_CUDA("cuda::stream_device()"); }
PointerAttributes pointer_attributes(const void*) { GENESIS_NO_CUDA("cuda::pointer_attributes()"); }
void* malloc_device(std::size_t) { GENESIS_NO_CUDA("cuda::malloc_device()"); }
void free_device(void*) noexcept {}
void* malloc_pinned_host(std::size_t) { GENESIS_NO_CUDA("cuda::malloc_pinned_host()"); }
void free_pinned_host(void*) noexcept {}
bool is_pinned_host(const void*) noexcept { return false; }

#undef GENESIS_NO_CUDA

#endif  // GENESIS_WITH_CUDA

}  // namespace genesis::cuda
