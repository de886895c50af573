#include "py_storage_create.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "genesis/storage/copy.h"
#include "genesis/tensor/scalar.h"
#include "py_values.h"
#include "py_location.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

// Copies `host` (contiguous, `src_dtype`, shape `shape`) into a new storage.
Storage from_host(const void* host, std::vector<std::int64_t> shape, DType src_dtype, Device device,
                  std::optional<DType> dtype) {
  Storage source = Storage::borrow(const_cast<void*>(host), shape, src_dtype, Device(DeviceType::kCPU));
  AllocationSite site;
  Storage out = Storage::empty(std::move(shape), dtype.value_or(src_dtype), device);
  py::gil_scoped_release release;
  out.copy_(source);
  return out;
}

// ------------------------------------------------------------- buffers ---

// RAII for PyObject_GetBuffer.
struct BufferView {
  Py_buffer view{};
  bool held = false;
  ~BufferView() {
    if (held) PyBuffer_Release(&view);
  }
};

enum class Kind { kBool, kSigned, kUnsigned, kFloat };

// What a PEP 3118 format says: the element kind and whether the bytes need
// swapping (big-endian data on this little-endian host).
struct Format {
  Kind kind;
  bool swap;
};

Format parse_format(const char* fmt, Py_ssize_t itemsize) {
  std::string f = fmt == nullptr ? "B" : fmt;
  bool swap = false;
  if (!f.empty() && std::string("@=<>!").find(f[0]) != std::string::npos) {
    swap = f[0] == '>' || f[0] == '!';
    f = f.substr(1);
  }
  if (f.size() == 2 && f[0] == '1') f = f.substr(1);  // "1f": an explicit count of one
  auto bad = [&]() -> Format {
    throw py::type_error("create_storage: buffer format '" + std::string(fmt == nullptr ? "B" : fmt) + "' (itemsize " +
                         std::to_string(itemsize) +
                         ") has no Genesis dtype; supported: bool, int8/16/32/64, uint8 (uint16/32/64 become "
                         "int64), float16/32/64");
  };
  if (f.size() != 1) return bad();
  switch (f[0]) {
    case '?':
      return {Kind::kBool, false};
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
    case 'n':
      return {Kind::kSigned, swap};
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
    case 'N':
    case 'c':
      return {Kind::kUnsigned, swap};
    case 'e':
    case 'f':
    case 'd':
      if (itemsize == 2 || itemsize == 4 || itemsize == 8) return {Kind::kFloat, swap};
      return bad();
    default:
      return bad();
  }
}

DType dtype_of(Kind kind, Py_ssize_t itemsize) {
  switch (kind) {
    case Kind::kBool:
      return DType::kBool;
    case Kind::kSigned:
      return itemsize == 1   ? DType::kInt8
             : itemsize == 2 ? DType::kInt16
             : itemsize == 4 ? DType::kInt32
                             : DType::kInt64;
    case Kind::kUnsigned:
      return itemsize == 1 ? DType::kUInt8 : DType::kInt64;  // wider ones are widened
    case Kind::kFloat:
      return itemsize == 2 ? DType::kFloat16 : itemsize == 4 ? DType::kFloat32 : DType::kFloat64;
  }
  return DType::kUInt8;
}

