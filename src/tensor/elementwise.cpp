// Element-wise operations: promotion, broadcasting, in-place and out= forms
// (tensor/ops.h). The kernels see operands of one compute dtype (Note
// [Kernel contracts]); this file inserts the casts.
#include <cmath>
#include <type_traits>

#include "genesis/core/cast.h"
#include "genesis/core/dtype_dispatch.h"
#include "genesis/core/error.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/ops.h"
#include "genesis/tensor/promotion.h"
#include "tensor_internal.h"

namespace genesis {

using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

// An input prepared for a kernel: a tensor cast to the compute dtype, or a
// scalar constant.
struct Input {
  Tensor tensor;
  Scalar scalar;
  bool is_scalar = false;
  kernels::StridedOperand operand(DType dtype, const Shape& shape) const {
    return is_scalar ? detail::scalar_operand(scalar, dtype, shape) : detail::operand(tensor, shape);
  }
};

Input prepare(const TensorOrScalar& x, DType compute, const Tensor* out) {
  Input in;
  if (x.is_scalar()) {
    in.is_scalar = true;
    in.scalar = x.scalar();
    return in;
  }
  in.tensor = x.tensor().dtype() == compute ? x.tensor() : x.tensor().to(compute);
  // Partial overlap with the output would read already-written elements.
  if (out && detail::may_overlap(*out, in.tensor) && !detail::same_elements(*out, in.tensor)) {
    in.tensor = in.tensor.clone();
  }
  return in;
}

// Resolves the destination of an operation with result dtype `dt` and
// broadcast shape `shape`: a new tensor, or `out` (checked) directly when
// its dtype matches, or a temporary that is copied into `out` afterwards.
struct Destination {
  Tensor target;    // what the kernel writes
  Tensor* final_out = nullptr;
};

Destination destination(Tensor* out, DType dt, const Shape& shape, Device device, const char* name) {
  Destination d;
  if (out == nullptr) {
    d.target = empty(shape, TensorOptions(dt, device));
    return d;
  }
  detail::check_defined(*out, name);
  detail::check_writable(*out, name);  // in-place forms and out= arguments
  GENESIS_CHECK(out->shape() == shape, name, ": output with shape ", detail::shape_str(out->shape()),
                " doesn't match the broadcast shape ", detail::shape_str(shape));
  GENESIS_CHECK(out->device() == device, name, ": the output is on ", out->device(), " but the operands on ", device);
  GENESIS_CHECK_TYPE(can_cast(dt, out->dtype()), name, ": result type ", dt, " can't be cast to the desired output type ",
                     out->dtype());
  detail::check_no_internal_overlap(*out, name);
  d.final_out = out;
  d.target = out->dtype() == dt ? *out : empty(shape, TensorOptions(dt, device));
  return d;
}

void finish(Destination& d) {
  if (d.final_out && !d.target.is_same(*d.final_out)) d.final_out->copy_(d.target);
}

Device common_device(const TensorOrScalar& a, const TensorOrScalar& b, const char* name) {
  GENESIS_CHECK(!a.is_scalar() || !b.is_scalar(), name, ": at least one operand must be a tensor");
  if (!a.is_scalar()) detail::check_defined(a.tensor(), name);
  if (!b.is_scalar()) detail::check_defined(b.tensor(), name);
  if (a.is_scalar()) return b.tensor().device();
  if (b.is_scalar()) return a.tensor().device();
  GENESIS_CHECK(a.tensor().device() == b.tensor().device(), name,
                ": expected all tensors to be on the same device, but found ", a.tensor().device(), " and ",
                b.tensor().device());
  return a.tensor().device();
}

Shape shape_of(const TensorOrScalar& x) { return x.is_scalar() ? Shape{} : x.tensor().shape(); }

bool is_integer_division(BinaryOp op) {
  return op == BinaryOp::kFloorDiv || op == BinaryOp::kRemainder || op == BinaryOp::kTruncDiv ||
         op == BinaryOp::kFmod;
}

// Note [Integer division by zero]: an integer quotient or remainder by zero
// has no value. Kernels used to write 0 there, a wrong result nobody
// noticed, where NumPy warns and PyTorch raises. So the divisor is checked
// before the kernel runs, once converted to the compute dtype (uint8 // 256
// divides by 0): a scalar on every device, a tensor on the CPU, where one
// read pass (count_nonzero, threaded) costs little next to the division.
// On CUDA, finding a zero would wait for the stream (PyTorch does not check
// there either): a zero element of a divisor tensor gives 0 in that place.
// Checking before any write also leaves in-place and out= targets intact.
void check_divisor(const Input& b, DType compute, Device device, const char* name) {
  bool zero = false;
  if (b.is_scalar) {
    zero = kernels::dispatch(compute, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T>) return kernels::scalar_to<T>(b.scalar) == T(0);
      else return false;  // floating: IEEE, never checked
    });
  } else if (device.is_cpu()) {
    zero = count_nonzero(b.tensor).item().to_int64() != b.tensor.numel();
  }
  if (zero) {
    GENESIS_THROW(DivisionByZeroError, name, ": integer division by zero (the divisor ",
                  b.is_scalar ? "is 0" : "has a 0", " in ", dtype_name(compute),
                  "); divide floating-point tensors for inf and nan instead");
  }
}

