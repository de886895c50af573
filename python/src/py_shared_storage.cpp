// genesis.SharedStorage(shape, dtype, shared_memory_name=None): a
// genesis.Storage in POSIX shared memory, over storage::SharedStorage
// (storage/shared_storage.h, Note [Shared memory ownership]).
//
// The Storage part is storage::shared_memory_storage over the mapping: the
// mapping lives exactly as long as something uses it (Note [Storages over
// mappings], Note [Python storage objects]). Names are given with or without the
// leading '/' ("psm_1" and "/psm_1" are the same segment); .name has it.
// Pickling attaches by name, so a SharedStorage can be passed to a
// multiprocessing child as an argument.
#include "genesis/storage/shared_storage.h"
#include "genesis/storage/storage_factories.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "py_bindings.h"
#include "py_values.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

using storage::SharedStorage;

struct PySharedStorage : PyStorage {
  std::shared_ptr<SharedStorage> shm;  // name, ownership and unlink; outlives close()
  const char* kind() const override { return "SharedStorage"; }
};

std::string shm_name(const std::string& name) { return !name.empty() && name[0] == '/' ? name : "/" + name; }

std::unique_ptr<PySharedStorage> wrap(SharedStorage&& shm) {
  auto p = std::make_unique<PySharedStorage>();
  p->shm = std::make_shared<SharedStorage>(std::move(shm));
  p->storage = storage::shared_memory_storage(p->shm);
  return p;
}

std::unique_ptr<PySharedStorage> make(const py::object& shape, const py::object& dtype, const py::object& name) {
  auto dims = to_dims(shape, "shape");
  const DType t = to_dtype(dtype);
  std::optional<std::string> n;
  if (!name.is_none()) {
    if (!py::isinstance<py::str>(name))
      throw py::type_error("shared_memory_name must be a str or None, got " +
                           std::string(py::str(py::type::of(name).attr("__name__"))));
    n = shm_name(name.cast<std::string>());
  }
  return wrap(SharedStorage(std::move(dims), t, std::move(n)));
}

}  // namespace

void bind_shared_storage(py::module_& m) {
  py::class_<PySharedStorage, PyStorage>(m, "SharedStorage", py::custom_type_setup(setup_storage_buffer), R"doc(
A storage in POSIX shared memory that other processes map by name.

    a = genesis.SharedStorage((1024,), genesis.float32)          # new, generated name
    b = genesis.SharedStorage((1024,), genesis.float32, a.name)  # in another process: attach
    numpy.asarray(b)[:] = 1.0; b.close(); a.unlink()

With a name: attaches if the segment exists (sizes must match), else creates
it. close() releases this handle (the mapping goes when no array or view uses
it); unlink() removes the name. An unnamed segment is unlinked when its
creator is gone, also when it is killed (a watcher process removes the names
of a process that ended without cleaning up); a named one lives until
unlink(). A new segment takes its memory from /dev/shm when it is created:
genesis.OutOfMemoryError says so if there is too little free, instead of a
SIGBUS at a later write. Usable as a context manager (closes on exit).)doc")
      .def(py::init(&make), py::arg("shape"), py::arg("dtype"), py::arg("shared_memory_name") = py::none())
      .def_static(
          "create",
          [](const std::string& name, const py::object& shape, const py::object& dtype, bool auto_unlink) {
            return wrap(
                SharedStorage::create(shm_name(name), to_dims(shape, "shape"), to_dtype(dtype), auto_unlink));
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype"), py::arg("auto_unlink") = false,
          "Creates the segment `name`; ValueError if it exists.")
      .def_static(
          "attach",
          [](const std::string& name, const py::object& shape, const py::object& dtype) {
            return wrap(SharedStorage::attach(shm_name(name), to_dims(shape, "shape"), to_dtype(dtype)));
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype"),
          "Attaches to the existing segment `name` (ValueError if missing or of another size).")
      .def_property_readonly("name",
                             [](py::handle self_) {
                               const PySharedStorage& p = self_of<PySharedStorage>(self_);
                               return p.shm->name();
                             })
      .def_property_readonly(
          "is_owner",
          [](py::handle self_) {
            const PySharedStorage& p = self_of<PySharedStorage>(self_);
            return p.shm->is_owner();
          },
          "True if this handle created the name.")
      .def_property_readonly("auto_unlink",
                             [](py::handle self_) {
                               const PySharedStorage& p = self_of<PySharedStorage>(self_);
                               return p.shm->auto_unlink();
                             })
      .def(
          "close",
          [](py::handle self_) {
            PySharedStorage& p = self_of<PySharedStorage>(self_);
            p.storage = Storage();
          },
          "Releases this handle (idempotent). The mapping is unmapped when no NumPy array, view or other "
          "storage handle uses it any more.")
      .def(
          "unlink",
          [](py::handle self_) {
            PySharedStorage& p = self_of<PySharedStorage>(self_);
            return p.shm->unlink();
          },
          "Removes the name (True if this call removed it); mappings stay valid.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](py::handle self_, py::args) {
             PySharedStorage& p = self_of<PySharedStorage>(self_);
             p.storage = Storage();
             return false;
           })
      .def("__reduce__",
           [](py::object self) {
             auto& p = self_of<PySharedStorage>(self);
             // Closed is closed for pickling too: attaching by name would
             // hand back memory this handle gave up.
             (void)p.get();
             // A module-level function: pickle cannot name a pybind11 static method.
             return py::make_tuple(
                 py::module_::import("genesis.storage").attr("_attach_shared"),
                 py::make_tuple(p.shm->name(), dims_to_py(p.shm->shape()), std::string(dtype_name(p.shm->dtype()))));
           })
      .def("__repr__", [](py::handle self_) {
        const PySharedStorage& p = self_of<PySharedStorage>(self_);
        std::string s = "genesis.SharedStorage(name='" + p.shm->name() +
                        "', shape=" + std::string(py::str(dims_to_py(p.shm->shape()))) + ", dtype=genesis." +
                        std::string(dtype_name(p.shm->dtype()));
        return s + (p.storage.defined() ? ")" : ", closed)");
      });
}

}  // namespace genesis::python
