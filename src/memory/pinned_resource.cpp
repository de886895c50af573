#include "genesis/memory/pinned_resource.h"

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/host_resource.h"

namespace genesis::memory {

PinnedHostResource::PinnedHostResource() {
  GENESIS_CHECK(cuda::compiled_with_cuda(), "pinned memory needs CUDA: Genesis was built without CUDA");
  GENESIS_CHECK(cuda::device_count() > 0,
                "pinned memory needs CUDA: no CUDA GPU is available on this machine");
}

MemInfo PinnedHostResource::mem_info() const { return detail::host_mem_info(); }

void* PinnedHostResource::do_allocate(std::size_t bytes) {
  GENESIS_CHECK(bytes > 0, "PinnedHostResource::allocate: size must be positive");
#if GENESIS_WITH_CUDA
  void* ptr = nullptr;
  const cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault | cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    // Out of pinnable memory is the normal "exhausted" answer: the caching
    // allocator frees its cache and retries. Clear the error so that it does
    // not surface at an unrelated later check.
    (void)cudaGetLastError();
    return nullptr;
  }
  if (err != cudaSuccess)
    cuda::detail::throw_cuda_error(static_cast<int>(err), "cudaHostAlloc(&ptr, bytes, flags)", __FILE__, __LINE__);
  return ptr;
#else
  return nullptr;  // unreachable: the constructor refuses to build without CUDA
#endif
}

void PinnedHostResource::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  (void)bytes;
  if (ptr == nullptr) return;
#if GENESIS_WITH_CUDA
  // At process exit the runtime may be unloading (cudaErrorCudartUnloading)
  // and the memory goes with the process; nothing useful can be done with any
  // other error in a noexcept path either, so clear it and move on.
  if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
#endif
}

EventId PinnedHostResource::record_event(StreamId stream) {
  // Pinned memory is portable: the stream may belong to any device, and the
  // event must be created on that one.
  return events_.record(cuda::EventPool::stream_device(stream), stream);
}

bool PinnedHostResource::event_done(EventId event) { return events_.query(event); }

void PinnedHostResource::wait_event(EventId event) { events_.synchronize(event); }

void PinnedHostResource::release_event(EventId event) noexcept { events_.release(event); }

bool PinnedHostResource::is_pinned(const void* ptr) noexcept {
#if GENESIS_WITH_CUDA
  if (ptr == nullptr || cuda::device_count() == 0) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is an answer, not an error
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
#else
  (void)ptr;
  return false;
#endif
}

}  // namespace genesis::memory