// An operand for messages: "int32" for a tensor, "a float" for a scalar.
std::string operand_text(const TensorOrScalar& v) {
  if (!v.is_scalar()) return std::string(dtype_name(v.tensor().dtype()));
  return v.scalar().is_floating() ? "a float" : v.scalar().is_bool() ? "a bool" : "an int";
}

// "int32 and a float (float32 together)": which operand made the dtype.
std::string operands_text(const TensorOrScalar& a, const TensorOrScalar& b, DType together) {
  return operand_text(a) + " and " + operand_text(b) + " (" + std::string(dtype_name(together)) + " together)";
}

// Whether a floating scalar keeps its value in `t` (float16 or bfloat16).
bool scalar_exact_in(DType t, const Scalar& s) {
  if (!s.is_floating()) return true;
  const double v = s.to_double();
  return kernels::dispatch(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = kernels::scalar_to<T>(s);
    if constexpr (std::is_arithmetic_v<T>) return static_cast<double>(x) == v;
    else return static_cast<double>(static_cast<float>(x)) == v;  // Half, BFloat16
  });
}

// Note [Reduced-precision scalars]: PyTorch multiplies and divides a
// float16 or bfloat16 tensor by a Python float in float32 (its "opmath"
// type), the scalar never rounded to the tensor's dtype: h * 1e-5 is
// 3.0e-05 for h = 3, and h / 1e5 is not 3 / inf = 0. Converting the scalar
// to the tensor's dtype first, as the kernels take it, gives 0, inf or a
// different last bit whenever the scalar has no exact value there (1e5, 1e-8,
// 0.1). Such a scalar therefore goes through float32: the tensor widened
// (exact), the operation, one rounding back. A scalar the dtype holds
// exactly (2.0, 0.5) needs none of it: the kernels compute in float and
// round once, which is the same result.
bool needs_float32_scalar(BinaryOp op, DType compute, const TensorOrScalar& a, const TensorOrScalar& b) {
  if (op != BinaryOp::kMul && op != BinaryOp::kDiv) return false;
  if (compute != DType::kFloat16 && compute != DType::kBFloat16) return false;
  if (a.is_scalar() == b.is_scalar()) return false;
  return !scalar_exact_in(compute, a.is_scalar() ? a.scalar() : b.scalar());
}

