// Tensor creation from Python: genesis.tensor(data), empty, zeros,
// ones, full, arange, rand, randn, randint, *_like, manual_seed.
//
// empty() is the allocation round trip the benchmark times
// (python/bench/bench_python.py), so it is a raw METH_FASTCALL function:
// no argument tuple or kwargs dict is built and no pybind11 overload
// resolution runs, only the size ints, a dtype pointer comparison and a
// cached device-string lookup (py_tensor_args.cpp) before the C++ call.
// Large fills run without the GIL (Note [GIL release] in py_gil.h).
#include <cstring>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/api.h"
#include "py_gil.h"
#include "py_location.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

// ------------------------------------------------- nested Python data ---
enum class Kind { kBool, kInt, kFloat };

struct Flat {
  const char* what;               // the caller, for errors: "genesis.tensor()"
  Shape shape;
  Kind kind = Kind::kBool;
  bool any_leaf = false;
  std::vector<double> f;          // used once a float is seen
  std::vector<std::int64_t> i;    // ints and bools until then
  bool any_real_float = false;    // a float leaf (not only big ints held as doubles)
  std::string big;                // the first int outside int64, for the message
  std::vector<std::int64_t> where;  // the index of the leaf being read
};

bool is_sequence(py::handle h) { return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()); }

// Tensors and arrays nested in lists become lists (rare; correctness over speed).
py::object as_nested(py::handle h) {
  if (py::isinstance<Tensor>(h)) {
    const auto& t = h.cast<const Tensor&>();
    return py::cast(t).attr("tolist")();
  }
  if (is_ndarray(h)) return h.attr("tolist")();
  if (PyRange_Check(h.ptr())) return py::list(py::reinterpret_borrow<py::object>(h));  // tensor(range(3)), as NumPy and PyTorch take it
  return py::reinterpret_borrow<py::object>(h);
}

// A Python or NumPy integer outside int64 (nullopt for anything else).
std::optional<double> big_integer(py::handle h) {
  if (!PyIndex_Check(h.ptr()) || PyBool_Check(h.ptr())) return std::nullopt;
  py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!idx) {
    PyErr_Clear();
    return std::nullopt;
  }
  int overflow = 0;
  (void)PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow == 0) return std::nullopt;
  const double d = PyLong_AsDouble(idx.ptr());  // OverflowError past the double range
  if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return d;
}

void add_leaf(Flat& out, py::handle h) {
  std::optional<Scalar> s;
  bool is_big = false;
  try {
    s = to_scalar(h);
  } catch (const py::value_error&) {
    // An int outside int64 is a float's value (as in NumPy and PyTorch,
    // which store 2**63 in a float tensor); from_sequence refuses it unless
    // the tensor's dtype is floating.
    const std::optional<double> big = big_integer(h);
    if (!big) throw;
    if (out.big.empty()) {
      std::string at;
      for (const std::int64_t k : out.where) at += "[" + std::to_string(k) + "]";
      out.big = integer_text(py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()))) + (at.empty() ? "" : " at " + at);
    }
    s = Scalar(*big);
    is_big = true;
  }
  if (!s) {
    throw py::type_error(std::string(out.what) + ": elements must be numbers (bool, int, float), got " +
                         type_name_of(h));
  }
  out.any_leaf = true;
  if (s->is_floating() && !is_big) out.any_real_float = true;
  if (s->is_floating() && out.kind != Kind::kFloat) {
    // First float: everything so far moves to the double buffer.
    out.f.assign(out.i.begin(), out.i.end());
    out.i.clear();
    out.kind = Kind::kFloat;
  } else if (s->is_integral() && out.kind == Kind::kBool) {
    out.kind = Kind::kInt;
  }
  if (out.kind == Kind::kFloat) out.f.push_back(s->to_double());
  else out.i.push_back(s->to_int64());
}

