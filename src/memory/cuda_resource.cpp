#include "genesis/memory/cuda_resource.h"

#include <new>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::memory {

namespace {
int validated(int device) {
  Device(DeviceType::kCUDA, device).validate();  // InvalidArgumentError when it does not exist
  return device;
}
}  // namespace

CudaDeviceResource::CudaDeviceResource(int device) : device_(validated(device)) {}

std::string CudaDeviceResource::name() const { return device().str(); }

MemInfo CudaDeviceResource::mem_info() const {
  const cuda::DeviceMemInfo info = cuda::mem_get_info(device_);
  return MemInfo{info.free_bytes, info.total_bytes};
}

void* CudaDeviceResource::do_allocate(std::size_t bytes) {
  GENESIS_CHECK(bytes > 0, "CudaDeviceResource::allocate: size must be positive");
#if GENESIS_WITH_CUDA
  cuda::DeviceGuard guard(device_);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    // The normal "exhausted" answer (the caching allocator frees its cache and
    // retries). cudaMalloc also set the thread's last error: clear it, or the
    // next kernel launch check would report this OOM as its own failure.
    (void)cudaGetLastError();
    return nullptr;
  }
  if (err != cudaSuccess)
    cuda::detail::throw_cuda_error(static_cast<int>(err), "cudaMalloc(&ptr, bytes)", __FILE__, __LINE__);
  return ptr;
#else
  return nullptr;  // unreachable: the constructor refuses devices without CUDA
#endif
}

void CudaDeviceResource::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  (void)bytes;
  if (ptr == nullptr) return;
#if GENESIS_WITH_CUDA
  cuda::DeviceGuard guard(device_, std::nothrow);
  // During process exit the runtime may already be unloading
  // (cudaErrorCudartUnloading) and the memory dies with the context. Any other
  // error cannot be reported from a noexcept path; a sticky one will surface
  // at the next checked call anyway.
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
#endif
}

EventId CudaDeviceResource::record_event(StreamId stream) { return events_.record(device_, stream); }

bool CudaDeviceResource::event_done(EventId event) { return events_.query(event); }

void CudaDeviceResource::wait_event(EventId event) { events_.synchronize(event); }

void CudaDeviceResource::release_event(EventId event) noexcept { events_.release(event); }

}  // namespace genesis::memory