Tensor binary_impl(BinaryOp op, const TensorOrScalar& a, const TensorOrScalar& b, Tensor* out) {
  const char* name = kernels::op_name(op);
  const Device device = common_device(a, b, name);
  DType compute = result_type(a, b);
  // Into a new tensor or in place (out is a itself); other out= targets take
  // the plain path, whose checks they need.
  if (needs_float32_scalar(op, compute, a, b) &&
      (out == nullptr || (!a.is_scalar() && out->is_same(a.tensor()) && out->dtype() == compute))) {
    auto widen = [](const TensorOrScalar& v) {
      return v.is_scalar() ? v : TensorOrScalar(v.tensor().to(DType::kFloat32));
    };
    const Tensor wide = binary_impl(op, widen(a), widen(b), nullptr);
    if (out == nullptr) return wide.to(compute);
    out->copy_(wide);
    return *out;
  }
  const bool produces_bool = kernels::is_comparison(op);
  switch (op) {
    case BinaryOp::kDiv:
      if (!is_floating(compute)) compute = DType::kFloat32;
      break;
    case BinaryOp::kSub:
      GENESIS_CHECK_TYPE(compute != DType::kBool, "Subtraction, the `-` operator, with two bool tensors is not supported. "
                         "Use the `^` or `logical_xor()` operator instead.");
      break;
    case BinaryOp::kFloorDiv:
    case BinaryOp::kRemainder:
    case BinaryOp::kTruncDiv:
    case BinaryOp::kFmod:
    case BinaryOp::kPow:
      GENESIS_CHECK_TYPE(compute != DType::kBool, name, ": bool operands are not supported");
      break;
    case BinaryOp::kBitwiseAnd:
    case BinaryOp::kBitwiseOr:
    case BinaryOp::kBitwiseXor:
      GENESIS_CHECK_TYPE(!is_floating(compute), name, " is only defined for integer and bool operands, got ",
                         operands_text(a, b, compute));
      break;
    case BinaryOp::kLeftShift:
    case BinaryOp::kRightShift:
      GENESIS_CHECK_TYPE(!is_floating(compute) && compute != DType::kBool, name,
                         " is only defined for integer operands, got ", operands_text(a, b, compute));
      break;
    default: break;
  }
  if (op == BinaryOp::kPow && !is_floating(compute) && b.is_scalar()) {
    GENESIS_CHECK(b.scalar().is_floating() || b.scalar().to_int64() >= 0,
                  "Integers to negative integer powers are not allowed.");
  }
  const Shape shape = broadcast_shapes(shape_of(a), shape_of(b));
  const DType result = produces_bool ? DType::kBool : compute;
  Destination dst = destination(out, result, shape, device, name);
  const Input ia = prepare(a, compute, &dst.target), ib = prepare(b, compute, &dst.target);
  if (detail::shape_numel(shape) > 0) {
    if (is_integer_division(op) && !is_floating(compute)) check_divisor(ib, compute, device, name);
    auto fn = detail::kernel_entry(device, &kernels::KernelTable::binary, name);
    fn(detail::kernel_ctx(device), op, detail::operand(dst.target), ia.operand(compute, shape), ib.operand(compute, shape));
  }
  finish(dst);
  return dst.final_out ? *dst.final_out : dst.target;
}

Tensor& inplace_binary(BinaryOp op, Tensor& self, const TensorOrScalar& other) {
  detail::check_defined(self, kernels::op_name(op));
  binary_impl(op, self, other, &self);
  return self;
}

bool float_only(UnaryOp op) {
  switch (op) {
    case UnaryOp::kExp: case UnaryOp::kLog: case UnaryOp::kSqrt: case UnaryOp::kSigmoid:
    case UnaryOp::kTanh: case UnaryOp::kSin: case UnaryOp::kCos: return true;
    default: return false;
  }
}

