// x[idx] and x[idx] = v with NumPy's semantics, through the C++ IndexPlan
// (genesis::index / index_put, include/genesis/tensor/index.h).
//
// This file only translates Python index objects into IndexItems:
//   int, NumPy integer, __index__ objects -> int
//   bool, numpy.bool_                     -> bool (NumPy: adds a dim of 1 or 0)
//   slice                                 -> Slice (bounds through __index__)
//   ...  / None                           -> Ellipsis / NewAxis
//   Tensor                                -> integer or bool index tensor
//   ndarray, list (nested)                -> an index tensor, converted as
//                                            NumPy converts it (np.asarray)
//   tuple                                 -> one item per element
// and maps errors to NumPy's classes: every malformed index is an IndexError
// (NumPy raises IndexError for too many indices, two ellipses, float or
// object arrays, masks of the wrong shape, index arrays that do not
// broadcast), except a zero slice step (ValueError, as NumPy) and a value
// that does not broadcast in an assignment (ValueError, as NumPy). C++ says
// InvalidArgumentError for several of these; the plan is what tells them
// apart (see setitem).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/api.h"
#include "py_bindings.h"
#include "py_location.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

[[noreturn]] void invalid_index(py::handle h) {
  throw py::index_error(
      "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays/tensors are valid "
      "indices (got " +
      py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>() + ")");
}

std::optional<std::int64_t> slice_bound(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  if (PyBool_Check(o)) return o == Py_True ? 1 : 0;  // Python: bools are valid slice bounds
  if (!PyIndex_Check(o)) throw py::type_error("slice indices must be integers or None or have an __index__ method");
  // Clamped to +-PY_SSIZE_T_MAX on overflow, as Python's own slicing does:
  // far-out bounds clip to the dimension anyway.
  const Py_ssize_t v = PyNumber_AsSsize_t(o, nullptr);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<std::int64_t>(v);
}

// An ndarray (or a list NumPy made into one) -> index tensor. Integer arrays
// become int64 (NumPy's intp), bool arrays stay bool; anything else is NumPy's
// IndexError.
Tensor array_index(py::handle arr) {
  const std::string kind = arr.attr("dtype").attr("kind").cast<std::string>();
  if (kind == "b") return from_numpy_array(arr);
  if (kind == "i" || kind == "u") {
    py::object as64 = arr.attr("astype")("int64");
    return from_numpy_array(as64);
  }
  throw py::index_error("arrays used as indices must be of integer (or boolean) type (got dtype " +
                        py::str(arr.attr("dtype")).cast<std::string>() + ")");
}

// A list without NumPy loaded: nested Python ints/bools (empty -> int64).
Tensor list_index(py::handle list) {
  py::module_ np;
  try {
    np = py::module_::import("numpy");
  } catch (const py::error_already_set&) {
    Tensor t = tensor_from_data(list, std::nullopt, Device{});
    if (t.numel() == 0) t = t.to(DType::kInt64);
    if (t.dtype() != DType::kBool && is_floating(t.dtype())) {
      throw py::index_error("lists used as indices must hold integers or booleans");
    }
    return t;
  }
  // np.asarray decides the dtype exactly as NumPy indexing would ([] -> a
  // float array that NumPy then treats as intp; [True, 1] -> int).
  py::object arr = np.attr("asarray")(list);
  if (arr.attr("size").cast<std::int64_t>() == 0 && arr.attr("dtype").attr("kind").cast<std::string>() == "f") {
    arr = arr.attr("astype")("int64");
  }
  return array_index(arr);
}

IndexItem to_item(py::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return IndexItem(o == Py_True);
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) throw py::index_error("cannot fit 'int' into an index-sized integer");
    return IndexItem(static_cast<std::int64_t>(v));
  }
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    const auto step = slice_bound(s->step);
    if (step && *step == 0) throw py::value_error("slice step cannot be zero");
    return IndexItem(Slice(slice_bound(s->start), slice_bound(s->stop), step));
  }
  if (o == Py_Ellipsis) return IndexItem(Ellipsis);
  if (o == Py_None) return IndexItem(NewAxis);
  if (py::isinstance<Tensor>(h)) {
    const auto& t = h.cast<const Tensor&>();
    if (t.dtype() != DType::kBool && is_floating(t.dtype())) {
      throw py::index_error("tensors used as indices must be of integer (or boolean) type (got " +
                            std::string(dtype_name(t.dtype())) + ")");
    }
    // NumPy treats a 0-d integer array as an integer (checked on its own,
    // not after broadcasting with the other index arrays).
    if (t.dim() == 0 && t.dtype() != DType::kBool) return IndexItem(t.item().to_int64());
    return IndexItem(t);
  }
  if (is_ndarray(h)) {
    Tensor t = array_index(h);
    if (t.dim() == 0 && t.dtype() != DType::kBool) return IndexItem(t.item().to_int64());
    return IndexItem(std::move(t));
  }
  if (PyList_Check(o) || PyTuple_Check(o)) return IndexItem(list_index(h));
  // NumPy scalars: np.bool_ is a bool (0-d mask), np.integer an int.
  if (auto s = to_scalar(h)) {
    if (s->is_bool()) return IndexItem(s->to_bool());
    if (s->is_integral()) return IndexItem(s->to_int64());
    invalid_index(h);
  }
  if (PyIndex_Check(o)) {
    const Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_IndexError);
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return IndexItem(static_cast<std::int64_t>(v));
  }
  invalid_index(h);
}

std::vector<IndexItem> to_items(py::handle index) {
  std::vector<IndexItem> items;
  if (PyTuple_Check(index.ptr())) {
    const Py_ssize_t n = PyTuple_GET_SIZE(index.ptr());
    items.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(to_item(PyTuple_GET_ITEM(index.ptr(), i)));
  } else {
    items.push_back(to_item(index));
  }
  return items;
}

