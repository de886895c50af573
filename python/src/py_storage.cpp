// genesis.Storage: a refcounted buffer of shape x dtype on
// one device, bound over genesis::Storage (storage/storage.h). Lifetime and
// NumPy export: Note [Python storage objects] and Note [Buffer export] in
// py_storage_object.h. Allocating calls record the Python caller as the
// allocation site (py_location.h) and release the GIL while they copy.
//
// Tensors take and return these objects: PyStorage and the
// helpers in py_storage_object.h / py_values.h are their interface.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "py_bindings.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/copy.h"
#include "py_values.h"
#include "py_location.h"
#include "py_storage_create.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

const Device kCpu(DeviceType::kCPU);

// The storage of a genesis.Storage method's `self` (TypeError if not
// initialised, ValueError if closed).
const Storage& live(py::handle self) { return self_of<PyStorage>(self).get(); }

DType dtype_or_default(const py::object& dtype) { return dtype.is_none() ? DType::kFloat32 : to_dtype(dtype); }

std::unique_ptr<PyStorage> make_empty(const py::object& shape, const py::object& dtype, const py::object& device,
                                      bool pinned, bool zero) {
  auto dims = to_dims(shape, "shape");
  const DType t = dtype_or_default(dtype);
  const Device d = to_device(device);
  AllocationSite site;
  Storage s =
      zero ? Storage::zeros(std::move(dims), t, d) : Storage::empty(std::move(dims), t, d, kCurrentStream, pinned);
  return std::make_unique<PyStorage>(std::move(s));
}

// Host values of a storage as nested Python lists (any device: a GPU storage
// is copied to the host first). Floating dtypes read as float64, integers as
// int64, so every value is exact.
py::object to_list(const Storage& s) {
  Storage host;
  {
    py::gil_scoped_release release;
    host = s.device().is_cpu() ? s : s.to(kCpu);
    const DType wide = is_floating(host.dtype())      ? DType::kFloat64
                       : host.dtype() == DType::kBool ? DType::kBool
                                                      : DType::kInt64;
    if (host.dtype() != wide) host = convert_dtype(host, wide);
  }
  const auto& shape = host.shape();
  const char* base = static_cast<const char*>(host.data_ptr());
  const DType t = host.dtype();
  std::size_t next = 0;
  auto scalar = [&]() -> py::object {
    const std::size_t i = next++;
    if (t == DType::kFloat64) return py::float_(reinterpret_cast<const double*>(base)[i]);
    if (t == DType::kBool) return py::bool_(base[i] != 0);
    return py::int_(reinterpret_cast<const std::int64_t*>(base)[i]);
  };
  auto build = [&](auto&& self, std::size_t depth) -> py::object {
    if (depth == shape.size()) return scalar();
    py::list out(static_cast<std::size_t>(shape[depth]));
    for (std::int64_t i = 0; i < shape[depth]; ++i) out[static_cast<std::size_t>(i)] = self(self, depth + 1);
    return out;
  };
  return build(build, 0);
}

std::string repr(const PyStorage& p) {
  if (!p.storage.defined()) return std::string("genesis.") + p.kind() + "(closed)";
  const Storage& s = p.storage;
  std::string shape = py::str(dims_to_py(s.shape()));
  return std::string("genesis.") + p.kind() + "(shape=" + shape + ", dtype=genesis." +
         std::string(dtype_name(s.dtype())) + ", device='" + s.device().str() +
         "', nbytes=" + std::to_string(s.nbytes()) + (p.readonly ? ", readonly=True" : "") + ")";
}

}  // namespace