Tensor unary_impl(UnaryOp op, const Tensor& x, Tensor* out) {
  const char* name = kernels::op_name(op);
  detail::check_defined(x, name);
  DType compute = x.dtype();
  if (float_only(op) && !is_floating(compute)) compute = DType::kFloat32;
  if (op == UnaryOp::kNeg) {
    GENESIS_CHECK_TYPE(compute != DType::kBool, "Negation, the `-` operator, on a bool tensor is not supported. "
                       "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  }
  if (op == UnaryOp::kAbs || op == UnaryOp::kRelu) {
    GENESIS_CHECK_TYPE(compute != DType::kBool, name, ": bool tensors are not supported");
  }
  if (op == UnaryOp::kBitwiseNot) {
    GENESIS_CHECK_TYPE(!is_floating(compute), name, " is only defined for integer and bool tensors, got ",
                       dtype_name(compute));
  }
  const DType result = op == UnaryOp::kLogicalNot ? DType::kBool : compute;
  Destination dst = destination(out, result, x.shape(), x.device(), name);
  const Input in = prepare(x, compute, &dst.target);
  if (x.numel() > 0) {
    auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::unary, name);
    fn(detail::kernel_ctx(x.device()), op, detail::operand(dst.target), in.operand(compute, x.shape()));
  }
  finish(dst);
  return dst.final_out ? *dst.final_out : dst.target;
}

Tensor& inplace_unary(UnaryOp op, Tensor& self) {
  detail::check_defined(self, kernels::op_name(op));
  unary_impl(op, self, &self);
  return self;
}

}  // namespace

// ------------------------------------------------------------ binary ---
Tensor add(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kAdd, a, b, nullptr); }
Tensor sub(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kSub, a, b, nullptr); }
Tensor mul(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kMul, a, b, nullptr); }
Tensor div(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kDiv, a, b, nullptr); }
Tensor floor_divide(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kFloorDiv, a, b, nullptr);
}
Tensor remainder(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kRemainder, a, b, nullptr);
}
Tensor pow(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kPow, a, b, nullptr); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_impl(BinaryOp::kMaximum, a, b, nullptr); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_impl(BinaryOp::kMinimum, a, b, nullptr); }
Tensor eq(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kEq, a, b, nullptr); }
Tensor ne(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kNe, a, b, nullptr); }
Tensor lt(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kLt, a, b, nullptr); }
Tensor le(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kLe, a, b, nullptr); }
Tensor gt(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kGt, a, b, nullptr); }
Tensor ge(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kGe, a, b, nullptr); }
Tensor logical_and(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kLogicalAnd, a, b, nullptr);
}
Tensor logical_or(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kLogicalOr, a, b, nullptr);
}
Tensor fmod(const TensorOrScalar& a, const TensorOrScalar& b) { return binary_impl(BinaryOp::kFmod, a, b, nullptr); }
Tensor div(const TensorOrScalar& a, const TensorOrScalar& b, RoundingMode mode) {
  switch (mode) {
    case RoundingMode::kTrunc: return binary_impl(BinaryOp::kTruncDiv, a, b, nullptr);
    case RoundingMode::kFloor: return binary_impl(BinaryOp::kFloorDiv, a, b, nullptr);
    case RoundingMode::kNone: break;
  }
  return binary_impl(BinaryOp::kDiv, a, b, nullptr);
}
Tensor bitwise_and(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kBitwiseAnd, a, b, nullptr);
}
Tensor bitwise_or(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kBitwiseOr, a, b, nullptr);
}
Tensor bitwise_xor(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kBitwiseXor, a, b, nullptr);
}
Tensor bitwise_left_shift(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kLeftShift, a, b, nullptr);
}
Tensor bitwise_right_shift(const TensorOrScalar& a, const TensorOrScalar& b) {
  return binary_impl(BinaryOp::kRightShift, a, b, nullptr);
}

Tensor& binary_out(BinaryOp op, Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(op, a, b, &out);
  return out;
}

Tensor& unary_out(UnaryOp op, Tensor& out, const Tensor& x) {
  unary_impl(op, x, &out);
  return out;
}

