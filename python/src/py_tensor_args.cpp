// Argument conversion for the tensor bindings (see py_tensor_args.h).
#include "py_tensor_args.h"

#include <array>
#include <mutex>
#include <string>
#include <unordered_map>

#include "genesis/core/error.h"
#include "genesis/cuda/device.h"

namespace genesis::python {

namespace {

// Registered by genesis/_tensor.py. Plain PyObject* owned for the life of the
// process: py::object statics would be released by C++ static destructors
// after the interpreter is gone (the same reason as py_errors.cpp).
std::array<PyObject*, kNumDTypes> g_dtypes{};
PyObject* g_device_cls = nullptr;
PyObject* g_values_indices_cls = nullptr;

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

// NumPy's scalar types, looked up once NumPy is imported (never imported by
// us just to check a type: a program without NumPy pays nothing).
struct NumpyTypes {
  PyObject* ndarray = nullptr;
  PyObject* generic = nullptr;
  PyObject* bool_ = nullptr;
  PyObject* integer = nullptr;
  PyObject* floating = nullptr;
  PyObject* dtype = nullptr;
};
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

bool isinstance_of(py::handle h, PyObject* type) {
  return type != nullptr && PyObject_IsInstance(h.ptr(), type) == 1;
}

}  // namespace

bool is_ndarray(py::handle h) {
  const NumpyTypes* np = numpy_types();
  return np != nullptr && isinstance_of(h, np->ndarray);
}

// pybind11 finds a bound type by typeid in hash tables on every cast (a tenth
// of an empty()+del round trip); the type_info is fixed once the class is
// bound, so it is looked up once.
const py::detail::type_info* tensor_type_info() {
  static const py::detail::type_info* info = py::detail::get_type_info(typeid(Tensor));
  return info;
}

bool is_tensor(py::handle h) {
  return PyObject_TypeCheck(h.ptr(), tensor_type_info()->type) != 0;
}

Tensor& tensor_ref(py::handle h) {
  // Methods that take self as a handle can be called unbound with anything
  // (genesis.Tensor.__add__(5, 3)): refuse instead of reading a non-instance.
  if (!is_tensor(h)) {
    throw py::type_error("expected a genesis.Tensor, got " +
                         py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
  }
  auto* inst = reinterpret_cast<py::detail::instance*>(h.ptr());
  auto v_h = inst->get_value_and_holder(tensor_type_info());
  // Belt and braces: tp_new (install_tensor_new) always constructs the C++
  // Tensor, but an instance without one must never be read.
  if (!v_h.holder_constructed()) throw py::type_error("uninitialised genesis.Tensor");
  return *static_cast<Tensor*>(v_h.value_ptr());
}

void install_tensor_new(py::handle cls) {
  // pybind11's tp_new only reserves room for the C++ object and leaves it to
  // __init__; genesis.Tensor.__new__(genesis.Tensor) (pickle, copy, careless
  // subclasses) would then hand methods an instance whose first use makes
  // pybind11 allocate raw, unconstructed memory for it: a crash. Our tp_new
  // constructs an undefined Tensor (every operation on it raises) instead.
  static newfunc base_new = nullptr;
  static newfunc tensor_new = nullptr;
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  base_new = type->tp_new;
  tensor_new = [](PyTypeObject* t, PyObject* args, PyObject* kwargs) -> PyObject* {
    PyObject* self = base_new(t, args, kwargs);
    if (self == nullptr) return nullptr;
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    const py::detail::type_info* info = tensor_type_info();
    inst->get_value_and_holder(info).value_ptr() = new Tensor();
    inst->owned = true;
    info->init_instance(inst, nullptr);  // holder and instance registration, as pybind11's own casts do
    return self;
  };
  type->tp_new = tensor_new;
  // Python refuses `T.__new__(T)` through the base class's __new__ once
  // tp_new differs from it ("not safe"): give the class its own __new__
  // (set in the type's dict directly, so tp_new stays ours).
  static PyMethodDef new_def = {
      "__new__",
      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(
          +[](PyObject*, PyObject* args, PyObject* kwargs) -> PyObject* {
            if (PyTuple_GET_SIZE(args) < 1 || !PyType_Check(PyTuple_GET_ITEM(args, 0)) ||
                !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(args, 0)),
                                  tensor_type_info()->type)) {
              PyErr_SetString(PyExc_TypeError, "genesis.Tensor.__new__(X): X must be genesis.Tensor or a subclass");
              return nullptr;
            }
            auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(args, 0));
            PyObject* rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
            if (rest == nullptr) return nullptr;
            // tensor_new, not t->tp_new: a Python subclass's tp_new looks
            // __new__ up again and would come back here.
            PyObject* self = tensor_new(t, rest, kwargs);
            Py_DECREF(rest);
            return self;
          })),
      METH_VARARGS | METH_KEYWORDS, "Creates an undefined tensor (use genesis.tensor, zeros, ... instead)."};
  PyObject* fn = PyCFunction_NewEx(&new_def, nullptr, nullptr);
  if (fn == nullptr) throw py::error_already_set();
  PyObject* sm = PyStaticMethod_New(fn);
  Py_DECREF(fn);
  if (sm == nullptr || PyDict_SetItemString(type->tp_dict, "__new__", sm) != 0) {
    Py_XDECREF(sm);
    throw py::error_already_set();
  }
  Py_DECREF(sm);
  PyType_Modified(type);
}

py::object wrap(Tensor t) {
  const py::detail::type_info* info = tensor_type_info();
  auto move = [](const void* p) -> void* {
    return new Tensor(std::move(*const_cast<Tensor*>(static_cast<const Tensor*>(p))));
  };
  return py::reinterpret_steal<py::object>(py::detail::type_caster_generic::cast(
      &t, py::return_value_policy::move, py::handle(), info, nullptr, +move));
}

