// Operators, math functions, reductions and matmul on genesis.Tensor.
//
// Python numbers are weak scalars (TensorOrScalar holding a Scalar): the C++
// promotion rules decide the result dtype (int32 tensor + 2 -> int32,
// int32 tensor + 2.5 -> float32), as PyTorch does. An operand that is neither
// a Tensor, a number nor an ndarray makes the operator return NotImplemented,
// so Python tries the other operand's reflected method and finally raises
// TypeError. Large operations run without the GIL (Note [GIL release] in
// py_gil.h).
#include <string>
#include <vector>

#include "genesis/tensor/api.h"
#include "py_gil.h"
#include "py_location.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

using BinaryFn = Tensor (*)(const TensorOrScalar&, const TensorOrScalar&);
using UnaryFn = Tensor (*)(const Tensor&);

// What an operator returns for an operand it does not take: NotImplemented,
// so that Python tries the other operand's method. Except for a complex
// number: NumPy's complex scalars would then turn the tensor into an array
// through __array__ and return a complex ndarray, so `t + np.complex64(1)`
// is refused here, as `t + 1j` is.
py::object not_implemented(py::handle other) {
  bool complex = PyComplex_Check(other.ptr());
  if (!complex && Py_TYPE(other.ptr())->tp_name != nullptr) {
    const std::string name = Py_TYPE(other.ptr())->tp_name;
    complex = name == "numpy.complex64" || name == "numpy.complex128" || name == "numpy.clongdouble" ||
              name == "numpy.complex256";
  }
  if (complex) {
    throw py::type_error("genesis tensors have no complex dtype: cannot combine a tensor with " + type_name_of(other));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

// Operators take `self` as a handle: pybind11 then converts nothing (no
// type lookup) and tensor_ref reads the Tensor straight from the instance.
// pybind11 only calls a method with an instance of its class as self.
template <BinaryFn F>
py::object binary(py::handle self, py::handle other) {
  auto o = to_operand(other);
  if (!o) return not_implemented(other);
  AllocationSite site;
  const TensorOrScalar a(tensor_ref(self));
  return wrap(without_gil_if_large(operation_elements(a, *o), [&] { return F(a, *o); }));
}

template <BinaryFn F>
py::object reflected(py::handle self, py::handle other) {
  auto o = to_operand(other);
  if (!o) return not_implemented(other);
  AllocationSite site;
  const TensorOrScalar b(tensor_ref(self));
  return wrap(without_gil_if_large(operation_elements(*o, b), [&] { return F(*o, b); }));
}

// add / sub with PyTorch's alpha: a op alpha * b. As in PyTorch, a
// floating alpha is refused when both operands are integers (the result
// would silently change dtype).
Scalar alpha_of(py::handle alpha, const TensorOrScalar& a, const TensorOrScalar& b, const char* what) {
  auto s = to_scalar(alpha);
  if (!s) throw py::type_error(std::string(what) + ": alpha must be a number, got " + type_name_of(alpha));
  auto integral = [](const TensorOrScalar& v) {
    return v.is_scalar() ? !v.scalar().is_floating() : !is_floating(v.tensor().dtype());
  };
  if (s->is_floating() && integral(a) && integral(b)) {
    throw py::type_error(std::string(what) + ": for integer operands, alpha must not be a floating point number (got " +
                         std::to_string(s->to_double()) + ")");
  }
  return *s;
}

// b, or alpha * b when an alpha other than 1 is given.
TensorOrScalar scaled(const TensorOrScalar& a, const TensorOrScalar& b, py::handle alpha, const char* what) {
  if (alpha.is_none()) return b;
  const Scalar k = alpha_of(alpha, a, b, what);
  if (k.is_integral() && k.to_int64() == 1) return b;
  const TensorOrScalar bt = b.is_scalar() ? TensorOrScalar(full({}, b.scalar(), std::nullopt, Device{})) : b;
  return TensorOrScalar(mul(bt, k));
}

template <BinaryFn F>
Tensor with_alpha(const TensorOrScalar& a, const TensorOrScalar& b, py::handle alpha, const char* what) {
  return F(a, scaled(a, b, alpha, what));
}

template <BinaryFn F>
py::object binary_alpha(py::handle self, py::handle other, py::handle alpha) {
  auto o = to_operand(other);
  if (!o) throw py::type_error("expected a tensor or a number, got " + type_name_of(other));
  AllocationSite site;
  const TensorOrScalar a(tensor_ref(self));
  const char* what = F == &add ? "add" : "sub";
  return wrap(without_gil_if_large(operation_elements(a, *o), [&] { return with_alpha<F>(a, *o, alpha, what); }));
}

template <Tensor& (Tensor::*F)(const TensorOrScalar&)>
py::object inplace_alpha(py::object self, py::handle other, py::handle alpha) {
  auto o = to_operand(other);
  if (!o) throw py::type_error("expected a tensor or a number, got " + type_name_of(other));
  Tensor t = tensor_ref(self);
  const char* what = F == &Tensor::add_ ? "add_" : "sub_";
  const TensorOrScalar b = scaled(TensorOrScalar(t), *o, alpha, what);
  without_gil_if_large(operation_elements(t, b), [&] { (t.*F)(b); });
  return self;
}

template <BinaryFn F>
Tensor binary_fn_alpha(py::handle a, py::handle b, py::handle alpha) {
  auto x = to_operand(a);
  auto y = to_operand(b);
  if (!x || !y) throw py::type_error("expected tensors or numbers");
  if (x->is_scalar() && y->is_scalar()) x = TensorOrScalar(full({}, x->scalar(), std::nullopt, Device{}));
  AllocationSite site;
  const char* what = F == &add ? "add" : "sub";
  return without_gil_if_large(operation_elements(*x, *y), [&] { return with_alpha<F>(*x, *y, alpha, what); });
}

// Module-level form: either operand may be the number.
template <BinaryFn F>
Tensor binary_fn(py::handle a, py::handle b) {
  auto x = to_operand(a);
  auto y = to_operand(b);
  if (!x || !y) throw py::type_error("expected tensors or numbers");
  if (x->is_scalar() && y->is_scalar()) x = TensorOrScalar(full({}, x->scalar(), std::nullopt, Device{}));
  AllocationSite site;
  return without_gil_if_large(operation_elements(*x, *y), [&] { return F(*x, *y); });
}

// In place: the handle is copied (it shares the elements), so the operation
// writes into the tensor `self` holds without keeping a reference into the
// Python object while the GIL is released.
template <Tensor& (Tensor::*F)(const TensorOrScalar&)>
py::object inplace(py::object self, py::handle other) {
  auto o = to_operand(other);
  if (!o) return not_implemented(other);
  Tensor t = tensor_ref(self);
  without_gil_if_large(operation_elements(t, *o), [&] { (t.*F)(*o); });
  return self;
}

// In place through binary_out (for operations without a Tensor method).
template <kernels::BinaryOp Op>
py::object inplace_op(py::object self, py::handle other) {
  auto o = to_operand(other);
  if (!o) return not_implemented(other);
  Tensor t = tensor_ref(self);
  without_gil_if_large(operation_elements(t, *o), [&] { binary_out(Op, t, t, *o); });
  return self;
}

template <Tensor& (Tensor::*F)()>
py::object inplace_unary(py::object self) {
  Tensor t = self.cast<Tensor&>();
  without_gil_if_large(elements(t), [&] { (t.*F)(); });
  return self;
}

template <UnaryFn F>
Tensor unary(const Tensor& x) {
  AllocationSite site;
  const Tensor t = x;
  return without_gil_if_large(elements(t), [&] { return F(t); });
}

// dim=None | int | tuple/list of ints.
std::optional<std::vector<std::int64_t>> to_dims(py::handle dim) {
  if (dim.is_none()) return std::nullopt;
  if (PyTuple_Check(dim.ptr()) || PyList_Check(dim.ptr())) {
    std::vector<std::int64_t> d;
    for (py::object h : py::reinterpret_borrow<py::sequence>(dim)) d.push_back(to_int64(h, "dim"));
    return d;
  }
  return std::vector<std::int64_t>{to_int64(dim, "dim")};
}

using FullReduce = Tensor (Tensor::*)(std::optional<DType>) const;
using DimReduce = Tensor (Tensor::*)(const DimList&, bool, std::optional<DType>) const;

template <FullReduce Full, DimReduce Dims>
Tensor reduce(const Tensor& input, py::handle dim, bool keepdim, py::handle dtype) {
  AllocationSite site;
  const auto dt = to_opt_dtype(dtype);
  auto dims = to_dims(dim);
  const Tensor x = input;
  return without_gil_if_large(elements(x), [&] {
    if (!dims) {
      if (keepdim) {
        std::vector<std::int64_t> all(static_cast<std::size_t>(x.dim()));
        for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
        return (x.*Dims)(DimList(all), true, dt);
      }
      return (x.*Full)(dt);
    }
    return (x.*Dims)(DimList(*dims), keepdim, dt);
  });
}

// any / all over everything, or along dim (an int or a tuple), as PyTorch.
template <bool IsAny>
Tensor any_all(const Tensor& input, py::handle dim, bool keepdim) {
  AllocationSite site;
  const Tensor x = input;
  const auto dims = to_dims(dim);
  return without_gil_if_large(elements(x), [&] {
    if (!dims && !keepdim) return IsAny ? x.any() : x.all();
    std::vector<std::int64_t> all_dims(static_cast<std::size_t>(x.dim()));
    for (std::size_t i = 0; i < all_dims.size(); ++i) all_dims[i] = static_cast<std::int64_t>(i);
    const DimList d(dims ? *dims : all_dims);
    return IsAny ? x.any(d, keepdim) : x.all(d, keepdim);
  });
}

Tensor count_nonzero_py(const Tensor& input, py::handle dim) {
  AllocationSite site;
  const Tensor x = input;
  const auto dims = to_dims(dim);
  return without_gil_if_large(elements(x), [&] { return dims ? count_nonzero(x, DimList(*dims)) : count_nonzero(x); });
}

// max/min: max() -> 0-d; max(dim) -> (values, indices); max(tensor) -> maximum.
template <bool IsMax>
py::object extremum(const Tensor& input, py::handle dim, bool keepdim) {
  AllocationSite site;
  const Tensor x = input;
  if (dim.is_none()) {
    // PyTorch has no max(keepdim=) without a dim; ignoring it would hand
    // back a 0-d tensor where dimensions were asked for.
    if (keepdim) {
      throw py::type_error(std::string(IsMax ? "max" : "min") + "(): keepdim=True needs a dim (" +
                           (IsMax ? "amax" : "amin") + "(keepdim=True) reduces every dimension and keeps them)");
    }
    return wrap(without_gil_if_large(elements(x), [&] { return IsMax ? x.max() : x.min(); }));
  }
  if (py::isinstance<Tensor>(dim)) {
    const Tensor o = dim.cast<const Tensor&>();
    return wrap(without_gil_if_large(operation_elements(x, o), [&] { return IsMax ? maximum(x, o) : minimum(x, o); }));
  }
  const std::int64_t d = to_int64(dim, "dim");
  ValuesIndices r =
      without_gil_if_large(elements(x), [&] { return IsMax ? x.max(d, keepdim) : x.min(d, keepdim); });
  return values_indices(std::move(r.values), std::move(r.indices));
}

template <bool IsMax>
Tensor arg_extremum(const Tensor& input, py::handle dim, bool keepdim) {
  AllocationSite site;
  std::optional<std::int64_t> d;
  if (!dim.is_none()) d = to_int64(dim, "dim");
  const Tensor x = input;
  return without_gil_if_large(elements(x), [&] { return IsMax ? x.argmax(d, keepdim) : x.argmin(d, keepdim); });
}

template <bool IsMax>
Tensor amax_amin(const Tensor& input, py::handle dim, bool keepdim) {
  AllocationSite site;
  const Tensor x = input;
  auto dims = to_dims(dim);
  if (!dims) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(x.dim()));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
    dims = all;
  }
  return without_gil_if_large(elements(x), [&] {
    return IsMax ? x.amax(DimList(*dims), keepdim) : x.amin(DimList(*dims), keepdim);
  });
}

