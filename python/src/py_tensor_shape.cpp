// Shape operations: views where the layout allows (view, transpose,
// permute, .T, flatten, squeeze, unsqueeze, expand), reshape (copies when it
// must), and stack / cat / split / chunk.
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/api.h"
#include "py_location.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

std::vector<Tensor> tensor_list(py::handle seq) {
  if (!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr())) throw py::type_error("expected a list or tuple of tensors");
  std::vector<Tensor> out;
  for (py::object h : py::reinterpret_borrow<py::sequence>(seq)) {
    if (!py::isinstance<Tensor>(h)) throw py::type_error("expected a list or tuple of tensors");
    out.push_back(h.cast<Tensor>());
  }
  return out;
}

py::list to_pylist(const std::vector<Tensor>& v) {
  py::list out;
  for (const auto& t : v) out.append(wrap(t));
  return out;
}

py::tuple to_pytuple(const std::vector<Tensor>& v) { return py::tuple(to_pylist(v)); }

py::object split_impl(const Tensor& t, py::handle size, std::int64_t dim) {
  if (PyList_Check(size.ptr()) || PyTuple_Check(size.ptr())) {
    std::vector<std::int64_t> sizes;
    for (py::object h : py::reinterpret_borrow<py::sequence>(size)) sizes.push_back(to_int64(h, "split size"));
    return to_pytuple(t.split(sizes, dim));
  }
  return to_pytuple(t.split(to_int64(size, "split_size"), dim));
}

}  // namespace

void bind_tensor_shape(py::module_& m, TensorClass& cls) {
  cls.def("view", [](const Tensor& t, py::args shape) { return t.view(to_shape(shape)); })
      .def("reshape",
           [](const Tensor& t, py::args shape) {
             AllocationSite site;
             return t.reshape(to_shape(shape));
           })
      .def("transpose", [](const Tensor& t, py::handle a, py::handle b) {
        return t.transpose(to_int64(a, "dim0"), to_int64(b, "dim1"));
      })
      .def("permute", [](const Tensor& t, py::args dims) { return t.permute(to_shape(dims)); })
      .def_property_readonly("T", &Tensor::T)
      .def("t",
           [](const Tensor& t) {
             // PyTorch's t(): a matrix transpose (0-d and 1-d unchanged);
             // .T, which reverses every dim, is the n-d form.
             GENESIS_CHECK(t.dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", t.dim(),
                           "D (use .T or permute for more)");
             return t.T();
           })
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def(
          "squeeze",
          [](const Tensor& t, py::object dim) {
            if (dim.is_none()) return t.squeeze();
            return t.squeeze(to_int64(dim, "dim"));
          },
          py::arg("dim") = py::none())
      .def("unsqueeze", [](const Tensor& t, py::handle dim) { return t.unsqueeze(to_int64(dim, "dim")); })
      .def("expand", [](const Tensor& t, py::args shape) { return t.expand(to_shape(shape)); })
      .def("expand_as", [](const Tensor& t, const Tensor& o) { return t.expand_as(o); })
      .def("narrow", [](const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length) {
        return t.narrow(dim, start, length);
      })
      .def("select", [](const Tensor& t, std::int64_t dim, std::int64_t index) { return t.select(dim, index); })
      .def("split", &split_impl, py::arg("split_size"), py::arg("dim") = 0)
      .def(
          "chunk", [](const Tensor& t, std::int64_t chunks, std::int64_t dim) { return to_pytuple(t.chunk(chunks, dim)); },
          py::arg("chunks"), py::arg("dim") = 0);

  m.def(
      "stack",
      [](py::handle tensors, std::int64_t dim) {
        AllocationSite site;
        return stack(tensor_list(tensors), dim);
      },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def(
      "cat",
      [](py::handle tensors, std::int64_t dim) {
        AllocationSite site;
        return cat(tensor_list(tensors), dim);
      },
      py::arg("tensors"), py::arg("dim") = 0);
  m.def("split", &split_impl, py::arg("tensor"), py::arg("split_size_or_sections"), py::arg("dim") = 0);
  m.def(
      "chunk", [](const Tensor& t, std::int64_t chunks, std::int64_t dim) { return to_pytuple(t.chunk(chunks, dim)); },
      py::arg("input"), py::arg("chunks"), py::arg("dim") = 0);
  m.def("broadcast_to", [](const Tensor& t, py::handle shape) { return broadcast_to(t, to_shape(py::make_tuple(shape))); });
  m.def("transpose", [](const Tensor& t, std::int64_t a, std::int64_t b) { return t.transpose(a, b); });
  m.def("flatten", &Tensor::flatten, py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  m.def("reshape", [](const Tensor& t, py::handle shape) { return t.reshape(to_shape(py::make_tuple(shape))); });
}

}  // namespace genesis::python