Tensor& add_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(BinaryOp::kAdd, a, b, &out);
  return out;
}
Tensor& sub_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(BinaryOp::kSub, a, b, &out);
  return out;
}
Tensor& mul_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(BinaryOp::kMul, a, b, &out);
  return out;
}
Tensor& div_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(BinaryOp::kDiv, a, b, &out);
  return out;
}
Tensor& pow_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b) {
  binary_impl(BinaryOp::kPow, a, b, &out);
  return out;
}

// ------------------------------------------------------------- unary ---
Tensor neg(const Tensor& x) { return unary_impl(UnaryOp::kNeg, x, nullptr); }
Tensor abs(const Tensor& x) { return unary_impl(UnaryOp::kAbs, x, nullptr); }
Tensor exp(const Tensor& x) { return unary_impl(UnaryOp::kExp, x, nullptr); }
Tensor log(const Tensor& x) { return unary_impl(UnaryOp::kLog, x, nullptr); }
Tensor sqrt(const Tensor& x) { return unary_impl(UnaryOp::kSqrt, x, nullptr); }
Tensor relu(const Tensor& x) { return unary_impl(UnaryOp::kRelu, x, nullptr); }
Tensor sigmoid(const Tensor& x) { return unary_impl(UnaryOp::kSigmoid, x, nullptr); }
Tensor tanh(const Tensor& x) { return unary_impl(UnaryOp::kTanh, x, nullptr); }
Tensor sin(const Tensor& x) { return unary_impl(UnaryOp::kSin, x, nullptr); }
Tensor cos(const Tensor& x) { return unary_impl(UnaryOp::kCos, x, nullptr); }
Tensor logical_not(const Tensor& x) { return unary_impl(UnaryOp::kLogicalNot, x, nullptr); }
Tensor bitwise_not(const Tensor& x) { return unary_impl(UnaryOp::kBitwiseNot, x, nullptr); }
Tensor& exp_out(Tensor& out, const Tensor& x) {
  unary_impl(UnaryOp::kExp, x, &out);
  return out;
}

// ------------------------------------------------------------- where ---
Tensor where(const Tensor& cond, const TensorOrScalar& a, const TensorOrScalar& b) {
  detail::check_defined(cond, "where");
  GENESIS_CHECK_TYPE(cond.dtype() == DType::kBool, "where expected condition to be a boolean tensor, but got a tensor with dtype ",
                     cond.dtype());
  const Device device = cond.device();
  for (const auto* x : {&a, &b}) {
    if (!x->is_scalar()) {
      detail::check_defined(x->tensor(), "where");
      GENESIS_CHECK(x->tensor().device() == device, "where: expected all tensors on ", device, ", found one on ",
                    x->tensor().device());
    }
  }
  const DType dt = result_type(a, b);
  // A scalar is stored in the result: one that an integer dtype cannot hold
  // is refused, as full() and fill_() refuse it, not wrapped (300 in uint8
  // is not 44).
  for (const auto* x : {&a, &b}) {
    if (x->is_scalar()) check_fits(x->scalar(), dt);
  }
  const Shape shape = broadcast_shapes(cond.shape(), broadcast_shapes(shape_of(a), shape_of(b)));
  Tensor out = empty(shape, TensorOptions(dt, device));
  const Input ia = prepare(a, dt, nullptr), ib = prepare(b, dt, nullptr);
  if (out.numel() > 0) {
    auto fn = detail::kernel_entry(device, &kernels::KernelTable::where, "where");
    fn(detail::kernel_ctx(device), detail::operand(out), detail::operand(cond, shape), ia.operand(dt, shape),
       ib.operand(dt, shape));
  }
  return out;
}

