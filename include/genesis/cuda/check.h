// GENESIS_CUDA_CHECK: turns a failed CUDA runtime call into a CudaError; and
// to_cuda_stream, a StreamId as the cudaStream_t the runtime calls take.
//
// Only meaningful in code built with GENESIS_WITH_CUDA=1: it includes the
// CUDA runtime API header. Without CUDA the macro is deliberately left
// undefined so that a CUDA call outside `#if GENESIS_WITH_CUDA` fails to
// compile here rather than at link time.
#pragma once

#include <cstdint>
#include <string>

#include "genesis/core/error.h"

#if GENESIS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace genesis::cuda::detail {

/// Throws CudaError "<expr> failed: <cudaErrorName> (<code>): <description>".
/// Also clears the thread's last CUDA error, so that a later
/// cudaGetLastError() check does not report this failure a second time
/// (sticky errors cannot be cleared and will keep failing later calls).
[[noreturn]] void throw_cuda_error(int code, const char* expr, const char* file, int line);

/// "cudaErrorMemoryAllocation (2): out of memory"; "unknown" without CUDA.
std::string cuda_error_text(int code);

}  // namespace genesis::cuda::detail

#if GENESIS_WITH_CUDA
namespace genesis::cuda::detail {

/// A StreamId (or any stream handle held as an integer) as the CUDA stream it is.
inline cudaStream_t to_cuda_stream(std::uintptr_t s) noexcept { return reinterpret_cast<cudaStream_t>(s); }

}  // namespace genesis::cuda::detail

/// Evaluates a CUDA runtime call once; throws genesis::CudaError carrying the
/// error name, its description and the expression text unless it returned
/// cudaSuccess.
#define GENESIS_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    const cudaError_t genesis_cuda_status_ = (expr);                                      \
    if (GENESIS_UNLIKELY(genesis_cuda_status_ != cudaSuccess)) {                          \
      ::genesis::cuda::detail::throw_cuda_error(static_cast<int>(genesis_cuda_status_),   \
                                                #expr, __FILE__, __LINE__);               \
    }                                                                                     \
  } while (0)
#endif