void flatten(Flat& out, py::handle h, std::size_t depth) {
  py::object obj = as_nested(h);
  if (!is_sequence(obj)) {
    if (depth != out.shape.size()) {
      throw py::value_error(std::string(out.what) +
                            ": ragged nested sequence (a number where a sequence of length " +
                            std::to_string(out.shape[depth]) + " was expected at dim " + std::to_string(depth) + ")");
    }
    add_leaf(out, obj);
    return;
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  const auto n = static_cast<std::int64_t>(seq.size());
  if (depth == out.shape.size()) {
    if (out.any_leaf) {
      throw py::value_error(std::string(out.what) +
                            ": ragged nested sequence (a sequence where a number was expected at dim " +
                            std::to_string(depth) + ")");
    }
    // Each level of nesting is a dim: stop before the recursion gets deeper
    // than a tensor can be (a list that contains itself never ends, and a
    // very deep one would overflow the C++ stack).
    if (depth >= static_cast<std::size_t>(kernels::kMaxDims)) {
      throw py::value_error(std::string(out.what) + ": the data nests sequences more than " +
                            std::to_string(kernels::kMaxDims) + " levels deep, deeper than the most dimensions a "
                            "tensor has (" + std::to_string(kernels::kMaxDims) + "), or a list contains itself");
    }
    // resize + assign, not push_back: GCC 12 reports a false -Warray-bounds
    // for push_back here once the recursion is inlined.
    out.shape.resize(depth + 1);
    out.shape[depth] = n;
  } else if (out.shape[depth] != n) {
    throw py::value_error(std::string(out.what) + ": ragged nested sequence: expected length " +
                          std::to_string(out.shape[depth]) + " at dim " + std::to_string(depth) + ", got " +
                          std::to_string(n));
  }
  // Owned: a sequence may make its items as they are asked for (range,
  // NumPy arrays), and a borrowed item would die with the accessor.
  out.where.push_back(0);
  for (py::object item : seq) {
    flatten(out, item, depth + 1);
    ++out.where.back();
  }
  out.where.pop_back();
}

// An explicit integer dtype takes only values it holds: 300 in a uint8
// tensor is an error, not 44 (as torch.tensor and NumPy 2 refuse it).
template <typename T>
void check_values_fit(const std::vector<T>& values, DType dtype) {
  if (dtype == DType::kBool || is_floating(dtype)) return;
  for (const T v : values) check_fits(Scalar(v), dtype);
}

Tensor from_sequence(py::handle data, std::optional<DType> dtype, Device device, const char* what) {
  Flat flat;
  flat.what = what;
  flatten(flat, data, 0);
  if (!flat.any_leaf) {
    // No elements: PyTorch's default float32 (shape from the nesting).
    return zeros(flat.shape, TensorOptions(dtype.value_or(DType::kFloat32), device));
  }
  if (!flat.big.empty() && !(dtype ? is_floating(*dtype) : flat.any_real_float)) {
    throw py::value_error(std::string(what) + ": " + flat.big +
                          " does not fit in int64, the widest integer dtype; with dtype=genesis.float64 it is "
                          "stored as a float");
  }
  if (dtype) {
    if (flat.kind == Kind::kFloat) check_values_fit(flat.f, *dtype);
    else if (flat.kind == Kind::kInt) check_values_fit(flat.i, *dtype);
  }
  switch (flat.kind) {
    case Kind::kFloat:
      return from_blob_copy(flat.f.data(), DType::kFloat64, flat.shape, dtype.value_or(DType::kFloat32), device);
    case Kind::kInt:
      return from_blob_copy(flat.i.data(), DType::kInt64, flat.shape, dtype.value_or(DType::kInt64), device);
    case Kind::kBool: {
      std::vector<std::uint8_t> bytes(flat.i.begin(), flat.i.end());
      return from_blob_copy(bytes.data(), DType::kBool, flat.shape, dtype.value_or(DType::kBool), device);
    }
  }
  return {};
}

Tensor copy_to(const Tensor& src, std::optional<DType> dtype, Device device) {
  Tensor r = src.to(device, dtype.value_or(src.dtype()));
  if (r.is_same(src) || r.storage() == src.storage()) r = r.clone();
  return r;
}

// ---------------------------------------------------------- empty() fast ---
// Error exit for the raw function: pybind11's registered translators (ours in
// py_errors.cpp first) turn the C++ exception into the Python one.
PyObject* raise_current() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (py::builtin_exception& e) {
    e.set_error();
  } catch (...) {
#if PYBIND11_VERSION_HEX >= 0x020D0000
    // pybind11 2.13+ (PyTorch's bundled copy on the GPU machine): one call
    // runs the module-local and the global translators.
    py::detail::try_translate_exceptions();
#else
    auto& local = py::detail::get_local_internals().registered_exception_translators;
    if (!py::detail::apply_exception_translators(local)) {
      auto& global = py::detail::get_internals().registered_exception_translators;
      if (!py::detail::apply_exception_translators(global)) {
        PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in genesis.empty");
      }
    }
#endif
  }
  return nullptr;
}

