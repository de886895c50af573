#include "genesis/memory/pinned_resource.h"

#include "genesis/core/error.h"
#include "genesis/cuda/memops.h"
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
  // nullptr when no more memory can be pinned: the caching allocator frees
  // its cache and retries.
  return cuda::malloc_pinned_host(bytes);
}

void PinnedHostResource::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  (void)bytes;
  if (ptr == nullptr) return;
  cuda::free_pinned_host(ptr);  // tolerates CUDA unloading at exit
}

EventId PinnedHostResource::record_event(StreamId stream) {
  // Pinned memory is portable: the stream may belong to any device, and the
  // event must be created on that one.
  return events_.record(cuda::EventPool::stream_device(stream), stream);
}

bool PinnedHostResource::event_done(EventId event) { return events_.query(event); }

void PinnedHostResource::wait_event(EventId event) { events_.synchronize(event); }

bool PinnedHostResource::stream_idle(StreamId stream) { return cuda::stream_idle(stream); }

void PinnedHostResource::release_event(EventId event) noexcept { events_.release(event); }

bool PinnedHostResource::is_pinned(const void* ptr) noexcept { return cuda::is_pinned_host(ptr); }

}  // namespace genesis::memory
