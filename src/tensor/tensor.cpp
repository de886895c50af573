// Tensor: construction, metadata, conversion and copies (tensor/tensor.h).
#include "genesis/tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/storage_view.h"
#include "genesis/core/cast.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/promotion.h"
#include "genesis/tensor/shape_ops.h"
#include "tensor_internal.h"

namespace genesis {

// ------------------------------------------------------------- helpers ---
namespace detail {

kernels::StridedOperand operand(const Tensor& t) { return operand(t, t.shape()); }

kernels::StridedOperand operand(const Tensor& t, const Shape& shape) {
  kernels::StridedOperand op;
  const auto nd = static_cast<int>(shape.size());
  GENESIS_CHECK(nd <= kernels::kMaxDims, "tensors have at most ", kernels::kMaxDims, " dimensions, got ", nd);
  op.data = t.data_ptr();
  op.dtype = t.dtype();
  op.ndim = nd;
  const auto tnd = static_cast<int>(t.dim());
  for (int d = 0; d < nd; ++d) {
    op.sizes[d] = shape[static_cast<std::size_t>(d)];
    const int td = d - (nd - tnd);
    if (td < 0 || t.shape()[static_cast<std::size_t>(td)] == 1) {
      op.strides[d] = 0;
    } else {
      op.strides[d] = t.strides()[static_cast<std::size_t>(td)];
    }
  }
  return op;
}

kernels::StridedOperand scalar_operand(Scalar s, DType dtype, const Shape& shape) {
  kernels::StridedOperand op;
  op.dtype = dtype;
  op.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < op.ndim; ++d) op.sizes[d] = shape[static_cast<std::size_t>(d)];
  op.is_scalar = true;
  op.scalar = s;
  return op;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim, bool scalar_ok) {
  std::int64_t n = ndim;
  if (n == 0 && scalar_ok) n = 1;
  GENESIS_CHECK_INDEX(dim >= -n && dim < n, "Dimension out of range (expected to be in range of [", -n, ", ",
                      n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::int64_t shape_numel(const Shape& shape) { return checked_numel(shape); }

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

namespace {
// [lo, hi] element range a tensor touches (relative to its storage).
void element_span(const Tensor& t, std::int64_t& lo, std::int64_t& hi) {
  lo = hi = t.storage_offset();
  for (std::size_t d = 0; d < t.shape().size(); ++d) {
    const std::int64_t ext = (t.shape()[d] - 1) * t.strides()[d];
    if (ext < 0) lo += ext;
    else hi += ext;
  }
}
}  // namespace

bool may_overlap(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  if (a.storage() == b.storage()) {
    std::int64_t alo, ahi, blo, bhi;
    element_span(a, alo, ahi);
    element_span(b, blo, bhi);
    return !(ahi < blo || bhi < alo);
  }
  // Two storages can alias one buffer (from_blob / borrow over the same
  // memory: genesis.from_numpy of two views of one array, DLPack imports):
  // compare the byte ranges touched.
  if (a.device() != b.device()) return false;
  auto bytes = [](const Tensor& t, std::uintptr_t& lo, std::uintptr_t& hi) {
    std::int64_t elo, ehi;
    element_span(t, elo, ehi);
    const auto base = reinterpret_cast<std::uintptr_t>(t.storage().data_ptr());
    const auto size = static_cast<std::int64_t>(t.element_size());
    lo = base + static_cast<std::uintptr_t>(elo * size);
    hi = base + static_cast<std::uintptr_t>((ehi + 1) * size);  // one past the end
  };
  std::uintptr_t alo, ahi, blo, bhi;
  bytes(a, alo, ahi);
  bytes(b, blo, bhi);
  return alo < bhi && blo < ahi;
}

bool same_elements(const Tensor& a, const Tensor& b) {
  return a.storage() == b.storage() && a.storage_offset() == b.storage_offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

void check_no_internal_overlap(const Tensor& t, const char* what) {
  // A tensor without elements writes nothing, so nothing of it can overlap
  // (NumPy gives empty arrays zero strides: from_numpy keeps them).
  if (t.numel() == 0) return;
  for (std::size_t d = 0; d < t.shape().size(); ++d) {
    GENESIS_CHECK(t.shape()[d] <= 1 || t.strides()[d] != 0, what, ": unsupported operation: more than one element of "
                  "the written-to tensor refers to a single memory location (dimension ", d, " is expanded); "
                  "call clone() first");
  }
}

void check_defined(const Tensor& t, const char* what) {
  GENESIS_CHECK(t.defined(), what, ": the tensor is undefined (default-constructed)");
}

void check_writable(const Tensor& t, const char* what) { t.storage().check_writable(what); }

Tensor make_view(const Tensor& t, Shape shape, Shape strides, std::int64_t offset) {
  return Tensor(t.storage(), std::move(shape), std::move(strides), offset);
}

// Note [Cross-device copies]: every dtype conversion, broadcast and layout
// change happens on the CPU side of a transfer whenever one side is the CPU,
// so moving data to and from a GPU needs no GPU kernel when the GPU side is
// contiguous (tensor(data, device=cuda), .to("cuda"), .cpu(), item()).
Tensor bring_to_device(const Tensor& src, Tensor& dst) {
  const Device cpu{};
  if (dst.device().is_cpu()) {  // GPU -> CPU: packed bytes, then the CPU kernel
    Tensor packed = src.contiguous();
    Tensor host = empty(packed.shape(), TensorOptions(packed.dtype(), cpu));
    copy_bytes(host.data_ptr(), cpu, packed.data_ptr(), packed.device(), packed.nbytes());
    return host;
  }
  if (src.device().is_cpu()) {  // CPU -> GPU: convert on the host first
    Tensor staged = src;
    if (src.dtype() != dst.dtype() || src.shape() != dst.shape() || !src.is_contiguous()) {
      staged = empty(dst.shape(), TensorOptions(dst.dtype(), cpu));
      staged.copy_(src);
    }
    if (dst.is_contiguous()) {
      copy_bytes(dst.data_ptr(), dst.device(), staged.data_ptr(), cpu, dst.nbytes());
      return Tensor();
    }
    Tensor here = empty(dst.shape(), TensorOptions(dst.dtype(), dst.device()));
    copy_bytes(here.data_ptr(), here.device(), staged.data_ptr(), cpu, here.nbytes());
    return here;
  }
  // GPU -> another GPU: packed bytes over, then the destination's kernel.
  Tensor packed = src.contiguous();
  if (dst.is_contiguous() && packed.dtype() == dst.dtype() && packed.shape() == dst.shape()) {
    copy_bytes(dst.data_ptr(), dst.device(), packed.data_ptr(), packed.device(), packed.nbytes());
    return Tensor();
  }
  Tensor here = empty(packed.shape(), TensorOptions(packed.dtype(), dst.device()));
  copy_bytes(here.data_ptr(), here.device(), packed.data_ptr(), packed.device(), packed.nbytes());
  return here;
}

[[noreturn]] void throw_ragged(std::int64_t expected, std::size_t got) {
  GENESIS_THROW(InvalidArgumentError, "tensor(): expected a sequence of length ", expected, " at each position, got ",
                got, " (nested lists must be rectangular)");
}

void check_count(std::size_t count, const Shape& shape) {
  GENESIS_CHECK(static_cast<std::int64_t>(count) == shape_numel(shape), "tensor(): ", count,
                " values cannot fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
}

std::pair<std::int64_t, std::int64_t> exact_integer_range(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBool: return {0, 1};
    case DType::kUInt8: return {0, 255};
    case DType::kInt8: return {-128, 127};
    case DType::kInt16: return {-32768, 32767};
    case DType::kInt32: return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
    case DType::kInt64: return {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
    case DType::kFloat16: return {-(std::int64_t{1} << 11), std::int64_t{1} << 11};
    case DType::kBFloat16: return {-(std::int64_t{1} << 8), std::int64_t{1} << 8};
    case DType::kFloat32: return {-(std::int64_t{1} << 24), std::int64_t{1} << 24};
    case DType::kFloat64: return {-(std::int64_t{1} << 53), std::int64_t{1} << 53};
  }
  return {0, 0};
}

}  // namespace detail

// ------------------------------------------------- Scalar conversions ---
namespace {

// A value as Python writes it: True, 300, 1e+10, nan (the shortest
// decimal that reads back as the same double).
std::string scalar_text(Scalar v) {
  if (v.is_bool()) return v.to_bool() ? "True" : "False";
  if (v.is_integral()) return std::to_string(v.to_int64());
  const double d = v.to_double();
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

}  // namespace

bool fits_in(Scalar value, DType dtype) noexcept {
  if (dtype == DType::kBool || is_floating(dtype) || value.is_bool()) return true;
  const auto [lowest, highest] = detail::exact_integer_range(dtype);
  if (value.is_integral()) return value.to_int64() >= lowest && value.to_int64() <= highest;
  // A float truncates toward zero: it fits when lowest - 1 < v < highest + 1
  // (NaN fails both comparisons). The bounds are exact doubles for every
  // integer dtype except int64, whose highest + 1 is 2^63.
  const double d = value.to_double();
  if (dtype == DType::kInt64) return d >= -9223372036854775808.0 && d < 9223372036854775808.0;
  return d > static_cast<double>(lowest) - 1.0 && d < static_cast<double>(highest) + 1.0;
}

void check_fits(Scalar value, DType dtype) {
  if (fits_in(value, dtype)) return;
  if (value.is_floating() && std::isnan(value.to_double())) {
    GENESIS_THROW(InvalidArgumentError, "value nan cannot be converted to ", dtype_name(dtype),
                  " (an integer dtype has no NaN)");
  }
  GENESIS_THROW(InvalidArgumentError, "value ", scalar_text(value), " cannot be converted to ", dtype_name(dtype),
                " without overflow");
}

// -------------------------------------------------------------- Tensor ---
Tensor::Tensor(Storage storage, Shape shape, Shape strides, std::int64_t offset) {
  GENESIS_CHECK(storage.defined(), "Tensor: the storage is null");
  GENESIS_CHECK(shape.size() == strides.size(), "Tensor: shape ", detail::shape_str(shape), " and strides ",
                detail::shape_str(strides), " differ in length");
  GENESIS_CHECK(shape.size() <= static_cast<std::size_t>(kernels::kMaxDims), "Tensor: at most ", kernels::kMaxDims,
                " dimensions are supported, got ", shape.size());
  // Note [Size overflow]: numel() and nbytes() of every tensor fit in int64,
  // so neither needs checking afterwards (an expanded view may not claim
  // 2^62 x 2 elements).
  const std::int64_t n = checked_numel(shape, "Tensor");
  (void)checked_nbytes(shape, dtype_size(storage.dtype()), "Tensor");
  GENESIS_CHECK(offset >= 0, "Tensor: negative storage offset ", offset);
  if (n > 0) {
    // The element range touched; a wrapped extent could look in bounds.
    std::int64_t lo = offset, hi = offset;
    bool fits = true;
    for (std::size_t d = 0; d < shape.size() && fits; ++d) {
      std::int64_t ext = 0;
      fits = mul_fits(shape[d] - 1, strides[d], ext) && (ext < 0 ? add_fits(lo, ext, lo) : add_fits(hi, ext, hi));
    }
    const auto capacity = static_cast<std::int64_t>(storage.nbytes() / dtype_size(storage.dtype()));
    GENESIS_CHECK(fits, "Tensor: shape ", detail::shape_str(shape), " with strides ", detail::shape_str(strides),
                  " at offset ", offset, " reaches elements beyond +-(2^63-1), outside the storage of ", capacity,
                  " elements");
    GENESIS_CHECK(lo >= 0 && hi < capacity, "Tensor: shape ", detail::shape_str(shape), " with strides ",
                  detail::shape_str(strides), " at offset ", offset, " reaches elements [", lo, ", ", hi,
                  "] outside the storage of ", capacity, " elements");
  }
  impl_ = std::make_shared<detail::TensorImpl>();
  impl_->dtype = storage.dtype();
  impl_->storage = std::move(storage);
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
}

const detail::TensorImpl& Tensor::impl() const {
  GENESIS_CHECK(impl_ != nullptr, "the tensor is undefined (default-constructed)");
  return *impl_;
}
detail::TensorImpl& Tensor::mutable_impl() {
  GENESIS_CHECK(impl_ != nullptr, "the tensor is undefined (default-constructed)");
  return *impl_;
}

std::int64_t Tensor::size(std::int64_t d) const { return shape()[static_cast<std::size_t>(detail::wrap_dim(d, dim(), false))]; }
std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[static_cast<std::size_t>(detail::wrap_dim(d, dim(), false))];
}
std::int64_t Tensor::numel() const {
  std::int64_t n = 1;  // cannot overflow: the constructor checked (Note [Size overflow])
  for (auto s : shape()) n *= s;
  return n;
}

void* Tensor::data_ptr() const {
  const auto& i = impl();
  auto* base = static_cast<char*>(i.storage.data_ptr());
  if (base == nullptr) return nullptr;
  return base + i.offset * static_cast<std::int64_t>(dtype_size(i.dtype));
}

void Tensor::check_data_type(DType requested) const {
  GENESIS_CHECK_TYPE(requested == dtype(), "data_ptr<", requested, ">() called on a tensor of dtype ", dtype());
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (std::int64_t d = dim() - 1; d >= 0; --d) {
    const auto sz = shape()[static_cast<std::size_t>(d)];
    if (sz == 0) return true;
    if (sz != 1 && strides()[static_cast<std::size_t>(d)] != expected) return false;
    expected *= sz;
  }
  return true;
}

Tensor Tensor::to(Device device) const { return to(device, dtype()); }
Tensor Tensor::to(DType dtype) const { return to(device(), dtype); }
Tensor Tensor::to(Device device, DType dtype) const {
  if (device == this->device() && dtype == this->dtype()) return *this;
  Tensor out = empty(shape(), TensorOptions(dtype, device));
  out.copy_(*this);
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), TensorOptions(dtype(), device()));
  out.copy_(*this);
  return out;
}

Tensor& Tensor::copy_(const Tensor& src_in) {
  detail::check_defined(src_in, "copy_");
  detail::check_writable(*this, "copy_");
  Shape b = broadcast_shapes(shape(), src_in.shape());
  GENESIS_CHECK(b == shape(), "copy_: the source of shape ", detail::shape_str(src_in.shape()),
                " does not broadcast to the destination shape ", detail::shape_str(shape()));
  if (numel() == 0) return *this;
  detail::check_no_internal_overlap(*this, "copy_");
  Tensor src = src_in;
  if (src.device() != device()) {
    src = detail::bring_to_device(src, *this);
    if (!src.defined()) return *this;  // transferred straight into place
  } else if (detail::may_overlap(*this, src) && !detail::same_elements(*this, src)) {
    src = src.clone();
  }
  if (detail::same_elements(*this, src)) return *this;
  auto fn = detail::kernel_entry(device(), &kernels::KernelTable::copy, "copy");
  fn(detail::kernel_ctx(device()), detail::operand(*this), detail::operand(src, shape()));
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  detail::check_writable(*this, "fill_");
  check_fits(value, dtype());
  if (numel() == 0) return *this;
  auto fn = detail::kernel_entry(device(), &kernels::KernelTable::fill, "fill");
  fn(detail::kernel_ctx(device()), detail::operand(*this), value);
  return *this;
}

Scalar Tensor::item() const {
  GENESIS_CHECK(numel() == 1, "a Tensor with ", numel(), " elements cannot be converted to Scalar");
  Tensor host = to(Device{}).contiguous();
  Scalar out;
  switch (dtype()) {
    case DType::kBool: out = Scalar(*host.data_ptr<bool>()); break;
    case DType::kUInt8: out = Scalar(static_cast<std::int64_t>(*host.data_ptr<std::uint8_t>())); break;
    case DType::kInt8: out = Scalar(static_cast<std::int64_t>(*host.data_ptr<std::int8_t>())); break;
    case DType::kInt16: out = Scalar(static_cast<std::int64_t>(*host.data_ptr<std::int16_t>())); break;
    case DType::kInt32: out = Scalar(static_cast<std::int64_t>(*host.data_ptr<std::int32_t>())); break;
    case DType::kInt64: out = Scalar(*host.data_ptr<std::int64_t>()); break;
    case DType::kFloat16: out = Scalar(static_cast<double>(static_cast<float>(*host.data_ptr<Half>()))); break;
    case DType::kBFloat16: out = Scalar(static_cast<double>(static_cast<float>(*host.data_ptr<BFloat16>()))); break;
    case DType::kFloat32: out = Scalar(static_cast<double>(*host.data_ptr<float>())); break;
    case DType::kFloat64: out = Scalar(*host.data_ptr<double>()); break;
  }
  return out;
}

template <typename T>
T Tensor::item() const {
  const Scalar s = item();
  return kernels::scalar_to<T>(s);
}

template <typename T>
std::vector<T> Tensor::tolist() const {
  Tensor host = to(Device{}).contiguous();
  const auto n = static_cast<std::size_t>(host.numel());
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(n);
    convert_dtype(host.data_ptr(), host.dtype(), bytes.data(), DType::kBool, n);
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(n);
    convert_dtype(host.data_ptr(), host.dtype(), out.data(), detail::dtype_of<T>(), n);
    return out;
  }
}

#define GENESIS_INSTANTIATE(T)                    \
  template T Tensor::item<T>() const;             \
  template std::vector<T> Tensor::tolist<T>() const;
GENESIS_INSTANTIATE(bool)
GENESIS_INSTANTIATE(std::uint8_t)
GENESIS_INSTANTIATE(std::int8_t)
GENESIS_INSTANTIATE(std::int16_t)
GENESIS_INSTANTIATE(std::int32_t)
GENESIS_INSTANTIATE(std::int64_t)
GENESIS_INSTANTIATE(Half)
GENESIS_INSTANTIATE(BFloat16)
GENESIS_INSTANTIATE(float)
GENESIS_INSTANTIATE(double)
#undef GENESIS_INSTANTIATE

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace genesis