PyObject* empty_fast(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    Shape shape;
    shape.reserve(static_cast<std::size_t>(nargs));
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      PyObject* a = args[i];
      if (!PyLong_CheckExact(a)) {
        // Anything but plain ints (a sequence, NumPy integers, a 0-d
        // tensor): the converter of every size argument.
        py::tuple all(nargs);
        for (Py_ssize_t j = 0; j < nargs; ++j) all[static_cast<std::size_t>(j)] = py::handle(args[j]);
        shape = to_shape(all);
        break;
      }
      const long long v = PyLong_AsLongLong(a);
      if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
      shape.push_back(v);
    }
    TensorOptions options;
    if (kwnames != nullptr) {
      const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
      for (Py_ssize_t k = 0; k < nk; ++k) {
        const char* key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        if (key == nullptr) throw py::error_already_set();
        py::handle value(args[nargs + k]);
        if (std::strcmp(key, "dtype") == 0) {
          if (!value.is_none()) options.dtype = to_dtype(value);
        } else if (std::strcmp(key, "device") == 0) {
          options.device = to_tensor_device(value);
        } else if (std::strcmp(key, "requires_grad") == 0 || std::strcmp(key, "pin_memory") == 0) {
          continue;  // accepted for PyTorch compatibility; no autograd, pinned tensors not yet
        } else {
          throw py::type_error(std::string("empty() got an unexpected keyword argument '") + key + "'");
        }
      }
    }
    AllocationSite site;
    return wrap(empty(shape, options)).release().ptr();
  } catch (...) {
    return raise_current();
  }
}

PyMethodDef g_empty_def = {"empty", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&empty_fast)),
                           METH_FASTCALL | METH_KEYWORDS,
                           "empty(*size, dtype=None, device=None) -> Tensor\n\nUninitialised memory from the "
                           "device's caching allocator."};

TensorOptions like_options(const Tensor& t, const py::object& dtype, const py::object& device) {
  return TensorOptions(dtype.is_none() ? t.dtype() : to_dtype(dtype), device.is_none() ? t.device() : to_tensor_device(device));
}

}  // namespace

Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, Device device, const char* what) {
  if (py::isinstance<Tensor>(data)) return copy_to(data.cast<const Tensor&>(), dtype, device);
  if (is_ndarray(data)) return copy_to(from_numpy_array(data), dtype, device);
  if (is_sequence(data) || PyRange_Check(data.ptr())) return from_sequence(data, dtype, device, what);
  if (auto s = to_scalar(data)) {
    // A NumPy scalar keeps its dtype, as a 0-d array does (np.float64(3)
    // -> float64, np.int8(3) -> int8); Python numbers infer bool, int64 or
    // float32.
    if (!dtype && is_numpy_scalar(data)) {
      const std::string name = py::str(data.attr("dtype").attr("name"));
      try {
        dtype = dtype_from_name(name);
      } catch (const Error&) {
        throw py::type_error(std::string(what) + ": NumPy " + name +
                             " scalars have no genesis dtype; pass dtype= (bool, uint8, int8, int16, int32, int64, "
                             "float16, bfloat16, float32, float64)");
      }
    }
    return full({}, *s, dtype, device);
  }
  // Anything else exposing the array interface or DLPack (torch, cupy):
  if (py::hasattr(data, "__dlpack__")) {
    py::object m = py::module_::import("genesis");
    return copy_to(m.attr("from_dlpack")(data).cast<Tensor>(), dtype, device);
  }
  throw py::type_error(std::string(what) + ": cannot make a tensor from " + type_name_of(data));
}

