// genesis.Tensor: the C++ Tensor (include/genesis/tensor/tensor.h) as a
// pybind11 class, with its metadata and conversions.
//
// The Python object holds a genesis::Tensor by value (a refcounted handle), so
// `del x` drops the last reference and the storage returns to its pool at
// once. Operators, shape operations, indexing, creation and interop are bound
// in their own files (py_tensor_ops.cpp, py_tensor_shape.cpp, py_tensor_index.cpp,
// py_tensor_creation.cpp, py_tensor_numpy.cpp, py_dlpack.cpp) onto the class made here.
#include <string>

#include "py_bindings.h"
#include "genesis/cuda/device.h"
#include "genesis/tensor/api.h"
#include "py_gil.h"
#include "py_location.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

py::object scalar_to_python(const Scalar& s) {
  if (s.is_bool()) return py::bool_(s.to_bool());
  if (s.is_integral()) return py::int_(s.to_int64());
  return py::float_(s.to_double());
}

// Row-major values -> nested lists, one level per dim.
template <typename T>
py::object nest(const std::vector<T>& flat, const Shape& shape, std::size_t dim, std::size_t& pos) {
  if (dim == shape.size()) {
    if constexpr (std::is_same_v<T, std::uint8_t>) return py::bool_(flat[pos++] != 0);
    else return py::cast(flat[pos++]);
  }
  py::list out(static_cast<std::size_t>(shape[dim]));
  for (std::int64_t i = 0; i < shape[dim]; ++i) out[static_cast<std::size_t>(i)] = nest(flat, shape, dim + 1, pos);
  return out;
}

py::object tolist(const Tensor& t) {
  std::size_t pos = 0;
  switch (t.dtype()) {
    case DType::kBool: {
      // bool goes through uint8: std::vector<bool> has no addressable elements.
      auto v = t.to(DType::kUInt8).tolist<std::uint8_t>();
      return nest(v, t.shape(), 0, pos);
    }
    case DType::kFloat16: case DType::kBFloat16: case DType::kFloat32: case DType::kFloat64:
      return nest(t.tolist<double>(), t.shape(), 0, pos);
    default:
      return nest(t.tolist<std::int64_t>(), t.shape(), 0, pos);
  }
}

// to(device), to(dtype), to(device, dtype), to(other); keywords dtype=, device=.
// A string is a device when it parses as one ('cpu', 'cuda:1'), else a dtype.
Tensor to_impl(const Tensor& self, py::args args, py::kwargs kwargs) {
  std::optional<Device> device;
  std::optional<DType> dtype;
  auto take = [&](py::handle h) {
    if (py::isinstance<Tensor>(h)) {
      const auto& o = h.cast<const Tensor&>();
      device = o.device();
      dtype = o.dtype();
    } else if (PyUnicode_Check(h.ptr())) {
      const std::string s = h.cast<std::string>();
      if (s.rfind("cpu", 0) == 0 || s.rfind("cuda", 0) == 0) device = to_tensor_device(h);
      else dtype = to_dtype(h);
    } else {
      try {
        dtype = to_dtype(h);
      } catch (const py::type_error&) {
        device = to_tensor_device(h);
      }
    }
  };
  for (py::handle a : args) take(a);
  for (auto [k, v] : kwargs) {
    const std::string key = py::str(k);
    if (key == "dtype") { if (!v.is_none()) dtype = to_dtype(v); }
    else if (key == "device") { if (!v.is_none()) device = to_tensor_device(v); }
    else if (key == "copy" || key == "non_blocking") continue;
    else throw py::type_error("to() got an unexpected keyword argument '" + key + "'");
  }
  AllocationSite site;
  const Device dev = device.value_or(self.device());
  const DType dt = dtype.value_or(self.dtype());
  const bool copy = kwargs.contains("copy") && py::bool_(kwargs["copy"]);
  const Tensor t = self;
  return without_gil_if_large(elements(t), [&] {
    Tensor r = t.to(dev, dt);
    if (copy && r.is_same(t)) r = t.clone();
    return r;
  });
}

// t.float(), t.long(), ...: a conversion, without the GIL when large.
template <DType D>
Tensor converted(const Tensor& x) {
  const Tensor t = x;
  return without_gil_if_large(elements(t), [&] { return t.to(D); });
}

// iter(t): the sub-tensors along dim 0, made one at a time (t[0], t[1],
// ...), as Python's indexing fallback would yield them, but with a
// TypeError for a 0-d tensor, which has no dim to iterate (PyTorch's rule;
// the fallback yielded nothing).
struct TensorIterator {
  Tensor t;
  std::int64_t next = 0;
};

py::tuple to_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

}  // namespace

py::tuple shape_tuple(const Shape& s) { return to_tuple(s); }
py::object scalar_object(const Scalar& s) { return scalar_to_python(s); }

