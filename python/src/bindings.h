// The pieces of the `genesis._C` extension module, one per concern (STYLE 2).
//
// module.cpp calls every bind_* function in the order below; each lives in its
// own .cpp file next to this header. A new area (storage, tensor, the CUDA
// device queries) adds a bind_* function and a file, and one line in
// module.cpp. Bindings stay thin (STYLE 1): they convert arguments and
// results and call the C++ API; policy lives in C++ or in the Python package.
#pragma once

#include <pybind11/pybind11.h>

namespace genesis::python {

namespace py = pybind11;

/// Exception types (OutOfMemoryError, CudaError) and the translator that maps
/// every genesis::Error onto a Python exception (Note [Errors] in
/// include/genesis/core/error.h). Must run first: later bindings may throw.
void bind_errors(py::module_& m);
/// genesis._C.Device and parse_bytes.
void bind_device(py::module_& m);
/// The dtype table and dtype_from_name.
void bind_dtype(py::module_& m);
/// genesis._C.Allocator (a CachingAllocator), the process-wide allocators,
/// MemoryEvent and the Python-location capture switch.
void bind_allocator(py::module_& m);
/// Pinned host memory: PinnedBuffer, allocate_pinned, is_pinned, the
/// "pinned memory for transfers" switch.
void bind_pinned(py::module_& m);
/// CUDA runtime queries available in C++ today (is_available, device_count,
/// synchronize, mem_get_info). TODO(issue 6, CUDA runtime): device name,
/// capability, properties, stream and device guards are bound here once the
/// C++ side lands.
void bind_cuda_runtime(py::module_& m);
/// genesis._C.SimulatedAllocator: a CachingAllocator over a SimulatedDevice,
/// so CI tests the allocator through Python without a GPU.
void bind_simulated(py::module_& m);

// --- tensors (issue 6, T; branch python3) ---
/// genesis._C.Tensor and the tensor functions (tensor*.cpp, dlpack.cpp).
void bind_tensor(py::module_& m);

}  // namespace genesis::python
