// Tensor creation (tensor/creation.h).
#include "genesis/tensor/creation.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/storage_view.h"
#include "random_state.h"
#include "tensor_internal.h"

namespace genesis {

Tensor empty(const Shape& shape, TensorOptions options) {
  const std::int64_t n = detail::shape_numel(shape);
  GENESIS_CHECK(shape.size() <= static_cast<std::size_t>(kernels::kMaxDims), "at most ", kernels::kMaxDims,
                " dimensions are supported, got ", shape.size());
  // Checked here, on the shape asked for: the storage below is one flat
  // dimension, and its error would name that instead.
  (void)checked_nbytes(shape, dtype_size(options.dtype));
  Storage s = Storage::empty({n}, options.dtype, options.device);
  return Tensor(std::move(s), shape, contiguous_strides(shape), 0);
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, Scalar(0), options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, Scalar(1), options); }

Tensor full(const Shape& shape, Scalar value, TensorOptions options) {
  Tensor t = empty(shape, options);
  t.fill_(value);
  return t;
}

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype, Device device) {
  return full(shape, value, TensorOptions(dtype.value_or(value.default_dtype()), device));
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.shape(), value, TensorOptions(t.dtype(), t.device())); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), TensorOptions(t.dtype(), t.device())); }

Tensor arange(Scalar end, std::optional<DType> dtype, Device device) {
  return arange(Scalar(0), end, Scalar(1), dtype, device);
}

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  const bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dt = dtype.value_or(all_int ? DType::kInt64 : DType::kFloat32);
  GENESIS_CHECK(dt != DType::kBool, "arange: bool is not a valid dtype for arange");
  std::int64_t n = 0;
  if (all_int) {
    const std::int64_t a = start.to_int64(), b = end.to_int64(), s = step.to_int64();
    GENESIS_CHECK(s != 0, "arange: step must be nonzero");
    GENESIS_CHECK((s > 0 && b >= a) || (s < 0 && b <= a), "arange: upper bound and larger bound inconsistent with step sign (start ",
                  a, ", end ", b, ", step ", s, ")");
    // In 128 bits: b - a alone may not fit in int64 (arange(-2**63, 2**63-1)).
    const __int128 span = s > 0 ? static_cast<__int128>(b) - a : static_cast<__int128>(a) - b;
    const __int128 step = s > 0 ? static_cast<__int128>(s) : -static_cast<__int128>(s);
    const __int128 count = (span + step - 1) / step;
    GENESIS_CHECK(count <= INT64_MAX, "arange: the range from ", a, " to ", b, " in steps of ", s,
                  " has more than 2^63-1 elements");
    n = static_cast<std::int64_t>(count);
  } else {
    const double a = start.to_double(), b = end.to_double(), s = step.to_double();
    GENESIS_CHECK(s != 0.0, "arange: step must be nonzero");
    GENESIS_CHECK(std::isfinite(a) && std::isfinite(b), "arange: unsupported range: ", a, " -> ", b);
    GENESIS_CHECK((s > 0 && b >= a) || (s < 0 && b <= a), "arange: upper bound and larger bound inconsistent with step sign (start ",
                  a, ", end ", b, ", step ", s, ")");
    const double count = std::ceil((b - a) / s);
    // 2^63 exactly is the first double beyond int64 (converting it is undefined).
    GENESIS_CHECK(count < 9223372036854775808.0, "arange: the range from ", a, " to ", b, " in steps of ", s,
                  " has more than 2^63-1 elements");
    n = static_cast<std::int64_t>(count);
  }
  Tensor t = empty({n}, TensorOptions(dt, device));
  if (n == 0) return t;
  auto fn = detail::kernel_entry(device, &kernels::KernelTable::iota, "arange");
  fn(detail::kernel_ctx(device), detail::operand(t), start, step);
  return t;
}

namespace {
Tensor random_tensor(const Shape& shape, TensorOptions options, kernels::RandomParams p, const char* name) {
  Tensor t = empty(shape, options);
  const std::int64_t n = t.numel();
  if (n == 0) return t;
  auto fn = detail::kernel_entry(options.device, &kernels::KernelTable::random, name);
  detail::reserve_random(options.device, static_cast<std::uint64_t>(n), p.seed, p.offset);
  fn(detail::kernel_ctx(options.device), detail::operand(t), p);
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions options) {
  GENESIS_CHECK_TYPE(is_floating(options.dtype), "rand: expected a floating dtype, got ", options.dtype);
  kernels::RandomParams p;
  p.kind = kernels::RandomKind::kUniform;
  return random_tensor(shape, options, p, "rand");
}

Tensor randn(const Shape& shape, TensorOptions options) {
  GENESIS_CHECK_TYPE(is_floating(options.dtype), "randn: expected a floating dtype, got ", options.dtype);
  kernels::RandomParams p;
  p.kind = kernels::RandomKind::kNormal;
  p.low = 0.0;
  p.high = 1.0;
  return random_tensor(shape, options, p, "randn");
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, TensorOptions options) {
  GENESIS_CHECK(low < high, "randint: expected low < high, got low ", low, " and high ", high);
  GENESIS_CHECK_TYPE(options.dtype != DType::kBool, "randint: bool is not supported");
  // Every value in [low, high) must be representable in the dtype, or the
  // numbers drawn would wrap (integers) or round (floats beyond 2^digits).
  const auto [lowest, highest] = detail::exact_integer_range(options.dtype);
  GENESIS_CHECK(low >= lowest, "randint: low ", low, " is out of range for ", dtype_name(options.dtype),
                " (at least ", lowest, ")");
  // high is exclusive: at most highest + 1 (int64 cannot fail this check).
  GENESIS_CHECK(high - 1 <= highest, "randint: high ", high, " is out of range for ", dtype_name(options.dtype),
                " (at most ", highest + (highest < std::numeric_limits<std::int64_t>::max() ? 1 : 0), ")");
  kernels::RandomParams p;
  p.kind = kernels::RandomKind::kInteger;
  p.int_low = low;
  p.int_high = high;
  return random_tensor(shape, options, p, "randint");
}

Tensor from_storage_view(const StorageView& view) {
  return Tensor(view.base(), view.shape(), view.stride(), view.offset());
}

Tensor from_blob_copy(const void* data, DType src_dtype, const Shape& shape, std::optional<DType> dtype,
                      Device device) {
  const std::int64_t n = detail::shape_numel(shape);
  GENESIS_CHECK(data != nullptr || n == 0, "from_blob_copy: data is null for ", n, " elements of ",
                dtype_name(src_dtype), " (shape ", detail::shape_str(shape), ")");
  // Borrow the caller's memory as a CPU tensor, then convert/copy it.
  Storage borrowed = Storage::borrow(const_cast<void*>(data), {n}, src_dtype, Device{});
  Tensor src(std::move(borrowed), shape, contiguous_strides(shape), 0);
  Tensor out = empty(shape, TensorOptions(dtype.value_or(src_dtype), device));
  out.copy_(src);
  return out;
}

}  // namespace genesis
