#include "genesis/memory/cuda_resource.h"

#include <cstdlib>
#include <new>

#include "genesis/core/error.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/vmm.h"

namespace genesis::memory {

namespace {
int validated(int device) {
  cuda::validate_device(Device(DeviceType::kCUDA, device));  // InvalidArgumentError when it does not exist
  return device;
}
}  // namespace

bool CudaDeviceResource::maps_pages(int device) noexcept {
  // GENESIS_NO_VMM=1 forces classic segments (for comparisons and for
  // drivers whose VMM support misbehaves).
  const char* no_vmm = std::getenv("GENESIS_NO_VMM");
  return !(no_vmm != nullptr && no_vmm[0] == '1') && cuda::vmm::available(device);
}

CudaDeviceResource::CudaDeviceResource(int device) : device_(validated(device)) {
  vmm_ = maps_pages(device_);
  if (vmm_) page_size_ = cuda::vmm::granularity(device_);
  total_bytes_ = cuda::get_device_properties(device_).total_memory;
}

CudaDeviceResource::~CudaDeviceResource() {
  // The allocator unmaps its pages before it goes; whatever is left (an
  // allocator that was never destroyed) is released here.
  for (auto& [addr, chunk] : chunks_) cuda::vmm::unmap_and_release(addr, chunk.bytes, chunk.handle);
}

void CudaDeviceResource::synchronize_stream(StreamId stream) {
  cuda::DeviceGuard guard(device_);
  cuda::synchronize_stream(stream);
}

std::uintptr_t CudaDeviceResource::reserve_address_range(std::size_t bytes) {
  if (!vmm_) return 0;
  return cuda::vmm::reserve(bytes, page_size_);
}

void CudaDeviceResource::release_address_range(std::uintptr_t addr, std::size_t bytes) noexcept {
  if (vmm_) cuda::vmm::free_reservation(addr, bytes);
}

bool CudaDeviceResource::map_pages(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) {
  GENESIS_CHECK(vmm_, "map_pages: ", name(), " has no virtual memory support");
  GENESIS_CHECK(bytes > 0 && addr % page_size_ == 0 && bytes % page_size_ == 0,
                "map_pages: range must be aligned to the page size ", page_size_);
  GENESIS_CHECK(chunk > 0 && chunk % page_size_ == 0 && bytes % chunk == 0, "map_pages: chunk size ", chunk,
                " must be a multiple of the page size ", page_size_, " that divides ", bytes);
  std::lock_guard<std::mutex> lock(vmm_mutex_);
  std::size_t done = 0;
  auto undo = [&]() noexcept {
    for (std::size_t off = 0; off < done; off += chunk) {
      auto it = chunks_.find(addr + off);
      cuda::vmm::unmap_and_release(addr + off, chunk, it->second.handle);
      chunks_.erase(it);
    }
  };
  try {
    for (; done < bytes; done += chunk) {
      cuda::vmm::Handle h = 0;
      if (!cuda::vmm::create_and_map(device_, addr + done, chunk, &h)) break;
      chunks_.emplace(addr + done, Chunk{h, chunk});
    }
    // Access rights for the whole run at once (one driver call).
    if (done == bytes && cuda::vmm::set_access(device_, addr, bytes)) return true;
  } catch (...) {
    undo();
    throw;
  }
  undo();  // out of memory part way: leave nothing mapped, as the interface promises
  return false;
}

void CudaDeviceResource::unmap_pages(std::uintptr_t addr, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(vmm_mutex_);
  for (auto it = chunks_.lower_bound(addr); it != chunks_.end() && it->first < addr + bytes;) {
    if (it->first + it->second.bytes > addr + bytes) break;  // would be cut: left mapped
    cuda::vmm::unmap_and_release(it->first, it->second.bytes, it->second.handle);
    it = chunks_.erase(it);
  }
}

std::string CudaDeviceResource::name() const { return device().str(); }

MemInfo CudaDeviceResource::mem_info() const {
  const cuda::DeviceMemInfo info = cuda::mem_get_info(device_);
  return MemInfo{info.free_bytes, info.total_bytes};
}

void* CudaDeviceResource::do_allocate(std::size_t bytes) {
  GENESIS_CHECK(bytes > 0, "CudaDeviceResource::allocate: size must be positive");
  // More than the whole device can never succeed: say so without asking the
  // driver, whose failed cudaMalloc leaves a sticky-looking error behind and
  // shows up as an API error in every compute-sanitizer run of a program that
  // merely tests its out-of-memory handling.
  if (bytes > total_bytes_) return nullptr;
  cuda::DeviceGuard guard(device_);
  return cuda::malloc_device(bytes);  // nullptr when exhausted: the caching allocator frees its cache and retries
}

void CudaDeviceResource::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  (void)bytes;
  if (ptr == nullptr) return;
  cuda::DeviceGuard guard(device_, std::nothrow);
  cuda::free_device(ptr);  // tolerates CUDA unloading at exit
}

EventId CudaDeviceResource::record_event(StreamId stream) { return events_.record(device_, stream); }

bool CudaDeviceResource::event_done(EventId event) { return events_.query(event); }

void CudaDeviceResource::wait_event(EventId event) { events_.synchronize(event); }

void CudaDeviceResource::stream_wait_event(StreamId stream, EventId event) { events_.wait(event, device_, stream); }

bool CudaDeviceResource::stream_idle(StreamId stream) {
  cuda::DeviceGuard guard(device_);  // stream 0 is the legacy stream of the current device
  return cuda::stream_idle(stream);
}

void CudaDeviceResource::release_event(EventId event) noexcept { events_.release(event); }

}  // namespace genesis::memory