// ---------------------------------------------------------- operators ---
Tensor operator+(const Tensor& a, const TensorOrScalar& b) { return add(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const TensorOrScalar& b) { return sub(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const TensorOrScalar& b) { return mul(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const TensorOrScalar& b) { return div(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator==(const Tensor& a, const TensorOrScalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const TensorOrScalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const TensorOrScalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const TensorOrScalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const TensorOrScalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const TensorOrScalar& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const TensorOrScalar& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const TensorOrScalar& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const TensorOrScalar& b) { return bitwise_xor(a, b); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }
Tensor operator<<(const Tensor& a, const TensorOrScalar& b) { return bitwise_left_shift(a, b); }
Tensor operator>>(const Tensor& a, const TensorOrScalar& b) { return bitwise_right_shift(a, b); }

// ------------------------------------------------------------ methods ---
Tensor Tensor::add(const TensorOrScalar& o) const { return genesis::add(*this, o); }
Tensor Tensor::sub(const TensorOrScalar& o) const { return genesis::sub(*this, o); }
Tensor Tensor::mul(const TensorOrScalar& o) const { return genesis::mul(*this, o); }
Tensor Tensor::div(const TensorOrScalar& o) const { return genesis::div(*this, o); }
Tensor Tensor::pow(const TensorOrScalar& e) const { return genesis::pow(*this, e); }
Tensor Tensor::eq(const TensorOrScalar& o) const { return genesis::eq(*this, o); }
Tensor Tensor::ne(const TensorOrScalar& o) const { return genesis::ne(*this, o); }
Tensor Tensor::lt(const TensorOrScalar& o) const { return genesis::lt(*this, o); }
Tensor Tensor::le(const TensorOrScalar& o) const { return genesis::le(*this, o); }
Tensor Tensor::gt(const TensorOrScalar& o) const { return genesis::gt(*this, o); }
Tensor Tensor::ge(const TensorOrScalar& o) const { return genesis::ge(*this, o); }
Tensor Tensor::neg() const { return genesis::neg(*this); }
Tensor Tensor::abs() const { return genesis::abs(*this); }
Tensor Tensor::exp() const { return genesis::exp(*this); }
Tensor Tensor::log() const { return genesis::log(*this); }
Tensor Tensor::sqrt() const { return genesis::sqrt(*this); }
Tensor Tensor::relu() const { return genesis::relu(*this); }
Tensor Tensor::sigmoid() const { return genesis::sigmoid(*this); }
Tensor Tensor::tanh() const { return genesis::tanh(*this); }

Tensor& Tensor::add_(const TensorOrScalar& o) { return inplace_binary(BinaryOp::kAdd, *this, o); }
Tensor& Tensor::sub_(const TensorOrScalar& o) { return inplace_binary(BinaryOp::kSub, *this, o); }
Tensor& Tensor::mul_(const TensorOrScalar& o) { return inplace_binary(BinaryOp::kMul, *this, o); }
Tensor& Tensor::div_(const TensorOrScalar& o) { return inplace_binary(BinaryOp::kDiv, *this, o); }
Tensor& Tensor::pow_(const TensorOrScalar& e) { return inplace_binary(BinaryOp::kPow, *this, e); }
Tensor& Tensor::neg_() { return inplace_unary(UnaryOp::kNeg, *this); }
Tensor& Tensor::abs_() { return inplace_unary(UnaryOp::kAbs, *this); }
Tensor& Tensor::exp_() { return inplace_unary(UnaryOp::kExp, *this); }
Tensor& Tensor::log_() { return inplace_unary(UnaryOp::kLog, *this); }
Tensor& Tensor::sqrt_() { return inplace_unary(UnaryOp::kSqrt, *this); }
Tensor& Tensor::relu_() { return inplace_unary(UnaryOp::kRelu, *this); }
Tensor& Tensor::operator+=(const TensorOrScalar& o) { return add_(o); }
Tensor& Tensor::operator-=(const TensorOrScalar& o) { return sub_(o); }
Tensor& Tensor::operator*=(const TensorOrScalar& o) { return mul_(o); }
Tensor& Tensor::operator/=(const TensorOrScalar& o) { return div_(o); }

}  // namespace genesis
