#include "py_values.h"

#include <climits>

#include "genesis/core/error.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/runtime.h"

namespace genesis::python {

namespace {

// The Python side of dtypes and devices lives in the package
// (python/genesis/_dtype.py, _device.py); the classes are looked up on each
// call through sys.modules (a dict lookup) rather than cached in statics,
// which would be released after the interpreter has shut down.
py::object package_attr(const char* module, const char* name) { return py::module_::import(module).attr(name); }

std::int64_t index_to_int64(py::handle item, const char* what) {
  PyObject* idx = PyNumber_Index(item.ptr());  // ints, numpy integers; TypeError for floats
  if (idx == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string(what) + " must contain integers, got " +
                         std::string(py::str(py::type::of(item).attr("__name__"))));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow != 0) {
    PyErr_SetString(PyExc_OverflowError, (std::string(what) + ": value does not fit in 64 bits").c_str());
    throw py::error_already_set();
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<std::int64_t>(v);
}

}  // namespace

DType dtype_from_py(py::handle obj) {
  py::object d = package_attr("genesis._dtype", "dtype")(obj);
  return static_cast<DType>(d.attr("_value").cast<int>());
}

py::object dtype_to_py(DType t) {
  return package_attr("genesis._dtype", "dtype").attr("_by_value")[py::int_(static_cast<int>(t))];
}

Device device_from_py(py::handle obj) {
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance(obj, package_attr("genesis._device", "device"))) return obj.attr("_c").cast<Device>();
  std::string text;
  if (py::isinstance<py::str>(obj)) {
    text = obj.cast<std::string>();
  } else if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) {
    const std::int64_t i = index_to_int64(obj, "device");
    if (i < 0 || i > INT_MAX) throw py::value_error("device index must be >= 0, got " + std::to_string(i));
    text = "cuda:" + std::to_string(i);
  }
  if (!text.empty() || py::isinstance<py::str>(obj)) {
    // A well-formed CUDA device on a machine without a GPU is a CudaError
    // (what genesis.cuda raises there too), not a bad argument.
    if (text.rfind("cuda", 0) == 0 && !cuda::is_available()) {
      const Device d = [&] {
        try {
          return genesis::cuda::parse_device(text);
        } catch (const InvalidArgumentError&) {
          const bool well_formed = text == "cuda" || (text.size() > 5 && text[4] == ':' &&
                                                      text.find_first_not_of("0123456789", 5) == std::string::npos);
          if (well_formed) cuda::detail::throw_cuda_unavailable(("device '" + text + "'").c_str(), __FILE__, __LINE__);
          throw;
        }
      }();
      return d;
    }
    return genesis::cuda::parse_device(text);
  }
  throw py::type_error(
      "device must be a string such as 'cpu' or 'cuda:0', an int (a CUDA index) or a "
      "genesis.device, got " +
      std::string(py::str(py::type::of(obj).attr("__name__"))));
}

py::object device_to_py(const Device& d) { return package_attr("genesis._device", "device")(d.str()); }

std::vector<std::int64_t> dims_from_py(py::handle obj, const char* what) {
  std::vector<std::int64_t> out;
  if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) {
    out.push_back(index_to_int64(obj, what));
    return out;
  }
  // A str is a sequence of characters, never a shape.
  if (py::isinstance<py::str>(obj) || py::isinstance<py::bytes>(obj) || !PySequence_Check(obj.ptr()))
    throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  for (py::handle item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (PyBool_Check(item.ptr())) throw py::type_error(std::string(what) + " must contain integers, got bool");
    out.push_back(index_to_int64(item, what));
  }
  return out;
}

py::tuple dims_to_py(const std::vector<std::int64_t>& dims) {
  py::tuple t(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) t[i] = py::int_(dims[i]);
  return t;
}

}  // namespace genesis::python