Tensor getitem(const Tensor& x, py::handle index) {
  // x[int] is the common case in loops: no vector, no plan.
  if (PyLong_CheckExact(index.ptr()) && x.dim() > 0) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow == 0) return x.select(0, i);
  }
  std::vector<IndexItem> items = to_items(index);
  AllocationSite site;
  try {
    return genesis::index(x, items);
  } catch (const InvalidArgumentError& e) {
    throw_python_error(PyExc_IndexError, e);
  }
}

constexpr const char* kSetitem = "x[index] = value";
constexpr const char* kSetitemAccepts =
    "a number, a genesis.Tensor, a NumPy array of a bool, integer or floating dtype, or a nested list of numbers";

// A NumPy array as an assigned value. NumPy assigns any bool, integer or
// floating array, so those genesis has no tensors of (uint16, uint32,
// uint64, longdouble, big-endian) are read as int64 or float64 first; the
// values are cast to x's dtype anyway.
Tensor array_value(py::handle arr) {
  const py::object dtype = arr.attr("dtype");
  const std::string kind = dtype.attr("kind").cast<std::string>();
  const std::string name = py::str(dtype.attr("name"));
  const bool native_order = dtype.attr("byteorder").cast<std::string>() != ">";
  const bool supported = kind == "b" || kind == "i" || name == "uint8" || name == "float16" || name == "float32" ||
                         name == "float64";
  if (supported && native_order) return from_numpy_array(arr);
  if (kind == "b") return from_numpy_array(arr.attr("astype")("bool"));
  if (kind == "f") return from_numpy_array(arr.attr("astype")("float64"));
  if (kind == "i" || kind == "u") {
    if (name == "uint64" && arr.attr("size").cast<std::int64_t>() > 0) {
      const auto most = arr.attr("max")().cast<unsigned long long>();
      if (most > static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
        throw py::value_error(std::string(kSetitem) + ": the uint64 value " + std::to_string(most) +
                              " does not fit in int64, the widest integer dtype");
      }
    }
    return from_numpy_array(arr.attr("astype")("int64"));
  }
  throw py::type_error(std::string(kSetitem) + ": cannot assign a NumPy array of dtype " + name + "; value must be " +
                       kSetitemAccepts);
}

void setitem(Tensor& x, py::handle index, py::handle value, bool accumulate = false) {
  std::vector<IndexItem> items = to_items(index);
  AllocationSite site;
  std::optional<Scalar> scalar = to_scalar(value);
  Tensor v;
  if (!scalar) {
    if (py::isinstance<Tensor>(value)) v = value.cast<Tensor>();
    else if (is_ndarray(value)) v = array_value(value);
    // Lists go straight to x's dtype, as NumPy casts them (no float32 detour).
    // Other tensors (torch, CuPy) come through DLPack.
    else if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()) || py::hasattr(value, "__dlpack__"))
      v = tensor_from_data(value, x.dtype(), Device{}, kSetitem);
    else
      throw py::type_error(std::string(kSetitem) + ": value must be " + kSetitemAccepts + ", got " +
                           type_name_of(value));
  }
  try {
    if (scalar) genesis::index_put(x, items, *scalar, accumulate);
    else genesis::index_put(x, items, v, accumulate);
  } catch (const InvalidArgumentError& e) {
    // A bad index (IndexError, as NumPy) or a value that does not broadcast
    // (ValueError, as NumPy)? Planning the index alone tells: it fails only
    // for the former. Error path only, so planning twice costs nothing.
    try {
      (void)plan_index_put(x, items, scalar.has_value());
    } catch (const InvalidArgumentError& plan_error) {
      throw_python_error(PyExc_IndexError, plan_error);
    }
    throw;
  }
}

}  // namespace

void bind_tensor_index(TensorClass& cls) {
  cls.def("__getitem__", &getitem)
      .def("__setitem__", [](Tensor& x, py::handle index, py::handle value) { setitem(x, index, value); })
      .def(
          "index_put_",
          [](py::object self, py::handle indices, py::handle values, bool accumulate) {
            // PyTorch's form: x.index_put_((rows, cols), values, accumulate=True)
            // is np.add.at(x, (rows, cols), values) when accumulating
            // (repeated positions add up), x[indices] = values otherwise.
            setitem(tensor_ref(self), indices, values, accumulate);
            return self;
          },
          py::arg("indices"), py::arg("values"), py::arg("accumulate") = false)
      .def(
          "_index_plan",
          [](const Tensor& x, py::handle index, py::object assign_scalar) {
            // For tests and debugging: how x[index] would run (its IndexPlan).
            std::vector<IndexItem> items = to_items(index);
            IndexPlan p;
            try {
              p = assign_scalar.is_none() ? plan_index(x, items) : plan_index_put(x, items, assign_scalar.cast<bool>());
            } catch (const InvalidArgumentError& e) {
              throw_python_error(PyExc_IndexError, e);
            }
            py::dict d;
            d["kind"] = index_kind_name(p.kind);
            d["result_shape"] = shape_tuple(p.result_shape);
            d["result_strides"] = shape_tuple(p.result_strides);
            d["ptr_offset"] = p.ptr_offset;
            d["ptr_offset_bytes"] = p.ptr_offset_bytes;
            d["needs_mask_compaction"] = p.needs_mask_compaction;
            d["temp_memory_bytes"] = p.temp_memory_bytes;
            d["advanced_position"] = p.advanced_position;
            return d;
          },
          py::arg("index"), py::arg("assign_scalar") = py::none());
}

}  // namespace genesis::python
