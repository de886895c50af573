// C++ exceptions -> Python exceptions (Note [Errors] in core/error.h).
//
//   genesis::OutOfMemoryError     -> genesis.OutOfMemoryError (RuntimeError)
//   genesis::CudaError            -> genesis.CudaError (RuntimeError), .code
//   genesis::DivisionByZeroError  -> genesis.DivisionByZeroError (ZeroDivisionError, RuntimeError)
//   genesis::InvalidArgumentError -> genesis.InvalidArgumentError (ValueError, RuntimeError)
//   genesis::TypeMismatchError    -> genesis.TypeMismatchError (TypeError, RuntimeError)
//   genesis::IndexError           -> IndexError
//   genesis::FileError            -> the OSError subclass of its errno (FileNotFoundError, ...)
//   any other genesis::Error      -> RuntimeError
// Two bases where NumPy and PyTorch users expect different classes (a shape
// error is a ValueError to one and a RuntimeError to the other): both
// `except` clauses work. The message is message() alone, so the "CUDA OOM"
// text of the allocator reaches Python unchanged; the C++ location of the
// check that fired ("shape_ops.cpp:120") is the exception's `cpp_location`,
// and is appended to the message, as what() has it, when the environment
// sets GENESIS_DEBUG_ERRORS=1.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "py_bindings.h"
#include "genesis/core/error.h"

namespace genesis::python {

namespace {

// Owned for the life of the process on purpose: a static py::object would be
// released by a C++ static destructor after the interpreter has finalised.
PyObject* g_oom_error = nullptr;
PyObject* g_cuda_error = nullptr;
PyObject* g_invalid_argument = nullptr;
PyObject* g_type_mismatch = nullptr;
PyObject* g_division_by_zero = nullptr;

bool debug_errors() {
  const char* v = std::getenv("GENESIS_DEBUG_ERRORS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// "file.cpp:123", the base name only (what() has it in brackets).
std::string location_of(const Error& e) {
  std::string f = e.file() != nullptr ? e.file() : "?";
  if (const auto slash = f.find_last_of('/'); slash != std::string::npos) f = f.substr(slash + 1);
  return f + ":" + std::to_string(e.line());
}

// The message as a Python str. Paths in messages may hold bytes that are
// not UTF-8; they come through as U+FFFD rather than turning the error into
// a UnicodeDecodeError that hides it.
PyObject* message_of(const Error& e) {
  const std::string text = debug_errors() ? std::string(e.what()) : e.message();
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
}

// Raises an instance of `type` made from `args` (a tuple; stolen), with the
// error's location (and, for CudaError, code) as attributes.
void raise_with(PyObject* type, PyObject* args, const Error& e) {
  if (args == nullptr) return;  // building the arguments set an exception
  PyObject* inst = PyObject_Call(type, args, nullptr);
  Py_DECREF(args);
  if (inst == nullptr) return;  // the call set its own exception
  auto set = [inst](const char* name, PyObject* value) {
    if (value == nullptr) {
      PyErr_Clear();
      return;
    }
    if (PyObject_SetAttrString(inst, name, value) != 0) PyErr_Clear();
    Py_DECREF(value);
  };
  set("cpp_location", PyUnicode_FromString(location_of(e).c_str()));
  if (const auto* cuda = dynamic_cast<const CudaError*>(&e)) set("code", PyLong_FromLong(cuda->code()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst)), inst);
  Py_DECREF(inst);
}

void raise(PyObject* type, const Error& e) {
  PyObject* message = message_of(e);
  raise_with(type, message == nullptr ? nullptr : Py_BuildValue("(N)", message), e);
}

// OSError(errno, message) picks the subclass for the errno itself
// (FileNotFoundError for ENOENT, PermissionError for EACCES, ...). The path
// is already in the message, so it is not passed again as `filename` (which
// would print it twice).
void raise_file(const FileError& e) {
  PyObject* message = message_of(e);
  raise_with(PyExc_OSError, message == nullptr ? nullptr : Py_BuildValue("(iN)", e.error_number(), message), e);
}

PyObject* new_error(const char* name, const char* doc, std::initializer_list<PyObject*> bases) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(bases.size()));
  if (tuple == nullptr) throw py::error_already_set();
  Py_ssize_t i = 0;
  for (PyObject* b : bases) {
    Py_INCREF(b);
    PyTuple_SET_ITEM(tuple, i++, b);
  }
  PyObject* cls = PyErr_NewExceptionWithDoc(name, doc, tuple, nullptr);
  Py_DECREF(tuple);
  if (cls == nullptr) throw py::error_already_set();
  return cls;
}

}  // namespace