void bind_tensor_creation(py::module_& m) {
  // Raw function (see the top of this file); the module keeps a reference.
  PyObject* fn = PyCFunction_NewEx(&g_empty_def, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) throw py::error_already_set();
  m.add_object("empty", py::reinterpret_steal<py::object>(fn));

  m.def(
      "tensor",
      [](py::handle data, py::object dtype, py::object device) {
        AllocationSite site;
        return tensor_from_data(data, to_opt_dtype(dtype), to_tensor_device(device));
      },
      py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "A new tensor with a copy of `data` (nested lists, numbers, NumPy arrays, tensors).");

  auto sized = [&m](const char* name, Tensor (*fn)(const Shape&, TensorOptions), const char* dflt_doc) {
    m.def(
        name,
        [fn](py::args size, py::object dtype, py::object device) {
          AllocationSite site;
          const Shape shape = to_shape(size);
          const TensorOptions o(dtype.is_none() ? DType::kFloat32 : to_dtype(dtype), to_tensor_device(device));
          return without_gil_if_large(shape_elements(shape), [&] { return fn(shape, o); });
        },
        py::arg("dtype") = py::none(), py::arg("device") = py::none(), dflt_doc);
  };
  sized("zeros", &zeros, "zeros(*size, dtype=None, device=None)");
  sized("ones", &ones, "ones(*size, dtype=None, device=None)");
  sized("rand", &rand, "rand(*size, dtype=None, device=None): uniform in [0, 1)");
  sized("randn", &randn, "randn(*size, dtype=None, device=None): standard normal");

  m.def(
      "full",
      [](py::handle size, py::handle value, py::object dtype, py::object device) {
        auto s = to_scalar(value);
        if (!s) throw py::type_error("full(): fill_value must be a number");
        AllocationSite site;
        const Shape shape = to_shape(py::make_tuple(size));
        const auto dt = to_opt_dtype(dtype);
        const Device d = to_tensor_device(device);
        return without_gil_if_large(shape_elements(shape), [&] { return full(shape, *s, dt, d); });
      },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none());

  m.def(
      "arange",
      [](py::handle a, py::handle b, py::handle step, py::object dtype, py::object device) {
        auto num = [](py::handle h, const char* what) {
          auto s = to_scalar(h);
          if (!s) throw py::type_error(std::string("arange(): ") + what + " must be a number");
          return *s;
        };
        const Scalar start = b.is_none() ? Scalar(std::int64_t{0}) : num(a, "start");
        const Scalar end = b.is_none() ? num(a, "end") : num(b, "end");
        const Scalar by = b.is_none() ? Scalar(std::int64_t{1}) : num(step, "step");
        const auto dt = to_opt_dtype(dtype);
        const Device d = to_tensor_device(device);
        AllocationSite site;
        // The length, roughly: only to decide about the GIL (arange checks).
        const double count = (end.to_double() - start.to_double()) / by.to_double();
        const auto n = count >= 0 && count < 1e18 ? static_cast<std::int64_t>(count) : 0;
        if (b.is_none()) return without_gil_if_large(n, [&] { return arange(end, dt, d); });
        return without_gil_if_large(n, [&] { return arange(start, end, by, dt, d); });
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(),
      py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "arange(end) or arange(start, end, step=1)");

  m.def(
      "randint",
      [](py::args args, py::object size, py::object dtype, py::object device) {
        // randint(high, size), randint(low, high, size), or size= as a keyword.
        std::vector<py::handle> a(args.begin(), args.end());
        if (size.is_none()) {
          if (a.empty()) throw py::type_error("randint() needs a size");
          size = py::reinterpret_borrow<py::object>(a.back());
          a.pop_back();
        }
        std::int64_t low = 0, high = 0;
        if (a.size() == 1) high = to_int64(a[0], "high");
        else if (a.size() == 2) { low = to_int64(a[0], "low"); high = to_int64(a[1], "high"); }
        else throw py::type_error("randint(low=0, high, size)");
        AllocationSite site;
        const Shape shape = to_shape(py::make_tuple(size));
        const TensorOptions o(dtype.is_none() ? DType::kInt64 : to_dtype(dtype), to_tensor_device(device));
        return without_gil_if_large(shape_elements(shape), [&] { return randint(low, high, shape, o); });
      },
      py::arg("size") = py::none(), py::arg("dtype") = py::none(), py::arg("device") = py::none());

  auto like = [&m](const char* name, Tensor (*fn)(const Shape&, TensorOptions)) {
    m.def(
        name,
        [fn](const Tensor& t, py::object dtype, py::object device) {
          AllocationSite site;
          const TensorOptions o = like_options(t, dtype, device);
          const Shape shape = t.shape();
          return without_gil_if_large(shape_elements(shape), [&] { return fn(shape, o); });
        },
        py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none());
  };
  like("empty_like", &empty);
  like("zeros_like", &zeros);
  like("ones_like", &ones);
  like("rand_like", &rand);
  like("randn_like", &randn);
  m.def(
      "full_like",
      [](const Tensor& t, py::handle value, py::object dtype, py::object device) {
        auto s = to_scalar(value);
        if (!s) throw py::type_error("full_like(): fill_value must be a number");
        AllocationSite site;
        const TensorOptions o = like_options(t, dtype, device);
        const Shape shape = t.shape();
        return without_gil_if_large(shape_elements(shape), [&] { return full(shape, *s, o.dtype, o.device); });
      },
      py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none());

  m.def("manual_seed", [](py::handle seed) { manual_seed(static_cast<std::uint64_t>(to_int64(seed, "seed"))); },
        py::arg("seed"), "Seeds the random number generator of every device.");
  m.def("initial_seed", &initial_seed);
}

}  // namespace genesis::python
