// Memory operations of the CUDA runtime behind plain signatures: copies,
// memsets, stream synchronisation, pointer queries, raw device allocations.
//
// The layers above (storage, debug) call these instead of the runtime, so
// that the CUDA toolkit is included in one area and "built without CUDA" is
// decided in one place: without CUDA every function here throws CudaError
// ("<function> needs CUDA, but Genesis was built without CUDA"), except the
// never-throwing ones: the frees do nothing and is_pinned_host says false. Like runtime.h, this header includes no
// CUDA header: streams are StreamId values (the cudaStream_t).
//
// None of these switch the current device: callers that need one hold a
// DeviceGuard (runtime.h), exactly as around the runtime calls they replace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "genesis/core/stream_id.h"

namespace genesis::cuda {

/// Direction of a copy, as cudaMemcpyKind names it; kDefault lets the driver
/// infer it from the pointers (unified addressing).
enum class CopyKind : std::uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice, kDefault };

/// Queues a copy of `nbytes` on `stream` (cudaMemcpyAsync). Returns at once
/// for pinned and device memory. Throws CudaError on failure.
void memcpy_async(void* dst, const void* src, std::size_t nbytes, CopyKind kind, StreamId stream);

/// Queues a copy between two GPUs on `stream`, a stream of the destination
/// (cudaMemcpyPeerAsync). Throws CudaError on failure.
void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::size_t nbytes,
                       StreamId stream);

/// Queues setting `nbytes` bytes at `dst` to `value` on `stream`
/// (cudaMemsetAsync). Throws CudaError on failure.
void memset_async(void* dst, int value, std::size_t nbytes, StreamId stream);

/// Blocks until the work queued on `stream` has finished
/// (cudaStreamSynchronize). Throws CudaError if that work failed.
void synchronize_stream(StreamId stream);

/// True if the work queued on `stream` so far has finished; never blocks
/// (cudaStreamQuery). Throws CudaError if that work failed.
bool stream_idle(StreamId stream);

/// The device a stream belongs to (cudaStreamGetDevice). Throws CudaError for
/// a handle that is not a stream.
int stream_device(StreamId stream);

/// True for the special stream handles that belong to whichever device is
/// current: 0 (legacy default), cudaStreamLegacy (1), cudaStreamPerThread (2).
constexpr bool is_special_stream(StreamId stream) noexcept { return stream <= 2; }

/// What kind of memory a pointer points into.
enum class MemoryType : std::uint8_t {
  kUnregistered,  ///< not known to CUDA (ordinary host memory)
  kHost,          ///< page-locked host memory
  kDevice,        ///< memory of one GPU
  kManaged,       ///< managed (unified) memory, usable from every GPU
};

struct PointerAttributes {
  MemoryType type = MemoryType::kUnregistered;
  int device = -1;  ///< the GPU of device memory; -1 otherwise
};

/// Asks CUDA where `ptr` lives (cudaPointerGetAttributes). Throws CudaError
/// on failure.
PointerAttributes pointer_attributes(const void* ptr);

/// Allocates `nbytes` (> 0) of device memory on the current device,
/// bypassing every cache (cudaMalloc). Returns nullptr when the device is out
/// of memory; throws CudaError for other failures.
void* malloc_device(std::size_t nbytes);

/// Frees memory from malloc_device (cudaFree). Never throws: deleters call it,
/// possibly while CUDA shuts down, when a failure cannot be acted on.
void free_device(void* ptr) noexcept;

/// Allocates `nbytes` (> 0) of page-locked host memory usable from every
/// device (cudaHostAlloc, portable). Returns nullptr when no more memory can
/// be pinned; throws CudaError for other failures.
void* malloc_pinned_host(std::size_t nbytes);

/// Frees memory from malloc_pinned_host (cudaFreeHost). Never throws, like
/// free_device.
void free_pinned_host(void* ptr) noexcept;

/// True when `ptr` points into page-locked host memory (pinned by Genesis or
/// by anyone else). Never throws: false without CUDA, without a GPU and for
/// pointers CUDA does not know.
bool is_pinned_host(const void* ptr) noexcept;

}  // namespace genesis::cuda
