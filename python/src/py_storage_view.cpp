// genesis.StorageView(base, offset, shape, stride): a zero-copy
// strided window on a storage, bound over genesis::StorageView (bounds are
// checked by C++ at construction). CPU views export their elements through
// the buffer protocol with their strides (Note [Buffer export]), so
// numpy.asarray(view) is a strided array over the base's memory.
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "py_bindings.h"
#include "py_values.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

const StorageView& view_of(py::handle self) { return self_of<PyStorageView>(self).view; }

}  // namespace

void bind_storage_view(py::module_& m) {
  py::class_<PyStorageView>(m, "StorageView", py::custom_type_setup(setup_view_buffer), R"doc(
A zero-copy strided view of a storage.

    v = genesis.StorageView(base, offset, shape, stride)   # offset, strides in elements
    v.data_ptr == base.data_ptr + offset * base.itemsize
    v.is_contiguous(); numpy.asarray(v)

stride=None means the packed row-major strides of shape; StorageView(base)
views the whole base. The view keeps the base alive.)doc")
      .def(py::init([](py::object base, const py::object& offset, const py::object& shape, const py::object& stride) {
             const Storage& b = storage_arg(base, "StorageView(base)");
             auto p = std::make_unique<PyStorageView>(PyStorageView{StorageView(b), base, false});
             if (!shape.is_none() || !offset.is_none() || !stride.is_none()) {
               auto dims = shape.is_none() ? b.shape() : to_dims(shape, "shape");
               auto strides = stride.is_none() ? contiguous_strides(dims) : to_dims(stride, "stride");
               std::int64_t off = 0;
               if (!offset.is_none()) {
                 auto o = to_dims(offset, "offset");
                 if (o.size() != 1 || PySequence_Check(offset.ptr())) throw py::type_error("offset must be an int");
                 off = o[0];
               }
               p->view = StorageView(b, off, std::move(dims), std::move(strides));
             }
             p->readonly = self_of<PyStorage>(base).readonly;
             return p;
           }),
           py::arg("base"), py::arg("offset") = py::none(), py::arg("shape") = py::none(),
           py::arg("stride") = py::none())
      .def_property_readonly("base", [](py::handle self_) { return self_of<PyStorageView>(self_).base; })
      .def_property_readonly("offset", [](py::handle self_) { return view_of(self_).offset(); })
      .def_property_readonly("shape", [](py::handle self_) { return dims_to_py(view_of(self_).shape()); })
      .def_property_readonly("stride", [](py::handle self_) { return dims_to_py(view_of(self_).stride()); })
      .def_property_readonly("dtype", [](py::handle self_) { return dtype_object(view_of(self_).dtype()); })
      .def_property_readonly("device", [](py::handle self_) { return device_object(view_of(self_).device()); })
      .def_property_readonly(
          "nbytes", [](py::handle self_) { return view_of(self_).nbytes(); },
          "numel x itemsize: the bytes of the view's elements if packed.")
      .def_property_readonly("readonly", [](py::handle self_) { return self_of<PyStorageView>(self_).readonly; })
      .def("numel", [](py::handle self_) { return view_of(self_).numel(); })
      .def("__len__", [](py::handle self_) { return view_of(self_).numel(); })
      .def_property_readonly(
          "data_ptr", [](py::handle self_) { return reinterpret_cast<std::uintptr_t>(view_of(self_).data_ptr()); },
          "base.data_ptr + offset x itemsize.")
      .def("is_contiguous", [](py::handle self_) { return view_of(self_).is_contiguous(); })
      .def(
          "numpy",
          [](py::object self) {
            check_numpy_exportable(self_of<PyStorageView>(self).view.base(), "StorageView");
            return as_numpy(self);
          },
          "A NumPy array over the view's elements (no copy).")
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) {
            check_numpy_exportable(self_of<PyStorageView>(self).view.base(), "StorageView");
            py::object arr = as_numpy(self);
            if (!dtype.is_none()) arr = arr.attr("astype")(dtype, py::arg("copy") = false);
            if (!copy.is_none() && copy.cast<bool>()) arr = arr.attr("copy")();
            return arr;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("__repr__", [](py::handle self_) {
        const StorageView& v = view_of(self_);
        return "genesis.StorageView(offset=" + std::to_string(v.offset()) +
               ", shape=" + std::string(py::str(dims_to_py(v.shape()))) +
               ", stride=" + std::string(py::str(dims_to_py(v.stride()))) + ", dtype=genesis." +
               std::string(dtype_name(v.dtype())) + ", device='" + v.device().str() + "')";
      });
}

}  // namespace genesis::python
