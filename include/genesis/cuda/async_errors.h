// Errors that CUDA kernels detect and the host raises later.
//
// Note [Asynchronous kernel errors]: a gather on the GPU (x[idx]) cannot
// know whether idx is in range without reading idx, which lives on the GPU.
// Checking it first costs a device->host read and a wait before every
// gather: a hidden synchronisation (Genesis synchronises only where a
// result's size depends on the data), and a
// third of the time of a large row gather on an H200. PyTorch puts a
// device-side assert in the kernel instead, which is free but kills the
// CUDA context: every tensor on the GPU is lost.
//
// Genesis does neither. The gather kernel checks every index it loads; an
// index out of range is never used (its element reads as zero) and is
// recorded in a small per-device record: the largest value above the range
// and the smallest below it, per index operand, with the operand's dim and
// size. Recording sets a flag in pinned host memory that the host reads
// without touching the GPU. The error is raised as an ordinary, recoverable
// IndexError, naming the index, the dimension and its size exactly as the
// CPU does, at the first synchronisation point after the kernel:
// Stream/Event/device synchronize, a blocking copy to the host (.cpu(),
// .item(), printing), or anything else that waits for the GPU. The context
// and every other tensor stay intact; the gather's own result is garbage
// and should be dropped.
//
// Assignments through indices (x[idx] = v, index_put) are checked the same
// way, in a first pass over the indices on the same stream that sets a flag
// in device memory; the scatter kernel reads the flag first and writes
// nothing at all when it is set: a failed assignment leaves the tensor as
// it was, still without a host wait.
//
// set_sync_index_checks(true) (or GENESIS_SYNC_INDEX_CHECKS=1 in the
// environment) makes every CUDA gather and assignment wait for its kernels
// and raise at the call, like CUDA_LAUNCH_BLOCKING for debugging.
#pragma once

#include <cstdint>
#include <optional>

namespace genesis::cuda {

/// Index operands one record can describe (= kernels::kMaxDims).
inline constexpr int kAsyncIndexSlots = 16;

/// The device-side record (device memory; kernels update it with atomics).
/// Empty state: flags 0, max = INT64_MIN, min = INT64_MAX.
struct AsyncErrorRecord {
  unsigned int index_flags;                  // bit k: operand k had an index out of range
  unsigned int reserved;
  long long index_max[kAsyncIndexSlots];     // largest index >= size seen
  long long index_min[kAsyncIndexSlots];     // smallest index < -size seen
  long long index_size[kAsyncIndexSlots];    // size of the indexed dimension
  long long index_dim[kAsyncIndexSlots];     // that dimension, as the user numbers it
};

/// What a kernel needs to report: the device record and the host flag
/// (pinned, mapped; the kernel sets it after updating the record).
struct AsyncErrorSink {
  AsyncErrorRecord* record = nullptr;
  int* host_flag = nullptr;  // device-side address of the host word
};

/// The sink for kernels on `device`, created on first use (one small device
/// allocation and one pinned host word per device, kept for the process).
/// Throws CudaError without CUDA.
AsyncErrorSink async_error_sink(int device);

/// An index error taken from a device's record.
struct AsyncIndexError {
  long long index = 0;
  long long dim = 0;
  long long size = 0;
};

/// If kernels on `device` recorded an error, waits for the device, takes the
/// error out of the record (resetting it) and returns it; otherwise returns
/// nothing after reading one host word. Never throws for lack of a device.
std::optional<AsyncIndexError> take_async_error(int device);

/// Throws IndexError for an error recorded on `device` (see take_async_error);
/// the message is the CPU's plus where the error was detected. Cheap when
/// there is none: one read of pinned host memory.
void raise_async_errors(int device);

/// GENESIS_SYNC_INDEX_CHECKS: waits for `stream` (a StreamId) of `device`,
/// then throws IndexError with the CPU's message for an error recorded on
/// `device`.
void raise_index_errors_now(int device, std::uintptr_t stream);

/// Whether CUDA gathers and index assignments wait for their kernels and
/// raise index errors at the call (default: no, unless GENESIS_SYNC_INDEX_CHECKS=1 at start-up).
bool sync_index_checks() noexcept;
void set_sync_index_checks(bool on) noexcept;

}  // namespace genesis::cuda
