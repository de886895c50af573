// convert_dtype_cuda: element-wise dtype conversion of device buffers on a
// CUDA stream. The results are bit-for-bit those of the
// CPU convert_dtype (genesis/storage/convert.h, Note [Cast semantics]) for
// every pair of the ten dtypes and every input, NaN payloads included; the
// GPU tests compare the two exhaustively for 16-bit sources and all 2^32
// float32 -> float16/bfloat16 inputs.
//
// This header includes no CUDA header (the stream is a memory::StreamId).
#pragma once

#include <cstddef>

#include "genesis/core/dtype.h"
#include "genesis/memory/upstream.h"

namespace genesis {

/// Converts `count` elements from `src` (of `src_dtype`) into `dst` (of
/// `dst_dtype`) on the GPU, queued on `stream` (a cudaStream_t value; 0 = the
/// legacy default stream): returns at once, without synchronising; the
/// result is ready when the stream's queued work is. The pointers may point
/// anywhere inside device (cudaMalloc, caching allocator) or managed memory of
/// one GPU, aligned to their element size; 16-byte-aligned buffers (or ones
/// that become aligned after the same number of leading elements) take the
/// vectorised path. Overlap rules are the CPU's: only src == dst with equally
/// sized dtypes (in place). `count == 0` does nothing and accepts null.
///
/// The kernel runs on the buffers' device; `stream` must belong to it (the
/// special handles 0, cudaStreamLegacy and cudaStreamPerThread mean that
/// device's stream). Equal dtypes are a cudaMemcpyAsync, except for bool,
/// float16 and bfloat16, which the CPU rules normalise (bool bytes to 0/1,
/// signalling NaNs to quiet ones).
///
/// Throws InvalidArgumentError for an invalid dtype, a null pointer with
/// count > 0, a misaligned pointer, overlapping buffers, host memory
/// (pageable or pinned), buffers on two different GPUs, or a stream of
/// another device; CudaError without a GPU or when CUDA fails (a failed
/// launch is reported at once; a fault inside the kernel at the next
/// synchronisation, as usual in CUDA). Thread-safe.
void convert_dtype_cuda(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t count,
                        memory::StreamId stream = 0);

}  // namespace genesis
