#include "py_storage_object.h"

#include <exception>
#include <memory>

#include "genesis/core/error.h"
#include "py_bindings.h"
#include "py_values.h"

namespace genesis::python {

namespace {

// What one export owns until PyBuffer_Release: the memory (a strong
// reference) and the shape and stride arrays the Py_buffer points into.
struct Export {
  Storage keep;
  std::vector<Py_ssize_t> shape;
  std::vector<Py_ssize_t> strides;  // bytes
};

// Zero-byte storages have a null pointer; consumers get a valid address that
// is never read (len is 0).
char g_empty_buffer[1];

bool c_contiguous(const std::vector<Py_ssize_t>& shape, const std::vector<Py_ssize_t>& strides, Py_ssize_t itemsize) {
  Py_ssize_t expected = itemsize;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int refuse(Py_buffer* view, const std::string& why) {
  if (view != nullptr) view->obj = nullptr;
  PyErr_SetString(PyExc_BufferError, why.c_str());
  return -1;
}

// Fills `view` for `obj` (Note [Buffer export]). Never throws.
int export_buffer(PyObject* obj, Py_buffer* view, int flags, const Storage& s, void* data,
                  const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& stride_elems, bool readonly,
                  const char* kind) {
  try {
    if (view == nullptr) return refuse(view, "genesis: NULL Py_buffer");
    if (!s.device().is_cpu())
      return refuse(view, std::string("a ") + kind + " on " + s.device().str() +
                              " cannot be exported as a buffer; copy it to the CPU first (.cpu())");
    const char* format = buffer_format(s.dtype());
    if (format == nullptr)
      return refuse(view, std::string("bfloat16 has no buffer format (NumPy has no bfloat16); convert it "
                                      "first: genesis.convert_dtype(storage, genesis.float32)"));
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && readonly)
      return refuse(view, std::string("this ") + kind + " is read-only (a MappedStorage opened with mode 'r')");
    auto ex = std::make_unique<Export>();
    ex->keep = s;
    const auto itemsize = static_cast<Py_ssize_t>(dtype_size(s.dtype()));
    Py_ssize_t len = itemsize;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      ex->shape.push_back(static_cast<Py_ssize_t>(shape[i]));
      ex->strides.push_back(static_cast<Py_ssize_t>(stride_elems[i]) * itemsize);
      len *= static_cast<Py_ssize_t>(shape[i]);
    }
    const bool contiguous = c_contiguous(ex->shape, ex->strides, itemsize);
    // Consumers that cannot take strides (or ask for contiguity) get a
    // contiguous buffer or a refusal; only C order is ever claimed.
    const bool wants_strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES;
    const bool wants_c =
        (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS || (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS;
    const bool wants_f = (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS;
    if (!contiguous && (!wants_strides || wants_c || wants_f))
      return refuse(view,
                    std::string("this ") + kind + " is not contiguous and the consumer needs a contiguous buffer");
    if (wants_f && !wants_c && shape.size() > 1 && len > 0) {
      int big = 0;
      for (auto d : shape) big += d > 1;
      if (big > 1) return refuse(view, std::string("a ") + kind + " is C-contiguous, not Fortran-contiguous");
    }
    view->obj = obj;
    view->buf = data != nullptr ? data : g_empty_buffer;
    view->len = len;
    view->readonly = readonly ? 1 : 0;
    view->itemsize = itemsize;
    view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? const_cast<char*>(format) : nullptr;
    view->ndim = static_cast<int>(shape.size());
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? ex->shape.data() : nullptr;
    view->strides = wants_strides ? ex->strides.data() : nullptr;
    view->suboffsets = nullptr;
    if ((flags & PyBUF_ND) != PyBUF_ND) view->ndim = 1;  // a flat run of bytes
    view->internal = ex.release();
    Py_INCREF(obj);
    return 0;
  } catch (const std::exception& e) {
    return refuse(view, error_text(e));
  }
}

void release_buffer(PyObject*, Py_buffer* view) { delete static_cast<Export*>(view->internal); }

int storage_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  PyStorage* self = nullptr;
  try {
    self = &self_of<PyStorage>(obj);
  } catch (const std::exception& e) {
    return refuse(view, error_text(e));
  }
  if (!self->storage.defined()) return refuse(view, std::string("this ") + self->kind() + " is closed");
  const Storage& s = self->storage;
  return export_buffer(obj, view, flags, s, s.data_ptr(), s.shape(), contiguous_strides(s.shape()), self->readonly,
                       self->kind());
}

int view_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  PyStorageView* self = nullptr;
  try {
    self = &self_of<PyStorageView>(obj);
  } catch (const std::exception& e) {
    return refuse(view, error_text(e));
  }
  const StorageView& v = self->view;
  return export_buffer(obj, view, flags, v.base(), v.data_ptr(), v.shape(), v.stride(), self->readonly, "StorageView");
}

}  // namespace

bool is_initialised(py::handle obj) {
  // pybind11 internals (stable since 2.2): the instance's value-and-holder
  // record knows whether the holder was constructed. The storage classes form
  // one single-inheritance chain, so an instance has exactly one record (of
  // its most derived class), which is the one without a type argument.
  auto* inst = reinterpret_cast<py::detail::instance*>(obj.ptr());
  const auto v_h = inst->get_value_and_holder();
  return v_h && v_h.holder_constructed();
}

const Storage& PyStorage::get() const {
  if (!storage.defined()) throw py::value_error(std::string("this ") + kind() + " is closed");
  return storage;
}

const Storage& storage_arg(py::handle obj, const char* what) {
  if (!py::isinstance<PyStorage>(obj))
    throw py::type_error(std::string(what) + " must be a genesis.Storage, got " + type_name_of(obj));
  return self_of<PyStorage>(obj).get();
}

const Storage& writable_storage_arg(py::handle obj, const char* what) {
  const Storage& s = storage_arg(obj, what);
  const PyStorage& p = self_of<PyStorage>(obj);
  if (p.readonly)
    throw py::value_error(std::string(what) + " is read-only (a " + p.kind() +
                          " opened with mode 'r'): it cannot be written to");
  return s;
}

py::object wrap_storage(Storage s) { return py::cast(std::make_unique<PyStorage>(std::move(s))); }

const char* buffer_format(DType t) noexcept {
  switch (t) {
    case DType::kBool:
      return "?";
    case DType::kUInt8:
      return "B";
    case DType::kInt8:
      return "b";
    case DType::kInt16:
      return "h";
    case DType::kInt32:
      return "i";
    case DType::kInt64:
      return "q";
    case DType::kFloat16:
      return "e";
    case DType::kFloat32:
      return "f";
    case DType::kFloat64:
      return "d";
    case DType::kBFloat16:
      return nullptr;
  }
  return nullptr;
}

void setup_storage_buffer(PyHeapTypeObject* type) {
  type->ht_type.tp_as_buffer = &type->as_buffer;
  type->as_buffer.bf_getbuffer = storage_getbuffer;
  type->as_buffer.bf_releasebuffer = release_buffer;
}

void setup_view_buffer(PyHeapTypeObject* type) {
  type->ht_type.tp_as_buffer = &type->as_buffer;
  type->as_buffer.bf_getbuffer = view_getbuffer;
  type->as_buffer.bf_releasebuffer = release_buffer;
}

void check_numpy_exportable(const Storage& s, const char* kind) {
  if (s.device().is_cuda())
    throw py::type_error(std::string("can't convert a ") + kind + " on " + s.device().str() +
                         " to a NumPy array: its memory is on the GPU. Copy it to host memory first: "
                         "storage.cpu().numpy() (or storage.to('cpu'))");
  if (s.dtype() == DType::kBFloat16)
    throw py::type_error(std::string("can't convert a bfloat16 ") + kind +
                         " to a NumPy array: NumPy has no bfloat16. Convert it first: "
                         "genesis.convert_dtype(storage, genesis.float32).numpy()");
}

py::object as_numpy(py::handle obj) {
  py::object np = py::module_::import("numpy");
  return np.attr("asarray")(py::memoryview(py::reinterpret_borrow<py::object>(obj)));
}

}  // namespace genesis::python