void throw_python_error(PyObject* type, const Error& e) {
  raise(type, e);
  throw py::error_already_set();
}

std::string error_text(const std::exception& e) {
  if (const auto* g = dynamic_cast<const Error*>(&e)) return debug_errors() ? std::string(g->what()) : g->message();
  return e.what();
}

void bind_errors(py::module_& m) {
  // Named "genesis.X" so that tracebacks and reprs show the public name.
  g_oom_error = new_error(
      "genesis.OutOfMemoryError",
      "The allocator could not satisfy a request even after releasing its cache. On a GPU the message "
      "contains 'CUDA OOM'.",
      {PyExc_RuntimeError});
  g_cuda_error = new_error(
      "genesis.CudaError",
      "A CUDA call failed, or CUDA (a GPU) is needed and not available. `code` is the raw CUDA error code.",
      {PyExc_RuntimeError});
  g_invalid_argument = new_error(
      "genesis.InvalidArgumentError",
      "An argument had a wrong value (shapes that do not broadcast, a bad size, ...). Both a ValueError "
      "(NumPy's class for these) and a RuntimeError (PyTorch's).",
      {PyExc_ValueError, PyExc_RuntimeError});
  g_type_mismatch = new_error(
      "genesis.TypeMismatchError",
      "An argument had a wrong dtype or type (bitwise operations on floating tensors, mixed matmul dtypes, "
      "...). Both a TypeError and a RuntimeError (PyTorch's class for dtype errors).",
      {PyExc_TypeError, PyExc_RuntimeError});
  g_division_by_zero = new_error(
      "genesis.DivisionByZeroError",
      "An integer division (//, %, fmod, div with a rounding mode) by zero. Both a ZeroDivisionError and a "
      "RuntimeError (PyTorch raises 'RuntimeError: ZeroDivisionError').",
      {PyExc_ZeroDivisionError, PyExc_RuntimeError});
  m.add_object("OutOfMemoryError", py::handle(g_oom_error));
  m.add_object("CudaError", py::handle(g_cuda_error));
  m.add_object("InvalidArgumentError", py::handle(g_invalid_argument));
  m.add_object("TypeMismatchError", py::handle(g_type_mismatch));
  m.add_object("DivisionByZeroError", py::handle(g_division_by_zero));

  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      raise(g_oom_error, e);
    } catch (const CudaError& e) {
      raise(g_cuda_error, e);
    } catch (const DivisionByZeroError& e) {
      raise(g_division_by_zero, e);
    } catch (const FileError& e) {
      raise_file(e);
    } catch (const InvalidArgumentError& e) {
      raise(g_invalid_argument, e);
    } catch (const TypeMismatchError& e) {
      raise(g_type_mismatch, e);
    } catch (const IndexError& e) {
      raise(PyExc_IndexError, e);
    } catch (const Error& e) {
      raise(PyExc_RuntimeError, e);
    }
    // Anything else falls through to pybind11's own translators
    // (std::bad_alloc -> MemoryError, std::exception -> RuntimeError).
  });

  // Test hook: raise each C++ error type so tests can check the mapping.
  m.def(
      "_raise_error",
      [](const std::string& kind, const std::string& message) {
        if (kind == "oom") GENESIS_THROW(OutOfMemoryError, message);
        if (kind == "cuda") throw CudaError(message, 2, __FILE__, __LINE__);
        if (kind == "invalid") GENESIS_THROW(InvalidArgumentError, message);
        if (kind == "type") GENESIS_THROW(TypeMismatchError, message);
        if (kind == "zero") GENESIS_THROW(DivisionByZeroError, message);
        if (kind == "index") GENESIS_THROW(IndexError, message);
        if (kind == "file") GENESIS_THROW_FILE("missing.bin", ENOENT, message);
        if (kind == "error") GENESIS_THROW(Error, message);
        GENESIS_THROW(InvalidArgumentError, "_raise_error: unknown kind '", kind, "'");
      },
      py::arg("kind"), py::arg("message"));
}

}  // namespace genesis::python
