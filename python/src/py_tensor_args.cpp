// Tensor arguments and results of the tensor bindings (see py_tensor_args.h).
#include "py_tensor_args.h"

#include <string>

#include "genesis/core/error.h"

namespace genesis::python {

namespace {

// Registered by genesis/_tensor.py, with the dtype and device objects
// (register_value_types); owned for the life of the process.
PyObject* g_values_indices_cls = nullptr;

}  // namespace

bool is_ndarray(py::handle h) {
  const NumpyTypes* np = numpy_types();
  return np != nullptr && isinstance_of(h, np->ndarray);
}

bool is_numpy_scalar(py::handle h) {
  const NumpyTypes* np = numpy_types();
  return np != nullptr && isinstance_of(h, np->generic);
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

py::object values_indices(Tensor values, Tensor indices) {
  return py::reinterpret_borrow<py::object>(g_values_indices_cls)(wrap(std::move(values)), wrap(std::move(indices)));
}

std::string integer_text(py::handle i) {
  // Python refuses to print ints of more than 4300 digits; such a number
  // is named by its size.
  const auto bits = i.attr("bit_length")().cast<long long>();
  if (bits > 256) return "an integer of " + std::to_string(bits) + " bits";
  return "integer " + py::str(i).cast<std::string>();
}

std::optional<Scalar> to_scalar(py::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) throw py::value_error(integer_text(h) + " does not fit in int64");
    return Scalar(static_cast<std::int64_t>(v));
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AS_DOUBLE(o));
  if (const NumpyTypes* np = numpy_types()) {
    if (isinstance_of(h, np->generic)) {
      if (isinstance_of(h, np->bool_)) return Scalar(PyObject_IsTrue(o) == 1);
      if (isinstance_of(h, np->integer)) {
        // Through __index__: a uint64 above int64's range is a clear error,
        // not pybind11's "unable to cast".
        py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(o));
        if (!idx) throw py::error_already_set();
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
        if (overflow != 0) {
          throw py::value_error(integer_text(idx) + " (" + type_name_of(h) + ") does not fit in int64");
        }
        return Scalar(static_cast<std::int64_t>(v));
      }
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
        register_value_types(dtypes, device_cls);
        g_values_indices_cls = values_indices_cls.release().ptr();
      },
      "Internal: called once by genesis/_tensor.py.");
}

}  // namespace genesis::python
