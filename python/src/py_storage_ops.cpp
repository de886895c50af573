// Whole-storage operations: convert_dtype, copy_storage,
// aligned_storage and BatchStorage. Thin: arguments are converted, the GIL is
// released around the copies, allocations record the Python caller.
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "py_bindings.h"
#include "genesis/storage/batch_storage.h"
#include "genesis/storage/copy.h"
#include "py_values.h"
#include "py_location.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

// genesis.BatchStorage: the C++ BatchStorage plus the Python storages it was
// made from (returned by .storages, so identity and subclasses survive).
struct PyBatchStorage {
  std::unique_ptr<BatchStorage> batch;
  py::list storages;
};

std::vector<Storage> storages_from(const py::handle& seq, const char* what, bool writable) {
  const auto refuse = [&] {
    return py::type_error(std::string(what) + " must be a sequence of genesis.Storage, got " + type_name_of(seq));
  };
  if (!PySequence_Check(seq.ptr()) || py::isinstance<py::str>(seq)) throw refuse();
  // The length first: a type can be a sequence without having one (a 0-d
  // tensor), and iterating it would run past the error.
  const Py_ssize_t n = PySequence_Size(seq.ptr());
  if (n < 0) {
    PyErr_Clear();
    throw refuse();
  }
  std::vector<Storage> out;
  for (Py_ssize_t i = 0; i < n; ++i) {
    py::object item = py::reinterpret_borrow<py::sequence>(seq)[static_cast<std::size_t>(i)];
    const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
    out.push_back(writable ? writable_storage_arg(item, name.c_str()) : storage_arg(item, name.c_str()));
  }
  return out;
}

}  // namespace

void bind_storage_ops(py::module_& m) {
  m.def(
      "convert_dtype",
      [](py::handle storage, const py::object& dtype) {
        const Storage src = storage_arg(storage, "convert_dtype(storage)");
        const DType t = to_dtype(dtype);
        AllocationSite site;
        Storage out;
        {
          py::gil_scoped_release release;
          out = convert_dtype(src, t);
        }
        return wrap_storage(std::move(out));
      },
      py::arg("storage"), py::arg("dtype"),
      "A new storage on the same device holding `storage` converted to `dtype` (Note [Cast semantics]).");

  m.def(
      "copy_storage",
      [](py::handle src, py::handle dst, bool non_blocking) {
        const Storage s = storage_arg(src, "copy_storage(src)");
        Storage d = writable_storage_arg(dst, "copy_storage(dst)");
        py::gil_scoped_release release;
        copy_storage(s, d, non_blocking);
      },
      py::arg("src"), py::arg("dst"), py::arg("non_blocking") = false,
      "dst.copy_(src) between any two devices (dtype converted, element counts must match).");

  m.def(
      "aligned_storage",
      [](const py::object& shape, const py::object& dtype, const py::object& device, const py::object& alignment_arg) {
        const std::int64_t alignment = to_int64(alignment_arg, "aligned_storage: alignment");
        if (alignment <= 0) {
          throw py::value_error("aligned_storage: alignment must be a positive power of two, got " +
                                std::to_string(alignment));
        }
        auto dims = to_dims(shape, "shape");
        const DType t = to_dtype(dtype);
        const Device d = to_device(device);
        AllocationSite site;
        return std::make_unique<PyStorage>(aligned_storage(std::move(dims), t, d, static_cast<std::size_t>(alignment)));
      },
      py::arg("shape"), py::arg("dtype"), py::arg("device") = "cpu", py::arg("alignment") = 64,
      "Uninitialised storage whose data_ptr is a multiple of `alignment` (a power of two).");

  py::class_<PyBatchStorage>(m, "BatchStorage", R"doc(
Many copies at once, spread over several CUDA streams per GPU.

    genesis.BatchStorage([a, b, c]).batch_copy([ga, gb, gc])   # any devices
    gpu = genesis.BatchStorage(host_storages).to('cuda')

batch_copy returns when every copy is done.)doc")
      .def(py::init([](const py::object& storages, int streams) {
             auto p = std::make_unique<PyBatchStorage>();
             p->batch = std::make_unique<BatchStorage>(storages_from(storages, "storages", false), streams);
             p->storages = py::list(storages);
             return p;
           }),
           py::arg("storages"), py::arg("streams") = 4)
      .def_property_readonly("storages",
                             [](py::handle self_) {
                               const PyBatchStorage& p = self_of<PyBatchStorage>(self_);
                               return p.storages;
                             })
      .def("__len__",
           [](py::handle self_) {
             const PyBatchStorage& p = self_of<PyBatchStorage>(self_);
             return p.batch->size();
           })
      .def(
          "batch_copy",
          [](py::handle self_, const py::object& targets) {
            PyBatchStorage& p = self_of<PyBatchStorage>(self_);
            std::vector<Storage> t = storages_from(targets, "targets", true);
            py::gil_scoped_release release;
            p.batch->batch_copy(t);
          },
          py::arg("targets"), "Copies storages[i] into targets[i] for every i and waits for all.")
      .def(
          "to",
          [](py::handle self_, const py::object& device) {
            PyBatchStorage& p = self_of<PyBatchStorage>(self_);
            const Device d = to_device(device);
            AllocationSite site;
            std::vector<Storage> out;
            {
              py::gil_scoped_release release;
              out = p.batch->to(d);
            }
            py::list result;
            for (Storage& s : out) result.append(wrap_storage(std::move(s)));
            return result;
          },
          py::arg("device"), "New storages on `device`, filled by batch_copy.")
      .def("__repr__", [](py::handle self_) {
        const PyBatchStorage& p = self_of<PyBatchStorage>(self_);
        return "genesis.BatchStorage(" + std::to_string(p.batch->size()) + " storages)";
      });
}

}  // namespace genesis::python
