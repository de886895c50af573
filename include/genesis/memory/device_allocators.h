// The process-wide allocators: one caching allocator per CUDA device, one for
// pinned host memory and one for ordinary host memory (SPEC M1, M3, M4).
//
// They are created on first use and live until the process exits (their
// destructors tolerate CUDA shutting down). Everything here is thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

/// The caching allocator of `device` ("cpu" gives the host allocator).
/// Throws InvalidArgumentError for a CUDA device that does not exist.
CachingAllocator& allocator_for(Device device);

/// The caching allocator of CUDA device `index`.
CachingAllocator& cuda_allocator(int index);

/// The caching allocator of ordinary (pageable) host memory.
CachingAllocator& host_allocator();

/// The caching allocator of pinned (page-locked) host memory. Throws
/// InvalidArgumentError without CUDA or without a GPU.
CachingAllocator& pinned_allocator();

/// Allocates pinned host memory from the pinned pool (freed with free_pinned).
void* allocate_pinned(std::size_t bytes);
/// Frees memory from allocate_pinned. nullptr is ignored.
void free_pinned(void* ptr);
/// True when `ptr` points into page-locked host memory (from the pinned pool
/// or registered with CUDA by anyone else).
bool is_pinned(const void* ptr) noexcept;

/// SPEC M4 `genesis.cpu.enable_pinned_memory`: when on, host_allocator_for_
/// transfers() hands out pinned memory so that copies to the GPU run at DMA
/// speed. Off by default.
void set_pinned_host_memory(bool enabled);
bool pinned_host_memory_enabled() noexcept;
/// The allocator host buffers that feed GPU copies should use.
CachingAllocator& host_allocator_for_transfers();

/// set_cache_size("2GB") for the allocator of `device`.
void set_cache_size(Device device, std::string_view size);

/// empty_cache() of every allocator created so far.
void empty_all_caches();

/// The process-wide allocators created so far, with the ids reports and the
/// published figures (publish.h) use: "0", "1", ... for CUDA devices, then
/// "host" and "pinned".
std::vector<std::pair<std::string, CachingAllocator*>> existing_allocators();

}  // namespace genesis::memory
