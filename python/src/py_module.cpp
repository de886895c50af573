// Entry point of the `genesis._C` extension module. The Python package
// `genesis` (python/genesis/) imports it and builds the public API on top.
#include "py_bindings.h"
#include "genesis/version.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Genesis C++ bindings (internal: use the `genesis` package)";
  // The version of the library this module was built from (genesis.__version__).
  m.attr("__version__") = GENESIS_VERSION_STRING;
  genesis::python::bind_errors(m);
  genesis::python::bind_device(m);
  genesis::python::bind_dtype(m);
  genesis::python::bind_allocator(m);
  genesis::python::bind_pinned(m);
  genesis::python::bind_cuda_runtime(m);
  genesis::python::bind_cuda_stream(m);
  genesis::python::bind_simulated(m);
  genesis::python::bind_alloc_conf(m);
  genesis::python::bind_torch_backend(m);
  genesis::python::bind_storage(m);
  genesis::python::bind_storage_view(m);
  genesis::python::bind_shared_storage(m);
  genesis::python::bind_mapped_storage(m);
  genesis::python::bind_storage_ops(m);
  genesis::python::bind_storage_inspect(m);
  genesis::python::bind_storage_ipc(m);
  genesis::python::bind_threads(m);
  genesis::python::bind_tensor(m);  // tensors
  genesis::python::bind_pickling(m);
  genesis::python::bind_debug_tools(m);
  genesis::python::bind_distributed_tools(m);
  // Last: it guards every class bound above (Note [Uninitialised instances]).
  genesis::python::guard_uninitialised_instances(m);
}
