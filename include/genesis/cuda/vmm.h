// CUDA virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap
// ...), reached through the runtime's driver entry points, so that Genesis
// never links libcuda directly: a binary built here still starts on a machine
// without a driver (CI), where available() is simply false.
#pragma once

#include <cstddef>
#include <cstdint>

namespace genesis::cuda::vmm {

/// True when the driver exposes the VMM entry points and `device` supports
/// virtual memory management. Never throws.
bool available(int device) noexcept;

/// Minimum physical allocation granularity of `device` (2 MiB on Hopper).
std::size_t granularity(int device);

/// Reserves `bytes` of device address space (aligned to the granularity);
/// returns 0 when the address space is exhausted. Throws CudaError otherwise.
std::uintptr_t reserve(std::size_t bytes, std::size_t alignment);
/// Frees a reservation. Never throws.
void free_reservation(std::uintptr_t addr, std::size_t bytes) noexcept;

/// An opaque physical allocation handle (CUmemGenericAllocationHandle).
using Handle = unsigned long long;

/// Creates `bytes` of physical memory on `device` and maps it at `addr`
/// (without access rights yet: see set_access). Returns false (nothing left
/// mapped) when the device is out of memory; throws CudaError for other
/// failures.
bool create_and_map(int device, std::uintptr_t addr, std::size_t bytes, Handle* handle);
/// Makes [addr, addr + bytes) (mapped, possibly by several handles) readable
/// and writable by `device`. One call per run of pages: the driver's cost is
/// per call, not per byte. Returns false on out of memory.
bool set_access(int device, std::uintptr_t addr, std::size_t bytes);
/// Unmaps [addr, addr + bytes) and releases its handle. Never throws.
void unmap_and_release(std::uintptr_t addr, std::size_t bytes, Handle handle) noexcept;

}  // namespace genesis::cuda::vmm
