// The argument converter of the bindings (see py_values.h).
#include "py_values.h"

#include <array>
#include <climits>
#include <string>
#include <unordered_map>

#include "genesis/core/error.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/runtime.h"
#include "genesis/tensor/tensor.h"

namespace genesis::python {

namespace {

// Registered by genesis/_tensor.py. Plain PyObject* owned for the life of the
// process: py::object statics would be released by C++ static destructors
// after the interpreter is gone (the same reason as py_errors.cpp).
std::array<PyObject*, kNumDTypes> g_dtypes{};
PyObject* g_device_cls = nullptr;

// The GIL protects these caches: every caller holds it.
std::unordered_map<Device, PyObject*>& device_objects() {
  static auto* m = new std::unordered_map<Device, PyObject*>();
  return *m;
}
// Parsed device strings: `device='cuda'` on the hot path (empty()) is a hash
// lookup instead of a parse. Only strings that parsed are cached, and only a
// few (a program names a handful of devices).
std::unordered_map<std::string, Device>& parsed_devices() {
  static auto* m = new std::unordered_map<std::string, Device>();
  return *m;
}

// The Python objects are made by the package; a binding used before
// genesis/_tensor.py ran (genesis._C imported on its own) imports the
// package once, which registers them.
void ensure_registered() {
  if (g_device_cls == nullptr) py::module_::import("genesis");
}

// A device string. A well-formed CUDA device on a machine without CUDA is a
// CudaError (what genesis.cuda raises there too), not a bad argument.
Device parse_device_text(const std::string& text) {
  if (text.rfind("cuda", 0) == 0 && !cuda::is_available()) {
    try {
      return genesis::cuda::parse_device(text);
    } catch (const InvalidArgumentError&) {
      const bool well_formed = text == "cuda" || (text.size() > 5 && text[4] == ':' &&
                                                  text.find_first_not_of("0123456789", 5) == std::string::npos);
      if (well_formed) cuda::detail::throw_cuda_unavailable(("device '" + text + "'").c_str(), __FILE__, __LINE__);
      throw;
    }
  }
  return genesis::cuda::parse_device(text);
}

}  // namespace

std::string type_name_of(py::handle h) {
  return py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>();
}

const NumpyTypes* numpy_types() {
  static NumpyTypes types;
  static bool ready = false;
  if (ready) return &types;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* np = PyDict_GetItemString(modules, "numpy");  // borrowed
  if (np == nullptr) return nullptr;
  auto get = [np](const char* name) { return PyObject_GetAttrString(np, name); };  // owned forever
  types.ndarray = get("ndarray");
  types.generic = get("generic");
  types.bool_ = get("bool_");
  types.integer = get("integer");
  types.floating = get("floating");
  types.dtype = get("dtype");
  if (!types.ndarray || !types.generic || !types.bool_ || !types.integer || !types.floating || !types.dtype) {
    PyErr_Clear();
    return nullptr;
  }
  ready = true;
  return &types;
}

bool isinstance_of(py::handle h, PyObject* type) { return type != nullptr && PyObject_IsInstance(h.ptr(), type) == 1; }

void register_value_types(const py::list& dtypes, const py::object& device_cls) {
  if (static_cast<int>(dtypes.size()) != kNumDTypes) throw py::value_error("one dtype object per DType expected");
  for (int i = 0; i < kNumDTypes; ++i) g_dtypes[i] = py::object(dtypes[i]).release().ptr();
  g_device_cls = py::object(device_cls).release().ptr();
}

// ------------------------------------------------------------------ dtype ---

DType to_dtype(py::handle h) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (g_dtypes[i] == h.ptr()) return static_cast<DType>(i);
  }
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &len);  // lone surrogates: UnicodeEncodeError
    if (s == nullptr) throw py::error_already_set();
    return dtype_from_name(std::string(s, static_cast<std::size_t>(len)));
  }
  // PyTorch's spellings of Python types.
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
  if (h.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::kFloat64;
  if (const NumpyTypes* np = numpy_types()) {
    const bool scalar_type = PyType_Check(h.ptr()) && PyObject_IsSubclass(h.ptr(), np->generic) == 1;
    if (scalar_type || isinstance_of(h, np->dtype)) {
      // np.dtype(x).name: 'float32', 'bool', 'int64', ... (names C++ knows);
      // others ('complex64', 'uint16') are a TypeError, as they have no genesis dtype.
      std::string name = py::reinterpret_borrow<py::object>(np->dtype)(h).attr("name").cast<std::string>();
      try {
        return dtype_from_name(name);
      } catch (const Error&) {
        throw py::type_error("dtype: NumPy dtype " + name + " has no genesis equivalent");
      }
    }
  }
  // torch.float32 and friends: their str() is a name C++ accepts.
  const std::string module = py::str(py::type::handle_of(h).attr("__module__"));
  if (module == "torch") return dtype_from_name(py::str(h).cast<std::string>());
  // A genesis.dtype before the package registered its objects.
  if (module == "genesis._dtype" && g_dtypes[0] == nullptr) {
    ensure_registered();
    return to_dtype(h.attr("name"));
  }
  throw py::type_error("dtype must be a genesis.dtype, a name such as 'float32', a NumPy or torch dtype, or "
                       "bool/int/float, got " +
                       (PyType_Check(h.ptr()) ? py::repr(h).cast<std::string>() : type_name_of(h)));
}

