// NumPy interop without copies:
//   t.numpy()              an ndarray over the tensor's memory (CPU tensors);
//                          the array holds a Tensor handle, so the storage
//                          lives as long as the array; non-contiguous
//                          tensors give a strided view (NumPy strides are
//                          bytes, ours elements).
//   genesis.from_numpy(a)  a tensor over the array's memory; the storage's
//                          deleter holds a reference to the array. A
//                          read-only array (np.frombuffer(bytes), a
//                          read-only mmap, flags.writeable False) gives a
//                          read-only tensor: writes raise ValueError
//                          (Note [Read-only memory] in storage/storage.h;
//                          PyTorch only warns, and then crashes or changes
//                          the immutable object).
//   np.asarray(t)          through __array__ (also for bfloat16, via float32,
//                          which NumPy has no dtype for: a copy).
// genesis.tensor(ndarray) copies (py_tensor_creation.cpp).
#include <string>

#include <pybind11/numpy.h>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/tensor/api.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

// NumPy's dtype for ours; bfloat16 has none.
py::dtype numpy_dtype(DType t) {
  if (t == DType::kBFloat16) {
    throw py::type_error("NumPy has no bfloat16: convert first (t.to(genesis.float32).numpy())");
  }
  return py::dtype(std::string(dtype_name(t)));
}

DType from_numpy_dtype(const py::dtype& dt) {
  const std::string name = py::str(dt.attr("name"));
  const char order = dt.attr("byteorder").cast<std::string>()[0];
  if (order == '>') throw py::type_error("big-endian NumPy arrays are not supported: convert first (a.astype(a.dtype.newbyteorder('=')))");
  static const char* const kSupported[] = {"bool", "uint8", "int8", "int16", "int32", "int64",
                                           "float16", "float32", "float64"};
  for (const char* s : kSupported) {
    if (name == s) return dtype_from_name(name);
  }
  throw py::type_error("NumPy dtype " + name +
                       " has no genesis dtype (bool, uint8, int8, int16, int32, int64, float16, float32, float64): "
                       "convert the array first, e.g. a.astype(numpy.int64)");
}

py::array to_numpy(const Tensor& t) {
  if (!t.device().is_cpu()) {
    throw py::type_error("can't convert a " + t.device().str() + " tensor to NumPy: copy it to the host first (t.cpu())");
  }
  const auto item = static_cast<py::ssize_t>(t.element_size());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  std::vector<py::ssize_t> strides;
  strides.reserve(shape.size());
  for (std::int64_t s : t.strides()) strides.push_back(static_cast<py::ssize_t>(s) * item);
  // The capsule owns a Tensor handle: the memory stays while the array (or
  // any view NumPy derives from it) is alive.
  auto* keep = new Tensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  void* ptr = t.numel() == 0 ? nullptr : t.data_ptr();
  py::array a = ptr == nullptr ? py::array(numpy_dtype(t.dtype()), shape, strides)  // empty: nothing to share
                               : py::array(numpy_dtype(t.dtype()), shape, strides, ptr, base);
  // Read-only memory stays read-only through NumPy (Note [Read-only memory]).
  if (t.is_read_only()) a.attr("flags").attr("writeable") = false;
  return a;
}

}  // namespace

Tensor from_numpy_array(py::handle h) {
  auto arr = py::reinterpret_borrow<py::array>(h);
  const DType dtype = from_numpy_dtype(arr.dtype());
  // Our itemsize, not arr.itemsize(): older pybind11 reads it from the
  // PyArray_Descr struct, whose layout changed in NumPy 2.
  const auto item = static_cast<std::int64_t>(dtype_size(dtype));
  const auto ndim = static_cast<std::size_t>(arr.ndim());
  Shape shape(ndim), strides(ndim);
  std::int64_t lo = 0, hi = 0, numel = 1;  // element offsets spanned, relative to data
  for (std::size_t d = 0; d < ndim; ++d) {
    shape[d] = arr.shape(static_cast<py::ssize_t>(d));
    const std::int64_t bytes = arr.strides(static_cast<py::ssize_t>(d));
    if (bytes % item != 0) {
      throw py::value_error("genesis.from_numpy: strides that are not a multiple of the item size are not supported "
                            "(use np.ascontiguousarray)");
    }
    strides[d] = bytes / item;
  }
  // NumPy bounds its arrays' sizes; checked anyway (Note [Size overflow]).
  numel = checked_numel(shape, "genesis.from_numpy");
  for (std::size_t d = 0; d < ndim && numel > 0; ++d) {
    const std::int64_t ext = checked_mul(shape[d] - 1, strides[d], "genesis.from_numpy: array extent");
    if (ext < 0) lo = checked_add(lo, ext, "genesis.from_numpy: array extent");
    else hi = checked_add(hi, ext, "genesis.from_numpy: array extent");
  }
  auto* data = static_cast<char*>(const_cast<void*>(arr.data()));
  const std::int64_t span = numel == 0 ? 0 : hi - lo + 1;
  char* base = numel == 0 ? data : data + lo * item;
  const bool read_only = !arr.writeable();
  PyObject* owner = h.ptr();
  Py_INCREF(owner);
  Storage storage = Storage::from_blob(base, {span}, dtype, Device{}, [owner](void*) {
    // The last tensor over the array went: drop our reference (with the GIL;
    // not at all once the interpreter is finalising).
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(owner);
  });
  if (read_only) storage.set_read_only("NumPy array");
  return Tensor(std::move(storage), std::move(shape), std::move(strides), numel == 0 ? 0 : -lo);
}

void bind_tensor_numpy(py::module_& m, TensorClass& cls) {
  cls.def("numpy", &to_numpy, "The tensor's memory as an ndarray (no copy; CPU tensors only).")
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) {
            // NumPy 2 passes copy=: True asks for a copy, False forbids one
            // (a GPU or bfloat16 tensor cannot be shared then: ValueError).
            Tensor host = t.cpu();
            if (host.dtype() == DType::kBFloat16) host = host.to(DType::kFloat32);
            const bool shared = host.is_same(t);
            if (!copy.is_none() && !copy.cast<bool>() && !shared) {
              throw py::value_error("this tensor cannot be viewed by NumPy without a copy (copy=False)");
            }
            py::object a = to_numpy(host);
            if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = false);
            if (!copy.is_none() && copy.cast<bool>() && shared) a = a.attr("copy")();
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none());
  // ndarray (op) tensor defers to the tensor's reflected operator, so the
  // result is a Tensor with our promotion rules (PyTorch does the same).
  cls.attr("__array_priority__") = 1000;
  cls.def_property_readonly("is_read_only", &Tensor::is_read_only,
                            "True over read-only memory (a read-only NumPy array, bytes, a read-only mmap, a DLPack "
                            "tensor flagged read-only): every write raises ValueError.");

  m.def(
      "from_numpy", [](py::handle a) {
        if (!is_ndarray(a)) throw py::type_error("genesis.from_numpy expects a numpy.ndarray");
        return from_numpy_array(a);
      },
      py::arg("ndarray"), "A CPU tensor sharing the array's memory (no copy; the tensor keeps the array alive).");
}

}  // namespace genesis::python
