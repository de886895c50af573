// The bytes behind pickled tensors and storages (python/genesis/
// _serialization.py has Note [Pickling]):
//   _tensor_bytes(t)                       the elements, row-major, host copy
//   _tensor_from_bytes(buffer, dtype, shape) a new CPU tensor holding them
//   _storage_bytes(s)                      the same for a Storage / StorageView
//   _storage_from_bytes(buffer, dtype, shape) a new CPU Storage
// Any object with the buffer protocol is accepted (bytes, bytearray,
// memoryview, pickle.PickleBuffer: protocol 5's out-of-band buffers). Large
// copies run without the GIL (Note [GIL release] in py_gil.h): the bytes object
// is new and not yet shared, and a held Py_buffer keeps the source in place.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/tensor/api.h"
#include "py_gil.h"
#include "py_values.h"
#include "py_location.h"
#include "py_storage_object.h"
#include "py_tensor_args.h"

namespace genesis::python {

namespace {

// The elements of `t` as a new bytes object (a contiguous host copy first
// when needed).
py::bytes host_bytes(const Tensor& t) {
  Tensor host = without_gil_if_large(elements(t), [&] {
    Tensor c = t.contiguous();
    return c.device().is_cpu() ? c : c.cpu();
  });
  const std::size_t n = host.nbytes();
  PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
  if (b == nullptr) throw py::error_already_set();
  if (n > 0) {
    char* dst = PyBytes_AS_STRING(b);
    without_gil_if_large(host.numel(), [&] { std::memcpy(dst, host.data_ptr(), n); });
  }
  return py::reinterpret_steal<py::bytes>(b);
}

// The byte count of `shape` x `dtype`, checked for negative sizes and
// overflow before anything is allocated (a pickle is untrusted input).
std::size_t checked_nbytes(const std::vector<std::int64_t>& shape, DType dtype, const char* what) {
  std::size_t n = dtype_size(dtype);
  for (const std::int64_t d : shape) {
    GENESIS_CHECK(d >= 0, what, ": negative size ", d, " in the shape");
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(d)) {
      GENESIS_THROW(InvalidArgumentError, what, ": the shape's byte count overflows");
    }
    n *= static_cast<std::size_t>(d);
  }
  return n;
}

// Holds a contiguous buffer view of `obj` for the scope.
class BufferView {
 public:
  BufferView(py::handle obj, const char* what) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw py::type_error(std::string(what) + ": expected a contiguous bytes-like object, got " +
                           std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
    }
  }
  ~BufferView() { PyBuffer_Release(&view_); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  const void* data() const noexcept { return view_.buf; }
  std::size_t size() const noexcept { return static_cast<std::size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

// Copies `data` (exactly the bytes of shape x dtype) into `dst`.
void fill_from(const BufferView& data, void* dst, std::size_t n, std::int64_t elements) {
  if (n == 0) return;
  without_gil_if_large(elements, [&] { std::memcpy(dst, data.data(), n); });
}

void check_size(const BufferView& data, std::size_t expected, const std::vector<std::int64_t>& shape, DType dtype,
                const char* what) {
  if (data.size() != expected) {
    GENESIS_THROW(InvalidArgumentError, what, ": the data has ", data.size(), " bytes, but shape ",
                  std::string(py::str(dims_to_py(shape))), " of ", dtype_name(dtype), " needs ", expected,
                  " (a truncated or corrupted pickle)");
  }
}

// A Storage or StorageView argument as a tensor over the same elements.
Tensor as_tensor_view(py::handle obj) {
  if (py::isinstance<PyStorageView>(obj)) {
    const StorageView& v = self_of<PyStorageView>(obj).view;
    return Tensor(v.base(), v.shape(), v.stride(), v.offset());
  }
  const Storage& s = storage_arg(obj, "_storage_bytes()");
  return Tensor(s, s.shape(), contiguous_strides(s.shape()), 0);
}

}  // namespace

void bind_pickling(py::module_& m) {
  m.def(
      "_tensor_bytes", [](const Tensor& t) { return host_bytes(t); }, py::arg("tensor"),
      "The elements of a tensor (any device, any layout) in row-major order, as bytes.");
  m.def(
      "_tensor_from_bytes",
      [](py::handle data, py::handle dtype, py::handle shape) {
        const DType t = to_dtype(dtype);
        const std::vector<std::int64_t> dims = to_shape(shape);
        const BufferView view(data, "unpickling a tensor");
        const std::size_t n = checked_nbytes(dims, t, "unpickling a tensor");
        check_size(view, n, dims, t, "unpickling a tensor");
        AllocationSite site;
        Tensor out = empty(dims, TensorOptions(t, Device(DeviceType::kCPU)));
        fill_from(view, n == 0 ? nullptr : out.data_ptr(), n, out.numel());
        return out;
      },
      py::arg("data"), py::arg("dtype"), py::arg("shape"));
  m.def(
      "_storage_bytes", [](py::handle s) { return host_bytes(as_tensor_view(s)); }, py::arg("storage"),
      "The elements of a Storage or StorageView (any device) in row-major order, as bytes.");
  m.def(
      "_storage_from_bytes",
      [](py::handle data, py::handle dtype, py::handle shape) {
        const DType t = to_dtype(py::reinterpret_borrow<py::object>(dtype));
        std::vector<std::int64_t> dims = to_dims(py::reinterpret_borrow<py::object>(shape), "shape");
        const BufferView view(data, "unpickling a storage");
        const std::size_t n = checked_nbytes(dims, t, "unpickling a storage");
        check_size(view, n, dims, t, "unpickling a storage");
        AllocationSite site;
        Storage out = Storage::empty(std::move(dims), t, Device(DeviceType::kCPU));
        fill_from(view, n == 0 ? nullptr : out.data_ptr(), n, out.numel());
        return wrap_storage(std::move(out));
      },
      py::arg("data"), py::arg("dtype"), py::arg("shape"));
}

}  // namespace genesis::python
