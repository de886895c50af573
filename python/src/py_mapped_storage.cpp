// genesis.MappedStorage(filename, shape, dtype, mode='r', offset=0):
// a genesis.Storage over a memory-mapped file, with numpy.memmap's modes
// (r, r+, w+, c), over storage::MappedStorage (storage/mapped_storage.h).
//
// As for SharedStorage, the Storage part is storage::mapped_file_storage over
// the mapping, whose last user flushes and unmaps, so close() never leaves an
// array dangling (Note [Storages over mappings], Note [Python storage
// objects]). Mode 'r' storages are
// read-only (Note [Read-only storages]). shape=None maps the rest of the file
// from `offset` as a 1-D storage (modes r, r+, c), as numpy.memmap does.
#include "genesis/core/error.h"
#include "genesis/storage/mapped_storage.h"
#include "genesis/storage/storage_factories.h"

#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "py_bindings.h"
#include "py_values.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

using storage::MappedStorage;

struct PyMappedStorage : PyStorage {
  std::shared_ptr<MappedStorage> map;  // filename, mode, flush; outlives close()
  const char* kind() const override { return "MappedStorage"; }
};

std::vector<std::int64_t> whole_file_shape(const std::string& filename, DType t, std::int64_t offset,
                                           const std::string& mode) {
  if (mode == "w+" || mode == "write") throw py::value_error("MappedStorage: mode 'w+' creates the file and needs a shape");
  std::error_code ec;
  const auto size = std::filesystem::file_size(filename, ec);
  // FileNotFoundError, IsADirectoryError, ... as numpy.memmap raises.
  if (ec) GENESIS_THROW_FILE(filename, ec.value(), "MappedStorage: cannot read the size of '", filename, "'");
  if (offset < 0 || static_cast<std::uintmax_t>(offset) > size)
    throw py::value_error("MappedStorage: offset " + std::to_string(offset) + " is outside '" + filename + "' (" +
                          std::to_string(size) + " bytes)");
  const std::uintmax_t rest = size - static_cast<std::uintmax_t>(offset);
  if (rest % dtype_size(t) != 0)
    throw py::value_error("MappedStorage: the " + std::to_string(rest) + " bytes of '" + filename + "' after offset " +
                          std::to_string(offset) + " are not a multiple of the " + std::string(dtype_name(t)) +
                          " size; pass a shape");
  return {static_cast<std::int64_t>(rest / dtype_size(t))};
}

std::unique_ptr<PyMappedStorage> make(const py::object& filename, const py::object& shape, const py::object& dtype,
                                      const std::string& mode, std::int64_t offset) {
  // An open file object (numpy.memmap takes one too) maps the file it names.
  const bool file_object = py::hasattr(filename, "fileno") && py::hasattr(filename, "name") &&
                           !py::isinstance<py::int_>(filename.attr("name"));
  const py::object name = file_object ? py::object(filename.attr("name")) : filename;
  const std::string path = py::module_::import("os").attr("fsdecode")(name).cast<std::string>();
  const DType t = dtype.is_none() ? DType::kUInt8 : to_dtype(dtype);
  auto dims = shape.is_none() ? whole_file_shape(path, t, offset, mode) : to_dims(shape, "shape");
  auto p = std::make_unique<PyMappedStorage>();
  {
    py::gil_scoped_release release;  // opening may touch a slow disk
    p->map = std::make_shared<MappedStorage>(path, std::move(dims), t, mode, offset);
  }
  p->storage = storage::mapped_file_storage(p->map);  // read-only in mode 'r'
  p->readonly = p->storage.is_read_only();
  return p;
}

void close(PyMappedStorage& p) {
  if (!p.storage.defined()) return;
  // Flush while the handle is ours, so that errors reach the caller; then
  // release it (the deleter unmaps once nothing else uses the mapping).
  Storage s = std::move(p.storage);
  p.storage = Storage();
  py::gil_scoped_release release;
  p.map->flush();
}

}  // namespace

void bind_mapped_storage(py::module_& m) {
  py::class_<PyMappedStorage, PyStorage>(m, "MappedStorage", py::custom_type_setup(setup_storage_buffer), R"doc(
A storage over a memory-mapped file, with numpy.memmap's modes:
'r' read-only, 'r+' read/write an existing file, 'w+' create or truncate,
'c' copy-on-write (writable in memory, the file never changes).

    m = genesis.MappedStorage('data.bin', (1000, 64), genesis.float32, mode='w+')
    numpy.asarray(m)[:] = 1.0; m.flush(); m.close()

close() flushes (r+, w+) and releases this handle; the mapping goes when no
array or view uses it. Usable as a context manager (closes on exit).

Only regular files map. The file must not shrink while mapped: reading or
writing past its new end kills the interpreter with SIGBUS ("Bus error"), as
with numpy.memmap; `python -X faulthandler` shows the line.)doc")
      .def(py::init(&make), py::arg("filename"), py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
           py::arg("mode") = "r", py::arg("offset") = 0)
      .def_property_readonly("filename",
                             [](py::handle self_) {
                               const PyMappedStorage& p = self_of<PyMappedStorage>(self_);
                               return p.map->filename();
                             })
      .def_property_readonly("mode",
                             [](py::handle self_) {
                               const PyMappedStorage& p = self_of<PyMappedStorage>(self_);
                               return p.map->mode();
                             })
      .def_property_readonly("offset",
                             [](py::handle self_) {
                               const PyMappedStorage& p = self_of<PyMappedStorage>(self_);
                               return p.map->offset();
                             })
      .def(
          "flush",
          [](py::handle self_) {
            PyMappedStorage& p = self_of<PyMappedStorage>(self_);
            // Holding a reference keeps the mapping alive even if another
            // thread closes this handle while the GIL is released.
            const Storage keep = p.get();
            py::gil_scoped_release release;
            p.map->flush();
          },
          "Writes changes to the file and waits (r+, w+); a no-op in modes r and c.")
      .def(
          "close", [](py::handle self_) { close(self_of<PyMappedStorage>(self_)); },
          "Flushes (r+, w+) and releases this handle; idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](py::handle self_, py::args) {
             PyMappedStorage& p = self_of<PyMappedStorage>(self_);
             close(p);
             return false;
           })
      .def("__repr__", [](py::handle self_) {
        const PyMappedStorage& p = self_of<PyMappedStorage>(self_);
        std::string s = "genesis.MappedStorage('" + p.map->filename() +
                        "', shape=" + std::string(py::str(dims_to_py(p.map->shape()))) + ", dtype=genesis." +
                        std::string(dtype_name(p.map->dtype())) + ", mode='" + p.map->mode() + "'";
        return s + (p.storage.defined() ? ")" : ", closed)");
      });
}

}  // namespace genesis::python
