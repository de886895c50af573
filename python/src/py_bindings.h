// The pieces of the `genesis._C` extension module, one per concern.
//
// py_module.cpp calls every bind_* function in the order below; each lives in its
// own .cpp file next to this header. A new area (storage, tensor, the CUDA
// device queries) adds a bind_* function and a file, and one line in
// py_module.cpp. Bindings stay thin: they convert arguments and
// results and call the C++ API; policy lives in C++ or in the Python package.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

#include "genesis/core/error.h"

namespace genesis::python {

namespace py = pybind11;

/// Exception types (OutOfMemoryError, CudaError) and the translator that maps
/// every genesis::Error onto a Python exception (Note [Errors] in
/// include/genesis/core/error.h). Must run first: later bindings may throw.
void bind_errors(py::module_& m);

/// Raises `type` (a Python exception class, such as PyExc_IndexError) for a
/// genesis error, as the translator does: the message without the C++
/// location (appended only with GENESIS_DEBUG_ERRORS=1), the location in
/// the exception's `cpp_location`. For bindings that map a C++ error onto
/// another Python class (an InvalidArgumentError that NumPy calls IndexError).
[[noreturn]] void throw_python_error(PyObject* type, const Error& e);
/// The text of `e` that a user sees: message() for a genesis error (what()
/// with GENESIS_DEBUG_ERRORS=1), what() for any other exception.
std::string error_text(const std::exception& e);

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
/// CUDA runtime: device count and queries, set_device, device
/// properties, peer access, the `with genesis.cuda.device(i):` guard.
void bind_cuda_runtime(py::module_& m);
/// CUDA streams, events, the current stream and the stream guard.
void bind_cuda_stream(py::module_& m);
/// genesis._C.SimulatedAllocator: a CachingAllocator over a SimulatedDevice,
/// so CI tests the allocator through Python without a GPU.
void bind_simulated(py::module_& m);
/// The allocator configuration text: parse_alloc_conf, alloc_conf_keys,
/// configure_cuda_allocators (py_alloc_conf.cpp).
void bind_alloc_conf(py::module_& m);
/// The table behind libgenesis_torch_allocator.so and its test hooks
/// (py_torch_backend.cpp).
void bind_torch_backend(py::module_& m);

// --- storages: py_storage_object.h holds the shared pieces ---
/// genesis.Storage and create_storage.
void bind_storage(py::module_& m);
/// genesis.StorageView.
void bind_storage_view(py::module_& m);
/// genesis.SharedStorage (a Storage subclass; after bind_storage).
void bind_shared_storage(py::module_& m);
/// genesis.MappedStorage (a Storage subclass; after bind_storage).
void bind_mapped_storage(py::module_& m);
/// convert_dtype, copy_storage, aligned_storage, BatchStorage.
void bind_storage_ops(py::module_& m);
/// inspect_storage and the C++ StorageTracker.
void bind_storage_inspect(py::module_& m);
/// Storage.share_ipc / Storage.from_ipc and ipc_shareable_storage (after
/// bind_storage: adds methods to Storage).
void bind_storage_ipc(py::module_& m);

/// set_num_threads, get_num_threads, available_cpus (py_threads.cpp).
void bind_threads(py::module_& m);
/// The bytes behind pickled tensors and storages (py_pickling.cpp; after
/// bind_tensor and bind_storage_view).
void bind_pickling(py::module_& m);

// --- tensors ---
/// genesis._C.Tensor and the tensor functions (py_tensor*.cpp, py_dlpack.cpp).
void bind_tensor(py::module_& m);

// --- the memory debugger ---
/// Memory sources, genesis._C.MemoryDebugger and its reports, and
/// genesis_mem_main (py_debug_tools.cpp).
void bind_debug_tools(py::module_& m);
/// The metrics endpoint and the distributed memory monitor's roles
/// (py_distributed_tools.cpp).
void bind_distributed_tools(py::module_& m);

/// Refuses __new__ without __init__ for every class bound so far (Note
/// [Uninitialised instances], py_new_guard.cpp). Called last.
void guard_uninitialised_instances(py::module_& m);

}  // namespace genesis::python