RoundingMode rounding_mode_of(py::handle mode) {
  if (mode.is_none()) return RoundingMode::kNone;
  if (PyUnicode_Check(mode.ptr())) {
    const std::string m = mode.cast<std::string>();
    if (m == "trunc") return RoundingMode::kTrunc;
    if (m == "floor") return RoundingMode::kFloor;
  }
  throw py::value_error("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found " +
                        std::string(py::repr(mode)));
}

// div(a, b, *, rounding_mode=None), as torch.div; either operand may be the number.
Tensor div_py(py::handle a, py::handle b, py::handle rounding_mode) {
  const RoundingMode mode = rounding_mode_of(rounding_mode);
  auto x = to_operand(a);
  auto y = to_operand(b);
  if (!x || !y) throw py::type_error("div(): expected tensors or numbers");
  if (x->is_scalar() && y->is_scalar()) x = TensorOrScalar(full({}, x->scalar(), std::nullopt, Device{}));
  AllocationSite site;
  return without_gil_if_large(operation_elements(*x, *y), [&] { return div(*x, *y, mode); });
}

bool equal_py(const Tensor& x, const Tensor& y) {
  const Tensor a = x, b = y;
  return without_gil_if_large(elements(a), [&] { return equal(a, b); });
}

bool allclose_py(const Tensor& x, const Tensor& y, double rtol, double atol) {
  const Tensor a = x, b = y;
  return without_gil_if_large(elements(a), [&] { return allclose(a, b, rtol, atol); });
}