std::optional<DType> to_opt_dtype(py::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_dtype(h);
}

py::object dtype_object(DType t) {
  if (g_dtypes[static_cast<std::size_t>(t)] == nullptr) ensure_registered();
  PyObject* o = g_dtypes[static_cast<std::size_t>(t)];
  if (o == nullptr) throw std::runtime_error("genesis dtypes are not registered (import genesis)");
  return py::reinterpret_borrow<py::object>(o);
}

// ----------------------------------------------------------------- device ---

namespace {

// Both device converters. `strict` (to_device): a well-formed CUDA device on
// a machine without CUDA is a CudaError at once. Otherwise (tensors) parsed
// strings are cached and a missing GPU is left to the tensor layer.
Device device_arg(py::handle h, bool strict) {
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &len);
    if (s == nullptr) throw py::error_already_set();
    std::string key(s, static_cast<std::size_t>(len));
    if (strict) return parse_device_text(key);
    // Fastest path: the same string object as last time (a literal such as
    // device='cuda' in a loop is one interned object). We hold a reference,
    // so the pointer cannot be reused by another string.
    static PyObject* last_text = nullptr;
    static Device last_device{};
    if (h.ptr() == last_text) return last_device;
    auto& cache = parsed_devices();
    auto it = cache.find(key);
    const Device d = it != cache.end() ? it->second : genesis::cuda::parse_device(key);
    if (it == cache.end() && cache.size() < 64) cache.emplace(std::move(key), d);
    Py_INCREF(h.ptr());
    Py_XDECREF(last_text);
    last_text = h.ptr();
    last_device = d;
    return d;
  }
  if (g_device_cls != nullptr && PyObject_TypeCheck(h.ptr(), reinterpret_cast<PyTypeObject*>(g_device_cls))) {
    return h.attr("_c").cast<Device>();
  }
  if (py::isinstance<Device>(h)) return h.cast<Device>();
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    const std::int64_t i = to_int64(h, "device");
    if (i < 0 || i > INT_MAX) throw py::value_error("device index must be >= 0, got " + std::to_string(i));
    const std::string text = "cuda:" + std::to_string(i);
    return strict ? parse_device_text(text) : genesis::cuda::parse_device(text);
  }
  if (g_device_cls == nullptr && py::str(py::type::handle_of(h).attr("__module__")).cast<std::string>() == "genesis._device") {
    return h.attr("_c").cast<Device>();  // a genesis.device before the package registered its class
  }
  throw py::type_error("device must be a string such as 'cpu' or 'cuda:0', an int (a CUDA index) or a "
                       "genesis.device, got " +
                       type_name_of(h));
}

}  // namespace

Device to_device(py::handle h) { return device_arg(h, true); }

Device to_tensor_device(py::handle h) { return h.is_none() ? Device{} : device_arg(h, false); }

py::object device_object(Device d) {
  auto& cache = device_objects();
  auto it = cache.find(d);
  if (it != cache.end()) return py::reinterpret_borrow<py::object>(it->second);
  ensure_registered();
  if (g_device_cls == nullptr) throw std::runtime_error("genesis.device is not registered (import genesis)");
  py::object obj = py::reinterpret_borrow<py::object>(g_device_cls)(d.str());
  cache.emplace(d, obj.inc_ref().ptr());
  return obj;
}

// ------------------------------------------------------- integers, shapes ---

std::int64_t to_int64(py::handle h, const char* what) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) throw py::type_error(std::string(what) + " must be an integer, not bool");
  PyObject* idx = PyNumber_Index(o);  // ints, NumPy integers; TypeError for floats
  if (idx == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " must be an integer, not " + type_name_of(h));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow != 0) {
    PyErr_SetString(PyExc_OverflowError, (std::string(what) + ": value does not fit in int64").c_str());
    throw py::error_already_set();
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<std::int64_t>(v);
}

