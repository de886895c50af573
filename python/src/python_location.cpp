#include "python_location.h"

#include <atomic>
#include <mutex>

#include <pybind11/pybind11.h>

namespace genesis::python {

namespace {
std::atomic<bool> g_capture{false};
std::mutex g_prefix_mutex;
std::string g_prefix;  // guarded by g_prefix_mutex

std::string str_attr(PyObject* obj, const char* name) {
  PyObject* v = PyObject_GetAttrString(obj, name);
  if (v == nullptr) {
    PyErr_Clear();
    return "?";
  }
  std::string out = "?";
  if (PyUnicode_Check(v)) {
    const char* s = PyUnicode_AsUTF8(v);
    if (s != nullptr) out = s;
    else PyErr_Clear();
  }
  Py_DECREF(v);
  return out;
}
}  // namespace

void set_capture_locations(bool on) noexcept { g_capture.store(on, std::memory_order_relaxed); }
bool capture_locations() noexcept { return g_capture.load(std::memory_order_relaxed); }

void set_package_prefix(std::string prefix) {
  std::lock_guard<std::mutex> lock(g_prefix_mutex);
  g_prefix = std::move(prefix);
}

std::string python_caller_location() {
  std::string prefix;
  {
    std::lock_guard<std::mutex> lock(g_prefix_mutex);
    prefix = g_prefix;
  }
  // PyEval_GetFrame returns a borrowed reference; PyFrame_GetBack and
  // PyFrame_GetCode (3.9+) return new ones.
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  std::string result;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    std::string file = str_attr(reinterpret_cast<PyObject*>(code), "co_filename");
    if (prefix.empty() || file.compare(0, prefix.size(), prefix) != 0) {
      result = file + ":" + std::to_string(PyFrame_GetLineNumber(frame)) + " in " +
               str_attr(reinterpret_cast<PyObject*>(code), "co_name");
      Py_DECREF(code);
      Py_DECREF(frame);
      return result;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  return result;
}

AllocationSite::AllocationSite() {
  if (!capture_locations()) return;
  const std::string where = python_caller_location();
  if (!where.empty()) scope_.emplace(memory::intern_location(where));
}

}  // namespace genesis::python
