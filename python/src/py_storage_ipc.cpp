// CUDA IPC of GPU storages, over storage/cuda_ipc_storage.h:
//   exporter: s = genesis.cuda.ipc_shareable_storage(shape, dtype); h = s.share_ipc()
//   importer: t = genesis.Storage.from_ipc(h, shape, dtype)
// The handle is IpcHandle::to_string(), printable ASCII, so it can travel
// through a pipe, a queue or an environment variable. Note [Lifetime of
// shared GPU memory]: the exporter keeps its storage alive until every
// importer has dropped theirs.
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "py_bindings.h"
#include "genesis/storage/cuda_ipc_storage.h"
#include "py_values.h"
#include "py_location.h"
#include "py_storage_object.h"

namespace genesis::python {

void bind_storage_ipc(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<PyStorage>>(m.attr("Storage"));
  cls.def(
         "share_ipc",
         [](py::handle self_) {
           const PyStorage& p = self_of<PyStorage>(self_);
           const Storage& s = p.get();
           return export_storage(s).to_string();
         },
         "A CUDA IPC handle (a string) another process opens with genesis.Storage.from_ipc. GPU storages "
         "only: ValueError for CPU storages.")
      .def_static(
          "from_ipc",
          [](const std::string& handle, const py::object& shape, const py::object& dtype) {
            const cuda::IpcHandle h = cuda::IpcHandle::from_string(handle);
            auto dims = to_dims(shape, "shape");
            const DType t = to_dtype(dtype);
            py::gil_scoped_release release;
            return std::make_unique<PyStorage>(import_storage(h, std::move(dims), t));
          },
          py::arg("handle"), py::arg("shape"), py::arg("dtype"),
          "Maps a storage exported by another process (ValueError for a malformed handle or a size mismatch, "
          "genesis.CudaError when CUDA cannot open it).");

  m.def(
      "ipc_shareable_storage",
      [](const py::object& shape, const py::object& dtype, const py::object& device) {
        auto dims = to_dims(shape, "shape");
        const DType t = to_dtype(dtype);
        const Device d = to_device(device);
        AllocationSite site;
        return std::make_unique<PyStorage>(ipc_shareable_storage(std::move(dims), t, d));
      },
      py::arg("shape"), py::arg("dtype"), py::arg("device"));
}

}  // namespace genesis::python