namespace {

// The number of dims of an array-like object (a genesis.Tensor, an ndarray,
// a torch.Tensor: anything with an int `ndim`), or -1 for other objects.
std::int64_t array_ndim(py::handle h) {
  PyObject* o = h.ptr();
  if (PyLong_Check(o) || PyFloat_Check(o) || PyTuple_Check(o) || PyList_Check(o) || PyUnicode_Check(o)) return -1;
  // NumPy scalars have ndim 0 too, but are numbers (to_int64 says why a
  // float one is not a size).
  if (const NumpyTypes* np = numpy_types(); np != nullptr && isinstance_of(h, np->generic)) return -1;
  PyObject* nd = PyObject_GetAttrString(o, "ndim");
  if (nd == nullptr) {
    PyErr_Clear();
    return -1;
  }
  const long long v = PyLong_Check(nd) ? PyLong_AsLongLong(nd) : -1;
  Py_DECREF(nd);
  if (v == -1 && PyErr_Occurred()) PyErr_Clear();
  return static_cast<std::int64_t>(v);
}

// "a 0-d float32 Tensor": what a size got, for errors.
std::string describe_0d(py::handle h) {
  std::string text = "a 0-d ";
  PyObject* dt = PyObject_GetAttrString(h.ptr(), "dtype");
  if (dt != nullptr) {
    py::object dtype = py::reinterpret_steal<py::object>(dt);
    std::string name = py::str(py::hasattr(dtype, "name") ? dtype.attr("name") : dtype);
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    text += name + " ";
  } else {
    PyErr_Clear();
  }
  return text + type_name_of(h);
}

// One int of a size: an int, anything with __index__ (NumPy integers), or a
// 0-d integer array or tensor (zeros(genesis.tensor(3)) is zeros(3), as in
// PyTorch). `ndim` is array_ndim(h).
std::int64_t size_item(py::handle h, std::int64_t ndim, const char* what) {
  if (ndim == 0) {
    const auto* tensor_info = py::detail::get_type_info(typeid(Tensor));
    if (tensor_info != nullptr && PyObject_TypeCheck(h.ptr(), tensor_info->type)) {
      const Tensor& t = h.cast<const Tensor&>();
      if (dtype_kind(t.dtype()) == DTypeKind::kSigned || dtype_kind(t.dtype()) == DTypeKind::kUnsigned) {
        return t.item().to_int64();
      }
    } else if (!PyBool_Check(h.ptr()) && PyIndex_Check(h.ptr())) {
      PyObject* idx = PyNumber_Index(h.ptr());  // a 0-d integer ndarray; TypeError for others
      if (idx != nullptr) {
        Py_DECREF(idx);
        return to_int64(h, what);
      }
      PyErr_Clear();
    }
    throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " + describe_0d(h));
  }
  return to_int64(h, what);
}

}  // namespace

std::vector<std::int64_t> to_dims(py::handle h, const char* what) {
  PyObject* o = h.ptr();
  if (PyLong_Check(o) && !PyBool_Check(o)) return {to_int64(h, what)};
  // A str is a sequence of characters, never a shape.
  const bool text = PyUnicode_Check(o) || PyBytes_Check(o);
  // A 0-d array or tensor is one number, though its type is a sequence.
  const std::int64_t ndim = array_ndim(h);
  if (ndim == 0) return {size_item(h, ndim, what)};
  if (!text && PySequence_Check(o)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(h);
    // size() raises for objects that are sequences by type but have no
    // length; the sequence's end() would not.
    const std::size_t n = seq.size();
    std::vector<std::int64_t> out;
    out.reserve(n);
    // Each item owned while it is read: range and NumPy arrays make their
    // items as they are asked for, and a borrowed one would be freed with
    // the accessor's temporary before it is read.
    for (std::size_t i = 0; i < n; ++i) {
      py::object item = seq[i];
      out.push_back(size_item(item, array_ndim(item), what));
    }
    return out;
  }
  if (!text && !PyBool_Check(o) && PyIndex_Check(o)) return {to_int64(h, what)};  // a NumPy integer
  throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " + type_name_of(h));
}

std::vector<std::int64_t> to_shape(py::handle args) {
  if (PyTuple_Check(args.ptr()) && PyTuple_GET_SIZE(args.ptr()) == 1) return to_dims(PyTuple_GET_ITEM(args.ptr(), 0), "size");
  return to_dims(args, "size");
}

py::tuple dims_to_py(const std::vector<std::int64_t>& dims) {
  py::tuple t(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) t[i] = py::int_(dims[i]);
  return t;
}

}  // namespace genesis::python
