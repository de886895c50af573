// Private interface between convert_cuda.cpp (argument checks, device and
// stream selection) and convert_cuda.cu (kernels), so that the checks are
// plain C++ that also builds without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "genesis/core/dtype.h"

namespace genesis::detail {

/// Queues the conversion kernel for (src_dtype, dst_dtype) on `stream` of the
/// current device, with at most `max_blocks` blocks. Arguments must already be
/// valid (count > 0, element-aligned device pointers, allowed overlap). Throws
/// CudaError when the launch fails.
void launch_convert_kernel(const void* src, DType src_dtype, void* dst, DType dst_dtype, std::size_t count,
                           std::uintptr_t stream, int max_blocks);

}  // namespace genesis::detail
