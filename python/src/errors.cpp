// C++ exceptions -> Python exceptions (Note [Errors] in core/error.h).
//
//   genesis::OutOfMemoryError     -> genesis.OutOfMemoryError (RuntimeError)
//   genesis::CudaError            -> genesis.CudaError (RuntimeError), .code
//   genesis::InvalidArgumentError -> ValueError
//   genesis::TypeMismatchError    -> TypeError
//   genesis::IndexError           -> IndexError
//   any other genesis::Error      -> RuntimeError
// The message is what() (message plus "[file:line]" of the check that fired),
// so the "CUDA OOM" text of the allocator reaches Python unchanged.
#include <exception>

#include "bindings.h"
#include "genesis/core/error.h"

namespace genesis::python {

namespace {

// Owned for the life of the process on purpose: a static py::object would be
// released by a C++ static destructor after the interpreter has finalised.
PyObject* g_oom_error = nullptr;
PyObject* g_cuda_error = nullptr;

void set_cuda_error(const CudaError& e) {
  PyObject* inst = PyObject_CallFunction(g_cuda_error, "s", e.what());
  if (inst == nullptr) return;  // the call set its own exception
  PyObject* code = PyLong_FromLong(e.code());
  if (code != nullptr) {
    PyObject_SetAttrString(inst, "code", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(g_cuda_error, inst);
  Py_DECREF(inst);
}

}  // namespace

void bind_errors(py::module_& m) {
  // Named "genesis.X" so that tracebacks and reprs show the public name.
  g_oom_error = PyErr_NewExceptionWithDoc(
      "genesis.OutOfMemoryError",
      "The allocator could not satisfy a request even after releasing its cache. On a GPU the message "
      "contains 'CUDA OOM'.",
      PyExc_RuntimeError, nullptr);
  g_cuda_error = PyErr_NewExceptionWithDoc(
      "genesis.CudaError",
      "A CUDA call failed, or CUDA (a GPU) is needed and not available. `code` is the raw CUDA error code.",
      PyExc_RuntimeError, nullptr);
  if (g_oom_error == nullptr || g_cuda_error == nullptr) throw py::error_already_set();
  m.add_object("OutOfMemoryError", py::handle(g_oom_error));
  m.add_object("CudaError", py::handle(g_cuda_error));

  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(g_oom_error, e.what());
    } catch (const CudaError& e) {
      set_cuda_error(e);
    } catch (const InvalidArgumentError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const TypeMismatchError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
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
        if (kind == "index") GENESIS_THROW(IndexError, message);
        if (kind == "error") GENESIS_THROW(Error, message);
        GENESIS_THROW(InvalidArgumentError, "_raise_error: unknown kind '", kind, "'");
      },
      py::arg("kind"), py::arg("message"));
}

}  // namespace genesis::python
