// Element-wise operations, reductions and matmul as free functions.
//
// Element-wise operations broadcast their operands (NumPy rule) and compute
// in the promoted dtype (Note [Type promotion] in tensor/promotion.h). A
// `_out` form writes into `out`, which must have the broadcast shape
// (InvalidArgumentError otherwise: Genesis never silently reallocates an
// out= buffer) and a dtype that can hold the result (can_cast, else
// TypeMismatchError). It allocates nothing when out's dtype is the result
// dtype; otherwise the result goes through one temporary and is cast into
// out. Inputs that partially overlap out are copied first. Every function
// throws InvalidArgumentError for operands on different devices or shapes
// that do not broadcast, TypeMismatchError for a dtype the operation does
// not accept.
#pragma once

#include "genesis/tensor/backend.h"
#include "genesis/tensor/tensor.h"

namespace genesis {

Tensor add(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor sub(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor mul(const TensorOrScalar& a, const TensorOrScalar& b);
/// True division: integer operands give float32.
Tensor div(const TensorOrScalar& a, const TensorOrScalar& b);
/// Python's // and % (floor division; the remainder takes the divisor's sign).
/// Integer division by zero, here and in fmod and div with a rounding mode:
/// DivisionByZeroError for a zero scalar divisor on any device and for a
/// zero element of a CPU divisor; a zero element of a CUDA divisor gives 0
/// in that place (finding it would synchronise the stream: Note [Integer
/// division by zero] in src/tensor/elementwise.cpp). Floating division by
/// zero follows IEEE (inf, nan).
Tensor floor_divide(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor remainder(const TensorOrScalar& a, const TensorOrScalar& b);
/// C's fmod: the remainder takes the dividend's sign (integers: C's %).
Tensor fmod(const TensorOrScalar& a, const TensorOrScalar& b);
/// torch.div's rounding_mode: kNone is true division (div above), kTrunc
/// rounds the quotient toward zero, kFloor down (floor_divide). kTrunc and
/// kFloor keep integer dtypes.
enum class RoundingMode : std::uint8_t { kNone, kTrunc, kFloor };
Tensor div(const TensorOrScalar& a, const TensorOrScalar& b, RoundingMode mode);
/// Integer tensors to a negative integer Scalar power: InvalidArgumentError
/// (as PyTorch).
Tensor pow(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor ne(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor lt(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor le(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor gt(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor ge(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor logical_and(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor logical_or(const TensorOrScalar& a, const TensorOrScalar& b);
/// Bitwise and, or, xor: integer and bool tensors (bool: logical), in the
/// promoted dtype; floating operands: TypeMismatchError ("bitwise_and is
/// only defined for integer and bool tensors, got float32"), as NumPy and
/// PyTorch refuse them.
Tensor bitwise_and(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor bitwise_or(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor bitwise_xor(const TensorOrScalar& a, const TensorOrScalar& b);
/// Shifts of integer tensors (bool and floating: TypeMismatchError), with
/// NumPy's results when the count is negative or at least the bit width:
/// every bit shifted out (0, or -1 for a negative value shifted right).
Tensor bitwise_left_shift(const TensorOrScalar& a, const TensorOrScalar& b);
Tensor bitwise_right_shift(const TensorOrScalar& a, const TensorOrScalar& b);

/// out= for any element-wise operation (the bindings' single entry point);
/// the named _out functions below are shorthands.
Tensor& binary_out(kernels::BinaryOp op, Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);
Tensor& unary_out(kernels::UnaryOp op, Tensor& out, const Tensor& x);

Tensor& add_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);
Tensor& sub_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);
Tensor& mul_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);
Tensor& div_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);
Tensor& pow_out(Tensor& out, const TensorOrScalar& a, const TensorOrScalar& b);

/// Integer and bool inputs of exp, log, sqrt, sigmoid, tanh, sin, cos give
/// float32 (PyTorch). neg and abs of bool: TypeMismatchError.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor logical_not(const Tensor& x);
/// ~x of integers, logical not of bool; floating: TypeMismatchError.
Tensor bitwise_not(const Tensor& x);
Tensor& exp_out(Tensor& out, const Tensor& x);

/// cond ? a : b, broadcasting all three; cond must be bool; the dtype is
/// result_type(a, b).
Tensor where(const Tensor& cond, const TensorOrScalar& a, const TensorOrScalar& b);

Tensor operator+(const Tensor& a, const TensorOrScalar& b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const TensorOrScalar& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const TensorOrScalar& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const TensorOrScalar& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const TensorOrScalar& b);
Tensor operator!=(const Tensor& a, const TensorOrScalar& b);
Tensor operator<(const Tensor& a, const TensorOrScalar& b);
Tensor operator<=(const Tensor& a, const TensorOrScalar& b);
Tensor operator>(const Tensor& a, const TensorOrScalar& b);
Tensor operator>=(const Tensor& a, const TensorOrScalar& b);
// Bitwise, as in PyTorch and NumPy (logical on bool tensors).
Tensor operator&(const Tensor& a, const TensorOrScalar& b);
Tensor operator|(const Tensor& a, const TensorOrScalar& b);
Tensor operator^(const Tensor& a, const TensorOrScalar& b);
Tensor operator~(const Tensor& a);
Tensor operator<<(const Tensor& a, const TensorOrScalar& b);
Tensor operator>>(const Tensor& a, const TensorOrScalar& b);

/// torch.matmul: 1-d x 1-d is a dot product (0-d), 2-d x 2-d a matrix
/// product, 1-d operands get a dimension prepended/appended and removed
/// again, and leading batch dimensions broadcast. Both operands must have
/// the same dtype (TypeMismatchError otherwise, as PyTorch); bool is
/// rejected. CPU: OpenBLAS sgemm/dgemm (float16/bfloat16 via float32),
/// integers with a plain loop. Throws InvalidArgumentError naming both
/// shapes when the inner dimensions differ.
Tensor matmul(const Tensor& a, const Tensor& b);
/// matmul into `out`: no allocation when out is contiguous with the result's
/// shape and dtype (TypeMismatchError for another dtype; InvalidArgumentError
/// for another shape).
Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA float32 matmul may use TF32 (off by default, like PyTorch's
/// torch.backends.cuda.matmul.allow_tf32).
void set_allow_tf32(bool allow) noexcept;
bool allow_tf32() noexcept;

/// Number of true (nonzero) elements, as int64 0-d tensor.
Tensor count_nonzero(const Tensor& x);
/// The counts along `dims` (int64, the dims removed).
Tensor count_nonzero(const Tensor& x, const DimList& dims);
/// Coordinates of the nonzero elements: int64 [count, ndim] (synchronises a
/// CUDA stream: the size depends on the data).
Tensor nonzero(const Tensor& x);

/// Element-wise equality of shapes and values (NaN != NaN), on the host.
bool equal(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol * |b| everywhere (NaN never close), shapes equal.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

}  // namespace genesis