py::object dtype_object(DType t) {
  PyObject* o = g_dtypes[static_cast<std::size_t>(t)];
  if (o == nullptr) throw std::runtime_error("genesis dtypes are not registered (import genesis)");
  return py::reinterpret_borrow<py::object>(o);
}

py::object device_object(Device d) {
  auto& cache = device_objects();
  auto it = cache.find(d);
  if (it != cache.end()) return py::reinterpret_borrow<py::object>(it->second);
  if (g_device_cls == nullptr) throw std::runtime_error("genesis.device is not registered (import genesis)");
  py::object obj = py::reinterpret_borrow<py::object>(g_device_cls)(d.str());
  cache.emplace(d, obj.inc_ref().ptr());
  return obj;
}

py::object values_indices(Tensor values, Tensor indices) {
  return py::reinterpret_borrow<py::object>(g_values_indices_cls)(wrap(std::move(values)), wrap(std::move(indices)));
}

DType to_dtype(py::handle h) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (g_dtypes[i] == h.ptr()) return static_cast<DType>(i);
  }
  if (PyUnicode_Check(h.ptr())) return dtype_from_name(h.cast<std::string>());
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
        throw py::type_error("NumPy dtype " + name + " has no genesis equivalent");
      }
    }
  }
  // torch.float32 and friends: their str() is a name C++ accepts.
  const std::string type_name = py::str(py::type::handle_of(h).attr("__module__"));
  if (type_name == "torch") return dtype_from_name(py::str(h).cast<std::string>());
  throw py::type_error("expected a dtype (genesis.float32, 'float32', ...), got " +
                       py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
}

std::optional<DType> to_opt_dtype(py::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_dtype(h);
}

Device to_device(py::handle h) {
  if (h.is_none()) return Device{};
  if (PyUnicode_Check(h.ptr())) {
    // Fastest path: the same string object as last time (a literal such as
    // device='cuda' in a loop is one interned object). We hold a reference,
    // so the pointer cannot be reused by another string.
    static PyObject* last_text = nullptr;
    static Device last_device{};
    if (h.ptr() == last_text) return last_device;
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &len);
    if (s == nullptr) throw py::error_already_set();
    std::string key(s, static_cast<std::size_t>(len));
    auto& cache = parsed_devices();
    auto it = cache.find(key);
    Device d = it != cache.end() ? it->second : genesis::cuda::parse_device(key);
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
    return genesis::cuda::parse_device("cuda:" + std::to_string(h.cast<long long>()));
  }
  throw py::type_error("expected a device ('cpu', 'cuda:0', genesis.device), got " +
                       py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
}

std::int64_t to_int64(py::handle h, const char* what) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) throw py::type_error(std::string(what) + " must be an integer, not bool");
  PyObject* idx = PyNumber_Index(o);
  if (idx == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " must be an integer, not " +
                         py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow != 0) throw py::value_error(std::string(what) + " does not fit in int64");
  return v;
}

std::vector<std::int64_t> to_shape(py::handle args) {
  py::handle seq = args;
  if (PyTuple_Check(args.ptr()) && PyTuple_GET_SIZE(args.ptr()) == 1) {
    py::handle only = PyTuple_GET_ITEM(args.ptr(), 0);
    if (PyTuple_Check(only.ptr()) || PyList_Check(only.ptr())) seq = only;
    else return {to_int64(only, "size")};
  }
  if (!PyTuple_Check(seq.ptr()) && !PyList_Check(seq.ptr())) {
    if (PyLong_Check(seq.ptr())) return {to_int64(seq, "size")};
    throw py::type_error("size must be ints or a tuple/list of ints");
  }
  py::sequence s = py::reinterpret_borrow<py::sequence>(seq);
  std::vector<std::int64_t> out;
  out.reserve(s.size());
  for (py::handle item : s) out.push_back(to_int64(item, "size"));
  return out;
}

std::optional<Scalar> to_scalar(py::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) throw py::value_error("integer does not fit in int64");
    return Scalar(static_cast<std::int64_t>(v));
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AS_DOUBLE(o));
  if (const NumpyTypes* np = numpy_types()) {
    if (isinstance_of(h, np->generic)) {
      if (isinstance_of(h, np->bool_)) return Scalar(PyObject_IsTrue(o) == 1);
      if (isinstance_of(h, np->integer)) return Scalar(static_cast<std::int64_t>(h.cast<long long>()));
      if (isinstance_of(h, np->floating)) return Scalar(h.cast<double>());
    }
  }
  return std::nullopt;
}

std::optional<TensorOrScalar> to_operand(py::handle h) {
  if (is_tensor(h)) return TensorOrScalar(tensor_ref(h));
  if (auto s = to_scalar(h)) return TensorOrScalar(*s);
  if (is_ndarray(h)) return TensorOrScalar(from_numpy_array(h));
  return std::nullopt;
}

Tensor as_tensor(py::handle h) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  return tensor_from_data(h, std::nullopt, Device{});
}

void bind_tensor_args(py::module_& m) {
  m.def(
      "_register_tensor_types",
      [](py::list dtypes, py::object device_cls, py::object values_indices_cls) {
        if (static_cast<int>(dtypes.size()) != kNumDTypes) throw py::value_error("one dtype object per DType expected");
        for (int i = 0; i < kNumDTypes; ++i) g_dtypes[i] = py::object(dtypes[i]).release().ptr();
        g_device_cls = device_cls.release().ptr();
        g_values_indices_cls = values_indices_cls.release().ptr();
      },
      "Internal: called once by genesis/_tensor.py.");
}

}  // namespace genesis::python