py::object matmul_py(const Tensor& a, py::handle b, py::object out) {
  if (!py::isinstance<Tensor>(b)) {
    if (!is_ndarray(b)) return not_implemented(b);
  }
  const Tensor other = as_tensor(b);
  AllocationSite site;
  // A large product runs without the GIL so other Python threads go on
  // (nothing below touches Python objects; the allocation site is
  // thread-local). Small ones keep it: releasing costs more than they take.
  const double work = static_cast<double>(a.numel()) * static_cast<double>(other.dim() ? other.shape().back() : 1);
  Tensor* out_tensor = out.is_none() ? nullptr : &out.cast<Tensor&>();  // with the GIL
  std::optional<py::gil_scoped_release> nogil;
  if (work >= 1 << 20) nogil.emplace();
  if (out_tensor == nullptr) {
    Tensor r = matmul(a, other);
    nogil.reset();
    return wrap(std::move(r));
  }
  matmul_out(*out_tensor, a, other);
  nogil.reset();
  return out;
}

}  // namespace

void bind_tensor_ops(py::module_& m, TensorClass& cls) {
  // ------------------------------------------------------------ operators ---
  cls.def("__add__", &binary<&add>)
      .def("__radd__", &reflected<&add>)
      .def("__sub__", &binary<&sub>)
      .def("__rsub__", &reflected<&sub>)
      .def("__mul__", &binary<&mul>)
      .def("__rmul__", &reflected<&mul>)
      .def("__truediv__", &binary<&div>)
      .def("__rtruediv__", &reflected<&div>)
      .def("__floordiv__", &binary<&floor_divide>)
      .def("__rfloordiv__", &reflected<&floor_divide>)
      .def("__mod__", &binary<&remainder>)
      .def("__rmod__", &reflected<&remainder>)
      .def("__pow__", &binary<&pow>)
      .def("__rpow__", &reflected<&pow>)
      // Bitwise, as in NumPy and PyTorch (logical on bool tensors; floating
      // tensors: TypeError). logical_and() and friends take any dtype.
      .def("__and__", &binary<&bitwise_and>)
      .def("__rand__", &reflected<&bitwise_and>)
      .def("__or__", &binary<&bitwise_or>)
      .def("__ror__", &reflected<&bitwise_or>)
      .def("__xor__", &binary<&bitwise_xor>)
      .def("__rxor__", &reflected<&bitwise_xor>)
      .def("__lshift__", &binary<&bitwise_left_shift>)
      .def("__rlshift__", &reflected<&bitwise_left_shift>)
      .def("__rshift__", &binary<&bitwise_right_shift>)
      .def("__rrshift__", &reflected<&bitwise_right_shift>)
      .def("__iand__", &inplace_op<kernels::BinaryOp::kBitwiseAnd>)
      .def("__ior__", &inplace_op<kernels::BinaryOp::kBitwiseOr>)
      .def("__ixor__", &inplace_op<kernels::BinaryOp::kBitwiseXor>)
      .def("__ilshift__", &inplace_op<kernels::BinaryOp::kLeftShift>)
      .def("__irshift__", &inplace_op<kernels::BinaryOp::kRightShift>)
      .def("__eq__", &binary<&eq>)
      .def("__ne__", &binary<&ne>)
      .def("__lt__", &binary<&lt>)
      .def("__le__", &binary<&le>)
      .def("__gt__", &binary<&gt>)
      .def("__ge__", &binary<&ge>)
      .def("__matmul__", [](const Tensor& a, py::handle b) { return matmul_py(a, b, py::none()); })
      .def("__rmatmul__",
           [](const Tensor& a, py::handle b) -> py::object {
             if (!is_ndarray(b)) return not_implemented(b);
             AllocationSite site;
             const Tensor lhs = as_tensor(b), rhs = a;
             return wrap(without_gil_if_large(elements(lhs) + elements(rhs), [&] { return matmul(lhs, rhs); }));
           })
      .def("__neg__", &unary<&neg>)
      .def("__pos__", [](const Tensor& t) { return t; })
      .def("__abs__", &unary<&abs>)
      .def("__invert__", &unary<&bitwise_not>)
      .def("__iadd__", &inplace<&Tensor::add_>)
      .def("__isub__", &inplace<&Tensor::sub_>)
      .def("__imul__", &inplace<&Tensor::mul_>)
      .def("__itruediv__", &inplace<&Tensor::div_>)
      // //= and %= in place, as PyTorch does them: without these Python
      // would rebind the name to a new tensor and leave views unchanged.
      .def("__ifloordiv__", &inplace_op<kernels::BinaryOp::kFloorDiv>)
      .def("__imod__", &inplace_op<kernels::BinaryOp::kRemainder>)
      .def("__ipow__", &inplace<&Tensor::pow_>);

  // -------------------------------------------------------------- methods ---
  cls.def("add", &binary_alpha<&add>, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none())
      .def("sub", &binary_alpha<&sub>, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none())
      .def("mul", &binary<&mul>)
      .def("div", &div_py, py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none())
      .def("pow", &binary<&pow>)
      .def("floor_divide", &binary<&floor_divide>)
      .def("remainder", &binary<&remainder>)
      .def("floor_divide_", &inplace_op<kernels::BinaryOp::kFloorDiv>)
      .def("remainder_", &inplace_op<kernels::BinaryOp::kRemainder>)
      .def("fmod", &binary<&fmod>)
      .def("bitwise_and", &binary<&bitwise_and>)
      .def("bitwise_or", &binary<&bitwise_or>)
      .def("bitwise_xor", &binary<&bitwise_xor>)
      .def("bitwise_left_shift", &binary<&bitwise_left_shift>)
      .def("bitwise_right_shift", &binary<&bitwise_right_shift>)
      .def("bitwise_not", &unary<&bitwise_not>)
      .def("eq", &binary<&eq>)
      .def("ne", &binary<&ne>)
      .def("lt", &binary<&lt>)
      .def("le", &binary<&le>)
      .def("gt", &binary<&gt>)
      .def("ge", &binary<&ge>)
      .def("add_", &inplace_alpha<&Tensor::add_>, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none())
      .def("sub_", &inplace_alpha<&Tensor::sub_>, py::arg("other"), py::kw_only(), py::arg("alpha") = py::none())
      .def("mul_", &inplace<&Tensor::mul_>)
      .def("div_", &inplace<&Tensor::div_>)
      .def("pow_", &inplace<&Tensor::pow_>)
      .def("neg_", &inplace_unary<&Tensor::neg_>)
      .def("abs_", &inplace_unary<&Tensor::abs_>)
      .def("exp_", &inplace_unary<&Tensor::exp_>)
      .def("log_", &inplace_unary<&Tensor::log_>)
      .def("sqrt_", &inplace_unary<&Tensor::sqrt_>)
      .def("relu_", &inplace_unary<&Tensor::relu_>)
      .def("neg", &unary<&neg>)
      .def("abs", &unary<&abs>)
      .def("exp", &unary<&exp>)
      .def("log", &unary<&log>)
      .def("sqrt", &unary<&sqrt>)
      .def("relu", &unary<&relu>)
      .def("sigmoid", &unary<&sigmoid>)
      .def("tanh", &unary<&tanh>)
      .def("sin", &unary<&sin>)
      .def("cos", &unary<&cos>)
      .def("logical_not", &unary<&logical_not>)
      .def("matmul", [](const Tensor& a, py::handle b) { return matmul_py(a, b, py::none()); })
      .def("nonzero", &unary<&nonzero>)
      .def("count_nonzero", &count_nonzero_py, py::arg("dim") = py::none())
      .def("any", &any_all<true>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("all", &any_all<false>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("equal", &equal_py)
      .def("allclose", &allclose_py, py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8);

  // ------------------------------------------------------------ reductions ---
  cls.def("sum", &reduce<&Tensor::sum, &Tensor::sum>, py::arg("dim") = py::none(), py::arg("keepdim") = false,
          py::kw_only(), py::arg("dtype") = py::none())
      .def("prod", &reduce<&Tensor::prod, &Tensor::prod>, py::arg("dim") = py::none(), py::arg("keepdim") = false,
           py::kw_only(), py::arg("dtype") = py::none())
      .def("mean", &reduce<&Tensor::mean, &Tensor::mean>, py::arg("dim") = py::none(), py::arg("keepdim") = false,
           py::kw_only(), py::arg("dtype") = py::none())
      .def("max", &extremum<true>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("min", &extremum<false>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("amax", &amax_amin<true>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("amin", &amax_amin<false>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("argmax", &arg_extremum<true>, py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def("argmin", &arg_extremum<false>, py::arg("dim") = py::none(), py::arg("keepdim") = false);

  // ------------------------------------------------------ module functions ---
  m.def("add", &binary_fn_alpha<&add>, py::arg("input"), py::arg("other"), py::kw_only(),
        py::arg("alpha") = py::none());
  m.def("sub", &binary_fn_alpha<&sub>, py::arg("input"), py::arg("other"), py::kw_only(),
        py::arg("alpha") = py::none());
  m.def("mul", &binary_fn<&mul>);
  m.def("div", &div_py, py::arg("input"), py::arg("other"), py::kw_only(), py::arg("rounding_mode") = py::none());
  m.def("fmod", &binary_fn<&fmod>);
  m.def("bitwise_and", &binary_fn<&bitwise_and>);
  m.def("bitwise_or", &binary_fn<&bitwise_or>);
  m.def("bitwise_xor", &binary_fn<&bitwise_xor>);
  m.def("bitwise_left_shift", &binary_fn<&bitwise_left_shift>);
  m.def("bitwise_right_shift", &binary_fn<&bitwise_right_shift>);
  m.def("bitwise_not", &unary<&bitwise_not>);
  m.def("pow", &binary_fn<&pow>);
  m.def("floor_divide", &binary_fn<&floor_divide>);
  m.def("remainder", &binary_fn<&remainder>);
  m.def("eq", &binary_fn<&eq>);
  m.def("ne", &binary_fn<&ne>);
  m.def("lt", &binary_fn<&lt>);
  m.def("le", &binary_fn<&le>);
  m.def("gt", &binary_fn<&gt>);
  m.def("ge", &binary_fn<&ge>);
  m.def("logical_and", &binary_fn<&logical_and>);
  m.def("logical_or", &binary_fn<&logical_or>);
  m.def("maximum", [](const Tensor& x, const Tensor& y) {
    const Tensor a = x, b = y;
    return without_gil_if_large(operation_elements(a, b), [&] { return maximum(a, b); });
  });
  m.def("minimum", [](const Tensor& x, const Tensor& y) {
    const Tensor a = x, b = y;
    return without_gil_if_large(operation_elements(a, b), [&] { return minimum(a, b); });
  });
  m.def("neg", &unary<&neg>);
  m.def("abs", &unary<&abs>);
  m.def("exp", &unary<&exp>);
  m.def("log", &unary<&log>);
  m.def("sqrt", &unary<&sqrt>);
  m.def("relu", &unary<&relu>);
  m.def("sigmoid", &unary<&sigmoid>);
  m.def("tanh", &unary<&tanh>);
  m.def("sin", &unary<&sin>);
  m.def("cos", &unary<&cos>);
  m.def("logical_not", &unary<&logical_not>);
  m.def("nonzero", &unary<&nonzero>);
  m.def("count_nonzero", &count_nonzero_py, py::arg("input"), py::arg("dim") = py::none());
  m.def(
      "where",
      [](const Tensor& cond, py::handle a, py::handle b) {
        auto x = to_operand(a);
        auto y = to_operand(b);
        if (!x || !y) throw py::type_error("where(cond, a, b): a and b must be tensors or numbers");
        AllocationSite site;
        const Tensor c = cond;
        return without_gil_if_large(elements(c), [&] { return where(c, *x, *y); });
      },
      py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def(
      "matmul", [](const Tensor& a, py::handle b, py::object out) { return matmul_py(a, b, std::move(out)); },
      py::arg("input"), py::arg("other"), py::kw_only(), py::arg("out") = py::none());
  m.def("sum", &reduce<&Tensor::sum, &Tensor::sum>, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  m.def("prod", &reduce<&Tensor::prod, &Tensor::prod>, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  m.def("mean", &reduce<&Tensor::mean, &Tensor::mean>, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  m.def("max", &extremum<true>, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("min", &extremum<false>, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("argmax", &arg_extremum<true>, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("argmin", &arg_extremum<false>, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def("equal", &equal_py);
  m.def("allclose", &allclose_py, py::arg("input"), py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8);
}

}  // namespace genesis::python