// Visits every element of a strided buffer in row-major order.
template <typename F>
void for_each_element(const char* base, const Py_buffer& v, F&& f) {
  const int nd = v.ndim;
  std::vector<Py_ssize_t> idx(static_cast<std::size_t>(nd), 0);
  for (int i = 0; i < nd; ++i)
    if (v.shape[i] == 0) return;
  while (true) {
    const char* p = base;
    for (int i = 0; i < nd; ++i) p += idx[i] * v.strides[i];
    f(p);
    int d = nd - 1;
    while (d >= 0 && ++idx[d] == v.shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

Storage from_buffer(py::handle data, Device device, std::optional<DType> dtype) {
  BufferView b;
  if (PyObject_GetBuffer(data.ptr(), &b.view, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  b.held = true;
  const Py_buffer& v = b.view;
  if (v.suboffsets != nullptr) throw py::type_error("create_storage: indirect (PIL-style) buffers are not supported");
  const Format fmt = parse_format(v.format, v.itemsize);
  // The itemsize is the exporter's word; only the sizes a dtype has are read.
  const bool size_ok = fmt.kind == Kind::kBool ? v.itemsize == 1
                                                : v.itemsize == 1 || v.itemsize == 2 || v.itemsize == 4 ||
                                                      v.itemsize == 8;
  if (!size_ok || (fmt.kind == Kind::kFloat && v.itemsize == 1))
    throw py::type_error("create_storage: buffer format '" + std::string(v.format ? v.format : "B") +
                         "' with itemsize " + std::to_string(v.itemsize) + " has no Genesis dtype");
  const std::size_t itemsize = static_cast<std::size_t>(v.itemsize);
  const DType src = dtype_of(fmt.kind, v.itemsize);
  std::vector<std::int64_t> shape;
  std::int64_t count = 1;
  for (int i = 0; i < v.ndim; ++i) {
    shape.push_back(static_cast<std::int64_t>(v.shape[i]));
    if (v.shape[i] < 0 || __builtin_mul_overflow(count, static_cast<std::int64_t>(v.shape[i]), &count))
      throw py::value_error("create_storage: the buffer's shape is invalid or too large");
  }
  const std::size_t n = static_cast<std::size_t>(count);
  const bool widen = fmt.kind == Kind::kUnsigned && itemsize > 1;
  const std::size_t elem = widen ? 8 : itemsize;
  // Broadcast arrays (stride 0) can claim far more elements than memory
  // holds; the packed copy must not wrap around.
  if (n > 0 && elem > 0 && n > (std::size_t{1} << 62) / elem)
    throw py::value_error("create_storage: the buffer has " + std::to_string(n) +
                          " elements, too many to copy into a storage");
  // Packed straight into pooled host memory (no second temporary copy), so
  // a too-large buffer is the allocator's OutOfMemoryError and the storage
  // carries the caller's allocation site.
  AllocationSite site;
  Storage host = Storage::empty(shape, src, Device(DeviceType::kCPU));
  auto* packed = static_cast<unsigned char*>(host.data_ptr());
  // Elements in row-major order, byte-swapped to host order where needed.
  std::size_t k = 0;
  const bool contiguous = PyBuffer_IsContiguous(&v, 'C') != 0;
  if (contiguous && !fmt.swap && !widen) {
    if (n > 0) {
      // The exporter keeps v.buf alive while we hold the view.
      py::gil_scoped_release release;
      parallel_memcpy(packed, v.buf, n * itemsize);
    }
  } else {
    for_each_element(static_cast<const char*>(v.buf), v, [&](const char* p) {
      unsigned char tmp[16];
      std::memcpy(tmp, p, itemsize);
      if (fmt.swap) std::reverse(tmp, tmp + itemsize);
      if (!widen) {
        std::memcpy(packed + k * itemsize, tmp, itemsize);
      } else {
        std::uint64_t u = 0;
        if (itemsize == 2) {
          std::uint16_t x;
          std::memcpy(&x, tmp, 2);
          u = x;
        } else if (itemsize == 4) {
          std::uint32_t x;
          std::memcpy(&x, tmp, 4);
          u = x;
        } else {
          std::memcpy(&u, tmp, 8);
        }
        if (u > static_cast<std::uint64_t>(INT64_MAX))
          throw py::value_error("create_storage: unsigned value " + std::to_string(u) +
                                " does not fit in int64, the widest integer dtype");
        const auto s = static_cast<std::int64_t>(u);
        std::memcpy(packed + k * 8, &s, 8);
      }
      ++k;
    });
  }
  const DType target = dtype.value_or(src);
  if (device.is_cpu() && target == src) return host;
  Storage out = Storage::empty(std::move(shape), target, device);
  py::gil_scoped_release release;
  out.copy_(host);
  return out;
}

// ---------------------------------------------------------- sequences ---

enum class Leaf : unsigned char { kBool, kInt, kFloat };

struct Value {
  Leaf kind;
  bool big = false;  // an int outside int64: only a float dtype can take it
  std::int64_t i = 0;
  double d = 0.0;
};

bool is_nesting(py::handle obj) { return PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr()); }

bool is_numpy_bool(py::handle obj) {
  const char* name = Py_TYPE(obj.ptr())->tp_name;
  return std::strcmp(name, "numpy.bool_") == 0 || std::strcmp(name, "numpy.bool") == 0;
}

Value leaf_value(py::handle obj, const std::vector<std::int64_t>& where) {
  auto position = [&] {
    std::string s = "[";
    for (std::size_t i = 0; i < where.size(); ++i) s += (i ? "][" : "") + std::to_string(where[i]);
    return s + "]";
  };
  Value v{};
  if (PyBool_Check(obj.ptr()) || is_numpy_bool(obj)) {
    v.kind = Leaf::kBool;
    v.i = PyObject_IsTrue(obj.ptr()) == 1 ? 1 : 0;
    v.d = static_cast<double>(v.i);
    return v;
  }
  if (PyFloat_Check(obj.ptr())) {
    v.kind = Leaf::kFloat;
    v.d = PyFloat_AS_DOUBLE(obj.ptr());
    return v;
  }
  if (py::isinstance<py::str>(obj) || py::isinstance<py::bytes>(obj) || PyComplex_Check(obj.ptr()))
    throw py::type_error("create_storage: element " + position() + " is a " + type_name_of(obj) +
                         ", not a number (bool, int or float)");
  if (PyIndex_Check(obj.ptr())) {
    py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
    if (!idx) throw py::error_already_set();
    v.kind = Leaf::kInt;
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
    if (overflow != 0) {
      v.big = true;
      v.d = PyLong_AsDouble(idx.ptr());  // OverflowError beyond the double range
      if (v.d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    } else {
      if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
      v.i = static_cast<std::int64_t>(x);
      v.d = static_cast<double>(x);
    }
    return v;
  }
  // NumPy float scalars other than float64, Decimal, Fraction, ...
  PyObject* f = PyNumber_Float(obj.ptr());
  if (f == nullptr) {
    PyErr_Clear();
    throw py::type_error("create_storage: element " + position() + " is a " + type_name_of(obj) +
                         ", not a number (bool, int or float)");
  }
  v.kind = Leaf::kFloat;
  v.d = PyFloat_AS_DOUBLE(f);
  Py_DECREF(f);
  return v;
}

// Walks nested lists and tuples: the shape comes from the first element at
// each depth, and every other sequence must agree with it.
void walk(py::handle obj, std::size_t depth, std::vector<std::int64_t>& shape, bool& shape_done,
          std::vector<std::int64_t>& where, std::vector<Value>& out) {
  if (Py_EnterRecursiveCall(" in create_storage") != 0) throw py::error_already_set();
  struct Leave {
    ~Leave() { Py_LeaveRecursiveCall(); }
  } leave;
  const bool nested = is_nesting(obj);
  if (!shape_done) {
    if (nested) {
      shape.push_back(static_cast<std::int64_t>(PySequence_Fast_GET_SIZE(obj.ptr())));
    } else {
      shape_done = true;
    }
  }
  auto where_str = [&] {
    std::string s = where.empty() ? "the top level" : "element [";
    for (std::size_t i = 0; i < where.size(); ++i) s += (i ? "][" : "") + std::to_string(where[i]);
    return where.empty() ? s : s + "]";
  };
  if (depth < shape.size()) {
    if (!nested)
      throw py::value_error("create_storage: ragged nesting: " + where_str() + " is a number where a sequence of " +
                            std::to_string(shape[depth]) + " was expected");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj.ptr());
    if (n != shape[depth])
      throw py::value_error("create_storage: ragged nesting: " + where_str() + " has " + std::to_string(n) +
                            " elements but " + std::to_string(shape[depth]) + " were expected (shape so far " +
                            std::string(py::str(dims_to_py(shape))) + ")");
    for (Py_ssize_t i = 0; i < n; ++i) {
      // A new reference: the element must survive even if code run by a
      // number conversion mutates the list.
      py::object item = py::reinterpret_borrow<py::object>(PySequence_Fast_GET_ITEM(obj.ptr(), i));
      where.push_back(i);
      walk(item, depth + 1, shape, shape_done, where, out);
      where.pop_back();
    }
    if (n == 0) shape_done = true;
    return;
  }
  if (nested)
    throw py::value_error("create_storage: ragged nesting: " + where_str() +
                          " is a sequence where a number was expected");
  out.push_back(leaf_value(obj, where));
}

Storage from_sequence(py::handle data, Device device, std::optional<DType> dtype) {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> where;
  std::vector<Value> values;
  bool shape_done = false;
  walk(data, 0, shape, shape_done, where, values);
  bool any_float = false, any_int = false, any_big = false;
  for (const Value& v : values) {
    any_float |= v.kind == Leaf::kFloat;
    any_int |= v.kind == Leaf::kInt;
    any_big |= v.big;
  }
  const DType target = dtype.value_or(any_float || values.empty() ? DType::kFloat32
                                      : any_int                   ? DType::kInt64
                                                                  : DType::kBool);
  // An integer dtype takes only the values it holds: 300 as uint8 is an
  // error, not 44 (the rule genesis.tensor follows too). Bool takes any
  // number as its truth value.
  if (target != DType::kBool && !is_floating(target)) {
    for (const Value& v : values) {
      if (v.big) continue;  // refused below with its own message
      check_fits(v.kind == Leaf::kFloat ? Scalar(v.d) : Scalar(v.i), target);
    }
  }
  if (any_float || (any_big && is_floating(target))) {
    std::vector<double> buf(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) buf[i] = values[i].d;
    return from_host(buf.data(), std::move(shape), DType::kFloat64, device, target);
  }
  if (any_big) {
    PyErr_SetString(PyExc_OverflowError, "create_storage: an integer does not fit in int64");
    throw py::error_already_set();
  }
  if (!any_int) {
    std::vector<unsigned char> buf(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) buf[i] = static_cast<unsigned char>(values[i].i);
    return from_host(buf.data(), std::move(shape), DType::kBool, device, target);
  }
  std::vector<std::int64_t> buf(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) buf[i] = values[i].i;
  return from_host(buf.data(), std::move(shape), DType::kInt64, device, target);
}

}  // namespace

Storage storage_from_data(py::handle data, Device device, std::optional<DType> dtype) {
  if (py::isinstance<PyStorage>(data)) {
    const Storage src = storage_arg(data, "data");
    AllocationSite site;
    Storage out = Storage::empty(src.shape(), dtype.value_or(src.dtype()), device);
    py::gil_scoped_release release;
    out.copy_(src);
    return out;
  }
  if (PyObject_CheckBuffer(data.ptr())) return from_buffer(data, device, dtype);
  if (is_nesting(data) || PyBool_Check(data.ptr()) || PyFloat_Check(data.ptr()) || PyIndex_Check(data.ptr()) ||
      is_numpy_bool(data))
    return from_sequence(data, device, dtype);
  if (py::isinstance<py::str>(data)) throw py::type_error("create_storage: data must be numbers, not a str");
  // Other number-like objects (numpy float32 scalars, Decimal) as 0-d data.
  if (PyObject_HasAttrString(data.ptr(), "__float__")) return from_sequence(data, device, dtype);
  throw py::type_error(
      "create_storage: data must be a (nested) list or tuple of numbers, a number, a "
      "genesis.Storage, or an object with the buffer protocol (a NumPy array, bytes, ...); got " +
      type_name_of(data));
}

}  // namespace genesis::python
