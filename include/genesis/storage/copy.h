// Copies between every pair of devices (CPU, pinned host, GPU).
//
// Note [Copy paths]:
//   cpu  -> cpu    memcpy (several threads for large buffers)
//   cpu  -> cuda   pinned source: one cudaMemcpyAsync on the stream.
//                  pageable source: a pipeline through pinned staging
//                  buffers (Note [Staged copies] in src/storage/staged_copy.cpp)
//                  that several threads fill while the DMA engine drains the
//                  previous chunk.
//   cuda -> cpu    pinned destination: one cudaMemcpyAsync; pageable: the same
//                  pipeline in reverse.
//   cuda -> cuda   same device: cudaMemcpyAsync on the stream. Two devices:
//                  a peer copy (peer access is enabled when the pair supports
//                  it; otherwise the driver stages through the host), ordered
//                  after the source device's current stream and before its
//                  next work.
//
// Note [Copy completion]: with non_blocking = false every copy has finished
// when the call returns. With non_blocking = true a copy that involves a GPU
// and pinned (or device) memory only is queued on the stream and the call
// returns at once; copies from or to pageable host memory finish reading or
// writing that memory before returning whatever the flag says (the host
// buffer is the caller's and may change or vanish right after), as
// cudaMemcpyAsync does. Storage-level copies keep both storages alive until a
// queued copy is done (Note [Storage ownership]).
#pragma once

#include <cstddef>
#include <initializer_list>

#include "genesis/core/device.h"
#include "genesis/storage/storage.h"

namespace genesis {

/// Copies `nbytes` from `src` (on `src_device`) to `dst` (on `dst_device`).
/// `stream` is a stream of the GPU involved (for GPU to GPU, of the
/// destination GPU); kCurrentStream picks that device's current stream.
/// The ranges must not overlap. Throws InvalidArgumentError for null
/// pointers with nbytes > 0 or a device that cannot be used, CudaError when
/// the runtime fails.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes,
                StreamId stream = kCurrentStream, bool non_blocking = false);

/// Copies the bytes of `src` into `dst` (same byte size; dtype is not
/// converted) between any two devices, keeping both alive until the copy is
/// done. Throws InvalidArgumentError for a size mismatch.
void copy_storage_bytes(const Storage& src, Storage& dst, bool non_blocking = false);

/// copy_storage(src, dst): dst.copy_(src) (converts the dtype when
/// the two differ; element counts must match).
inline void copy_storage(const Storage& src, Storage& dst, bool non_blocking = false) {
  dst.copy_(src, non_blocking);
}

/// Keeps `storages` alive until the work queued so far on `stream` (of
/// `device`) has finished. Pooled device blocks are handed to the
/// allocator's record_stream; everything else is held by reference next to
/// a CUDA event and dropped once the event completes. A no-op on the CPU.
void keep_alive_on_stream(Device device, StreamId stream, std::initializer_list<Storage> storages);

/// Drops the references held for copies that have completed (done
/// automatically by every later keep_alive_on_stream). Returns how many are
/// still pending.
std::size_t collect_completed_copies();

/// Copies `nbytes` between two host buffers, on several threads when the
/// buffer is large. Buffers must not overlap.
void parallel_memcpy(void* dst, const void* src, std::size_t nbytes);

/// How pageable host memory is staged (Note [Staged copies]). Tunable for
/// benchmarks; the defaults were the fastest measured on a 16-core GPU host:
/// 16 MiB x 4 buffers x 16 threads. Fewer threads were slower, and 2-4 MiB
/// chunks much slower: their per-chunk costs (waking threads, event waits) no
/// longer hide behind the copy (figures: bench/RESULTS.md, "Storage copies",
/// and the sweep in bench/HISTORY.md, "Storage copies with the tuned staging
/// defaults").
struct StagingOptions {
  std::size_t chunk_bytes = std::size_t{16} << 20;  // largest pinned staging buffer
  int buffers = 4;                                   // buffers in flight
  int copy_threads = 0;                              // host memcpy threads; 0 = min(16, cores)
};
void set_staging_options(const StagingOptions& options);
StagingOptions staging_options();

}  // namespace genesis