void bind_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor",
                         "A strided view of typed memory on a device (genesis::Tensor). Made by genesis.tensor, "
                         "zeros, ones, empty, ...; PyTorch's API with NumPy's indexing.");
  py::class_<TensorIterator>(m, "_TensorIterator", "Iterator over a tensor's dim 0 (iter(tensor)).")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](TensorIterator& it) {
        if (it.next >= it.t.shape()[0]) throw py::stop_iteration();
        return wrap(it.t.select(0, it.next++));
      });
  cls.def_property_readonly("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def(
          "size",
          [](const Tensor& t, py::object dim) -> py::object {
            if (dim.is_none()) return to_tuple(t.shape());
            return py::int_(t.size(to_int64(dim, "dim")));
          },
          py::arg("dim") = py::none())
      .def_property_readonly("strides", [](const Tensor& t) { return to_tuple(t.strides()); })
      .def(
          "stride",
          [](const Tensor& t, py::object dim) -> py::object {
            if (dim.is_none()) return to_tuple(t.strides());
            return py::int_(t.stride(to_int64(dim, "dim")));
          },
          py::arg("dim") = py::none())
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); })
      .def_property_readonly("device", [](const Tensor& t) { return device_object(t.device()); })
      .def_property_readonly("ndim", &Tensor::ndim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def_property_readonly("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); })
      .def_property_readonly("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); })
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("element_size", &Tensor::element_size)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def("__iter__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("iteration over a 0-d tensor");
             return TensorIterator{t, 0};
           })
      .def("__repr__", &Tensor::str)
      .def("__str__", &Tensor::str)
      .def("item", [](const Tensor& t) { return scalar_to_python(t.item()); })
      .def("tolist", [](const Tensor& t) { return tolist(t); })
      .def("__bool__",
           [](const Tensor& t) {
             if (t.numel() != 1) {
               throw py::value_error("the truth value of a tensor with " + std::to_string(t.numel()) +
                                     " elements is ambiguous");
             }
             return t.item().to_bool();
           })
      .def("__float__", [](const Tensor& t) { return t.item().to_double(); })
      .def("__int__", [](const Tensor& t) { return t.item().to_int64(); })
      // As in PyTorch: a one-element integer (or bool) tensor is an index,
      // so it slices, indexes lists and sizes things like an int does.
      .def("__index__",
           [](const Tensor& t) {
             if (is_floating(t.dtype()) || t.numel() != 1) {
               throw py::type_error("only integer tensors of a single element can be converted to an index (got " +
                                    std::to_string(t.numel()) + " elements of " + std::string(dtype_name(t.dtype())) +
                                    ")");
             }
             return t.item().to_int64();
           })
      // Identity hash: __eq__ is element-wise (returns a tensor), as in PyTorch.
      .def("__hash__", [](py::handle self) { return py::hash(py::cast(reinterpret_cast<std::uintptr_t>(self.ptr()))); })
      .def("to", &to_impl)
      .def("cpu", [](const Tensor& x) {
        AllocationSite site;
        const Tensor t = x;
        return without_gil_if_large(elements(t), [&] { return t.cpu(); });
      })
      .def(
          "cuda",
          [](const Tensor& t, py::object device) {
            AllocationSite site;
            const Device d = device.is_none() ? genesis::cuda::parse_device("cuda") : to_tensor_device(device);
            if (!d.is_cuda()) throw py::value_error("cuda() needs a CUDA device");
            const Tensor x = t;
            return without_gil_if_large(elements(x), [&] { return x.to(d); });
          },
          py::arg("device") = py::none())
      .def("contiguous", [](const Tensor& x) {
        AllocationSite site;
        const Tensor t = x;
        return without_gil_if_large(elements(t), [&] { return t.contiguous(); });
      })
      .def("clone", [](const Tensor& x) {
        AllocationSite site;
        const Tensor t = x;
        return without_gil_if_large(elements(t), [&] { return t.clone(); });
      })
      .def("detach", [](const Tensor& t) { return t; })
      .def("copy_", [](py::object self, py::handle src) {
        Tensor dst = self.cast<Tensor&>();  // a handle: the same elements
        const Tensor from = as_tensor(src);
        without_gil_if_large(elements(dst), [&] { dst.copy_(from); });
        return self;
      })
      .def("fill_", [](py::object self, py::handle v) {
        auto s = to_scalar(v);
        if (!s) {
          if (py::isinstance<Tensor>(v)) s = v.cast<const Tensor&>().item();
          else throw py::type_error("fill_() takes a number");
        }
        Tensor t = self.cast<Tensor&>();
        without_gil_if_large(elements(t), [&] { t.fill_(*s); });
        return self;
      })
      .def("zero_", [](py::object self) {
        Tensor t = self.cast<Tensor&>();
        without_gil_if_large(elements(t), [&] { t.zero_(); });
        return self;
      })
      // PyTorch's dtype shorthands: t.float(), t.half(), t.long(), ...
      .def("float", &converted<DType::kFloat32>)
      .def("double", &converted<DType::kFloat64>)
      .def("half", &converted<DType::kFloat16>)
      .def("bfloat16", &converted<DType::kBFloat16>)
      .def("int", &converted<DType::kInt32>)
      .def("long", &converted<DType::kInt64>)
      .def("short", &converted<DType::kInt16>)
      .def("byte", &converted<DType::kUInt8>)
      .def("char", &converted<DType::kInt8>)
      .def("bool", &converted<DType::kBool>)
      .def("__copy__", [](const Tensor& t) { return t; })
      .def("__deepcopy__", [](const Tensor& t, py::handle) { return t.clone(); });

  install_tensor_new(cls);
  bind_tensor_args(m);
  bind_tensor_creation(m);
  bind_tensor_ops(m, cls);
  bind_tensor_shape(m, cls);
  bind_tensor_index(cls);
  bind_tensor_numpy(m, cls);
  bind_dlpack(m, cls);
}

}  // namespace genesis::python
