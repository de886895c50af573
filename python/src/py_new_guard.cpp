// Objects whose C++ part was never constructed cannot be made.
//
// Note [Uninitialised instances]: pybind11 gives every bound class a
// __new__ (pybind11_object.__new__) that allocates the Python object and
// leaves the C++ object unconstructed; __init__ constructs it. Calling
// __new__ alone (genesis._C.Allocator.__new__(genesis._C.Allocator), also
// through super() or pybind11_object.__new__) therefore yields an object
// whose methods read a null or garbage C++ object: methods bound to member
// functions crash the process. Checking every method would cost every call
// (tensor methods are hot), so the one entry point is guarded instead:
// pybind11_object.__new__, which all bound classes inherit (none defines
// its own), is replaced by a function that refuses for Genesis classes and
// their Python subclasses with a TypeError, and hands every other class to
// the original. object.__new__(cls) is refused by Python itself ("not
// safe"), and Cls(...) never looks __new__ up (it calls the type's tp_new
// slot, which is unchanged), so construction, pybind11's own casts of C++
// results, and other pybind11 modules in the process work as before.
// Python subclasses of Genesis classes are the one catch: Python gives a new
// class a tp_new slot that calls the __new__ found in the MRO unless that is
// the builtin one, which would send Sub(...) into the refusal. Each Genesis
// class therefore has an __init_subclass__ that gives a subclass without a
// __new__ of its own the C slot of its base again; a subclass that defines
// __new__ and calls super().__new__(cls) is refused like a direct call.
#include <string>
#include <unordered_set>

#include "py_bindings.h"

namespace genesis::python {

namespace {

// Process lifetime (the module cannot be unloaded): plain pointers, never
// released by C++ static destructors after the interpreter is gone.
std::unordered_set<PyTypeObject*>* g_guarded = nullptr;
PyObject* g_original_new = nullptr;

bool is_guarded(PyTypeObject* cls) {
  PyObject* mro = cls->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return g_guarded->count(cls) != 0;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    if (g_guarded->count(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))) != 0) return true;
  }
  return false;
}

PyObject* guarded_new(PyObject* /*self*/, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) >= 1 && PyType_Check(PyTuple_GET_ITEM(args, 0))) {
    auto* cls = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(args, 0));
    if (is_guarded(cls)) {
      PyErr_Format(PyExc_TypeError,
                   "%s.__new__() alone would make an object whose C++ part is never constructed (using it would "
                   "crash): create it with %s(...) where it has a constructor, or get it from the genesis API",
                   cls->tp_name, cls->tp_name);
      return nullptr;
    }
  }
  return PyObject_Call(g_original_new, args, kwargs);
}

PyMethodDef g_guarded_new_def = {"__new__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&guarded_new)),
                                 METH_VARARGS | METH_KEYWORDS,
                                 "Creates an instance; refused for Genesis classes (Note [Uninitialised instances])."};

// classmethod __init_subclass__ of the Genesis classes: a Python subclass
// constructs through its base's C slot (see the Note).
PyObject* init_subclass(PyObject* /*self*/, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 1 || !PyType_Check(PyTuple_GET_ITEM(args, 0)) ||
      (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "__init_subclass__() takes no arguments");
    return nullptr;
  }
  auto* cls = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(args, 0));
  if (g_guarded->count(cls) == 0 && cls->tp_base != nullptr && cls->tp_dict != nullptr &&
      PyDict_GetItemString(cls->tp_dict, "__new__") == nullptr) {
    cls->tp_new = cls->tp_base->tp_new;
  }
  Py_RETURN_NONE;
}

PyMethodDef g_init_subclass_def = {
    "__init_subclass__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&init_subclass)),
    METH_VARARGS | METH_KEYWORDS, "Keeps a subclass's construction working (Note [Uninitialised instances])."};

bool is_genesis_type(PyTypeObject* t) {
  py::object module = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(t)).attr("__module__");
  const std::string name = py::str(module);
  return name == "genesis" || name.rfind("genesis.", 0) == 0;
}

}  // namespace

void guard_uninitialised_instances(py::module_& m) {
  if (g_guarded == nullptr) g_guarded = new std::unordered_set<PyTypeObject*>();
  PyTypeObject* base = nullptr;
  for (const auto& entry : py::detail::get_internals().registered_types_py) {
    PyTypeObject* t = entry.first;
    if (!is_genesis_type(t) || g_guarded->count(t) != 0) continue;
    g_guarded->insert(t);
    PyObject* fn = PyCFunction_NewEx(&g_init_subclass_def, nullptr, m.attr("__name__").ptr());
    if (fn == nullptr) throw py::error_already_set();
    PyObject* cm = PyClassMethod_New(fn);
    Py_DECREF(fn);
    if (cm == nullptr) throw py::error_already_set();
    const int rc = PyDict_SetItemString(t->tp_dict, "__init_subclass__", cm);
    Py_DECREF(cm);
    if (rc != 0) throw py::error_already_set();
    PyType_Modified(t);
    // The pybind11 base every bound class derives from (the one holding __new__).
    for (PyTypeObject* b = t->tp_base; b != nullptr; b = b->tp_base) {
      if (b->tp_dict != nullptr && PyDict_GetItemString(b->tp_dict, "__new__") != nullptr) {
        if (b != &PyBaseObject_Type) base = b;
        break;
      }
    }
  }
  if (base == nullptr || g_original_new != nullptr) return;  // nothing bound, or already guarded
  PyObject* original = PyDict_GetItemString(base->tp_dict, "__new__");  // borrowed
  if (original == nullptr) return;
  // Shared with other pybind11 modules of the same ABI: guarded once per
  // process, delegating for everything that is not ours.
  if (PyCFunction_Check(original) && PyCFunction_GET_FUNCTION(original) ==
                                         reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&guarded_new))) {
    return;
  }
  Py_INCREF(original);
  g_original_new = original;
  PyObject* fn = PyCFunction_NewEx(&g_guarded_new_def, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) throw py::error_already_set();
  PyObject* sm = PyStaticMethod_New(fn);
  Py_DECREF(fn);
  if (sm == nullptr) throw py::error_already_set();
  // Into the dict, not through setattr: setattr would also replace the
  // tp_new slot, which construction (Cls(...)) calls.
  const int rc = PyDict_SetItemString(base->tp_dict, "__new__", sm);
  Py_DECREF(sm);
  if (rc != 0) throw py::error_already_set();
  PyType_Modified(base);
}

}  // namespace genesis::python