void bind_storage(py::module_& m) {
  py::class_<PyStorage>(m, "Storage", py::custom_type_setup(setup_storage_buffer), R"doc(
A refcounted buffer of ``shape`` x ``dtype`` on one device.

    s = genesis.Storage((2, 3), genesis.float32, device='cpu')   # uninitialised
    s = genesis.create_storage([[1, 2], [3, 4]], device='cuda')
    s.to('cpu').numpy()

Memory comes from the device's caching allocator and goes back to it when the
last reference (this object, NumPy arrays made from it, views) is gone.
CPU storages support the buffer protocol: numpy.asarray(s) shares memory.)doc")
      .def(py::init([](const py::object& shape, const py::object& dtype, const py::object& device, bool pinned) {
             return make_empty(shape, dtype, device, pinned, false);
           }),
           py::arg("shape"), py::arg("dtype") = py::none(), py::arg("device") = "cpu", py::arg("pinned") = false,
           "Uninitialised memory (dtype None: float32). pinned=True takes page-locked host memory (needs a GPU).")
      .def_static(
          "zeros",
          [](const py::object& shape, const py::object& dtype, const py::object& device) {
            return make_empty(shape, dtype, device, false, true);
          },
          py::arg("shape"), py::arg("dtype") = py::none(), py::arg("device") = "cpu", "Zero-filled memory.")
      // --- what it is ---
      .def_property_readonly("shape", [](py::handle self_) { return dims_to_py(live(self_).shape()); })
      .def_property_readonly("dtype", [](py::handle self_) { return dtype_object(live(self_).dtype()); })
      .def_property_readonly("device", [](py::handle self_) { return device_object(live(self_).device()); })
      .def_property_readonly("nbytes", [](py::handle self_) { return live(self_).nbytes(); })
      .def_property_readonly("itemsize", [](py::handle self_) { return live(self_).itemsize(); })
      .def(
          "size_bytes", [](py::handle self_) { return live(self_).nbytes(); }, "nbytes under a second name.")
      .def("numel", [](py::handle self_) { return live(self_).numel(); })
      .def("element_size", [](py::handle self_) { return live(self_).itemsize(); })
      .def_property_readonly(
          "data_ptr", [](py::handle self_) { return reinterpret_cast<std::uintptr_t>(live(self_).data_ptr()); },
          "Address of the first element (0 for an empty storage). A property, not a method.")
      .def_property_readonly(
          "use_count", [](py::handle self_) { return self_of<PyStorage>(self_).storage.use_count(); },
          "Strong references to the memory: this object, NumPy exports, views and other handles (0 once closed).")
      .def_property_readonly("readonly", [](py::handle self_) { return self_of<PyStorage>(self_).readonly; })
      .def_property_readonly("closed", [](py::handle self_) { return !self_of<PyStorage>(self_).storage.defined(); })
      .def("is_pinned", [](py::handle self_) { return live(self_).is_pinned(); })
      .def(
          "is_pooled", [](py::handle self_) { return live(self_).is_pooled(); },
          "True when the memory is a block of a caching allocator.")
      .def(
          "is_contiguous",
          [](py::handle self_) {
            live(self_);  // closed storages raise
            return true;
          },
          "Always True: a storage is one packed row-major buffer (views may not be).")
      .def(
          "__len__", [](py::handle self_) { return live(self_).numel(); }, "Number of elements.")
      .def("__repr__", [](py::handle self_) { return repr(self_of<PyStorage>(self_)); })
      // --- moving and copying ---
      .def(
          "to",
          [](py::object self, const py::object& device) -> py::object {
            const Storage s = self_of<PyStorage>(self).get();
            const Device d = to_device(device);
            if (s.device() == d) return self;  // the same object: keeps its class and read-only flag
            AllocationSite site;
            Storage out;
            {
              py::gil_scoped_release release;
              out = s.to(d);
            }
            return wrap_storage(std::move(out));
          },
          py::arg("device"), "A copy on `device`, or this storage itself when it is already there.")
      .def(
          "cpu", [](py::object self) { return self.attr("to")("cpu"); }, "to('cpu').")
      .def(
          "cuda",
          [](py::object self, const py::object& device) {
            return self.attr("to")(device.is_none() ? py::object(py::str("cuda")) : device);
          },
          py::arg("device") = py::none(), "to('cuda') (the current GPU) or to the given GPU.")
      .def(
          "copy_",
          [](py::object self, py::handle other, bool non_blocking) {
            Storage dst = writable_storage_arg(self, "the destination");
            const Storage src = storage_arg(other, "copy_(other)");
            {
              py::gil_scoped_release release;
              dst.copy_(src, non_blocking);
            }
            return self;
          },
          py::arg("other"), py::arg("non_blocking") = false,
          "Copies `other` into this storage (any devices; the dtype is converted; element counts must match). "
          "Returns self.")
      .def(
          "clone",
          [](py::handle self_) {
            const PyStorage& p = self_of<PyStorage>(self_);
            const Storage s = p.get();
            AllocationSite site;
            Storage out;
            {
              py::gil_scoped_release release;
              out = s.clone();
            }
            return wrap_storage(std::move(out));
          },
          "A new storage with the same contents on the same device.")
      .def(
          "synchronize",
          [](py::handle self_) {
            const PyStorage& p = self_of<PyStorage>(self_);
            const Storage s = p.get();  // a reference of our own: another thread may close() meanwhile
            py::gil_scoped_release release;
            s.synchronize();
          },
          "Waits for queued copies on the storage's GPU stream (no-op on the CPU).")
      // --- host values ---
      .def(
          "numpy",
          [](py::object self) {
            const Storage s = self_of<PyStorage>(self).get();
            check_numpy_exportable(s, self_of<PyStorage>(self).kind());
            return as_numpy(self);
          },
          "A NumPy array sharing this CPU storage's memory (no copy; it keeps the memory alive). "
          "TypeError for GPU storages: call .cpu() first.")
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) {
            const Storage s = self_of<PyStorage>(self).get();
            check_numpy_exportable(s, self_of<PyStorage>(self).kind());
            py::object arr = as_numpy(self);
            if (!dtype.is_none()) arr = arr.attr("astype")(dtype, py::arg("copy") = false);
            if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
            return arr;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def(
          "tolist", [](py::handle self_) { return to_list(live(self_)); },
          "Nested lists of Python numbers (any device and dtype; bfloat16 and float16 as float).");

  m.def(
      "create_storage",
      [](py::handle data, const py::object& device, const py::object& dtype) {
        const Device d = to_device(device);
        std::optional<DType> t;
        if (!dtype.is_none()) t = to_dtype(dtype);
        return std::make_unique<PyStorage>(storage_from_data(data, d, t));
      },
      py::arg("data"), py::arg("device") = "cpu", py::arg("dtype") = py::none());
}

}  // namespace genesis::python
