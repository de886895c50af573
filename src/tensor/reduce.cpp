// Reductions: sum, prod, mean, max, min, amax, amin, any, all, and the
// arg-reductions max(dim), min(dim), argmax, argmin.
#include <algorithm>

#include "genesis/core/error.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/ops.h"
#include "tensor_internal.h"

namespace genesis {

using kernels::ReduceOp;

namespace {

// Normalised, sorted, duplicate-free dims; all dims when `dims` is empty.
std::vector<bool> reduced_mask(const Tensor& x, const std::vector<std::int64_t>& dims, const char* name) {
  const auto n = static_cast<std::size_t>(x.dim());
  std::vector<bool> mask(n, dims.empty());
  for (auto d : dims) {
    const auto w = static_cast<std::size_t>(detail::wrap_dim(d, x.dim()));
    if (n == 0) continue;
    GENESIS_CHECK(!mask[w], name, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

// `public_name`: the function the user called, for messages ("amax" runs
// the max reduction).
Tensor reduce_impl(ReduceOp op, const Tensor& x_in, const std::vector<std::int64_t>& dims, bool keepdim,
                   std::optional<DType> dtype, const char* public_name = nullptr) {
  const char* name = public_name != nullptr ? public_name : kernels::op_name(op);
  detail::check_defined(x_in, name);
  Tensor x = x_in;
  DType out_dtype = x.dtype();
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProd:
      if (dtype) x = x.to(*dtype);
      out_dtype = is_floating(x.dtype()) ? x.dtype() : DType::kInt64;
      if (dtype && !is_floating(*dtype)) out_dtype = *dtype;
      break;
    case ReduceOp::kMean:
      if (dtype) x = x.to(*dtype);
      GENESIS_CHECK(is_floating(x.dtype()), "mean(): could not infer output dtype. Input dtype must be either a "
                    "floating point or complex dtype. Got: ", x.dtype());
      out_dtype = x.dtype();
      break;
    case ReduceOp::kAny:
    case ReduceOp::kAll: out_dtype = DType::kBool; break;
    default: break;
  }
  const std::vector<bool> mask = reduced_mask(x, dims, name);
  Shape keep_shape = x.shape(), final_shape;
  for (std::size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) {
      if ((op == ReduceOp::kMax || op == ReduceOp::kMin)) {
        // An IndexError, as max(dim) and argmax raise for the same input.
        GENESIS_CHECK_INDEX(x.shape()[d] != 0, name, "(): Expected reduction dim ", d,
                            " to have non-zero size (a reduction without identity over an empty dimension)");
      }
      keep_shape[d] = 1;
      if (keepdim) final_shape.push_back(1);
    } else {
      final_shape.push_back(x.shape()[d]);
    }
  }
  if ((op == ReduceOp::kMax || op == ReduceOp::kMin) && x.dim() == 0) {
    GENESIS_CHECK(x.numel() > 0, name, "(): empty input");
  }
  // An int64 result of a narrower integer sum is accumulated by the kernel
  // directly (contract: out may be int64 for integer/bool input).
  DType kernel_out = out_dtype;
  Tensor out = empty(keep_shape, TensorOptions(kernel_out, x.device()));
  auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::reduce, name);
  if (out.numel() > 0) fn(detail::kernel_ctx(x.device()), op, detail::operand(out), detail::operand(x));
  if (op != ReduceOp::kSum && op != ReduceOp::kProd && out.dtype() != out_dtype) out = out.to(out_dtype);
  return out.view(final_shape);
}

ValuesIndices arg_impl(kernels::ArgReduceOp op, const Tensor& x, std::int64_t dim_in, bool keepdim, bool with_values,
                       const char* name) {
  detail::check_defined(x, name);
  Tensor src = x.dim() == 0 ? x.reshape({1}) : x;
  const auto d = static_cast<std::size_t>(detail::wrap_dim(dim_in, x.dim()));
  GENESIS_CHECK_INDEX(src.shape()[d] > 0, name, "(): Expected reduction dim ", d,
                      " to have non-zero size (cannot reduce an empty dimension)");
  Shape keep = src.shape();
  keep[d] = 1;
  Tensor indices = empty(keep, TensorOptions(DType::kInt64, x.device()));
  Tensor values = with_values ? empty(keep, TensorOptions(x.dtype(), x.device())) : Tensor();
  if (indices.numel() > 0) {
    auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::arg_reduce, name);
    kernels::StridedOperand vop = with_values ? detail::operand(values) : detail::operand(indices);
    if (!with_values) vop.data = nullptr;
    fn(detail::kernel_ctx(x.device()), op, vop, detail::operand(indices), detail::operand(src), static_cast<int>(d));
  }
  if (!keepdim || x.dim() == 0) {
    indices = x.dim() == 0 ? indices.view({}) : indices.squeeze(static_cast<std::int64_t>(d));
    if (with_values) values = x.dim() == 0 ? values.view({}) : values.squeeze(static_cast<std::int64_t>(d));
  }
  return {values, indices};
}

Tensor arg_all(kernels::ArgReduceOp op, const Tensor& x, std::optional<std::int64_t> dim, bool keepdim,
               const char* name) {
  if (dim) return arg_impl(op, x, *dim, keepdim, false, name).indices;
  detail::check_defined(x, name);
  GENESIS_CHECK(x.numel() > 0, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
  Tensor flat = x.reshape({-1});
  Tensor idx = arg_impl(op, flat, 0, false, false, name).indices;
  if (keepdim) return idx.view(Shape(static_cast<std::size_t>(x.dim()), 1));
  return idx;
}

}  // namespace

Tensor Tensor::sum(std::optional<DType> dtype) const { return reduce_impl(ReduceOp::kSum, *this, {}, false, dtype); }
Tensor Tensor::sum(const DimList& dims, bool keepdim, std::optional<DType> dtype) const {
  return reduce_impl(ReduceOp::kSum, *this, dims.dims(), keepdim, dtype);
}
Tensor Tensor::prod(std::optional<DType> dtype) const { return reduce_impl(ReduceOp::kProd, *this, {}, false, dtype); }
Tensor Tensor::prod(const DimList& dims, bool keepdim, std::optional<DType> dtype) const {
  return reduce_impl(ReduceOp::kProd, *this, dims.dims(), keepdim, dtype);
}
Tensor Tensor::mean(std::optional<DType> dtype) const { return reduce_impl(ReduceOp::kMean, *this, {}, false, dtype); }
Tensor Tensor::mean(const DimList& dims, bool keepdim, std::optional<DType> dtype) const {
  return reduce_impl(ReduceOp::kMean, *this, dims.dims(), keepdim, dtype);
}
Tensor Tensor::max() const {
  GENESIS_CHECK(numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                "reduction dim with the 'dim' argument.");
  return reduce_impl(ReduceOp::kMax, *this, {}, false, std::nullopt);
}
Tensor Tensor::min() const {
  GENESIS_CHECK(numel() > 0, "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                "reduction dim with the 'dim' argument.");
  return reduce_impl(ReduceOp::kMin, *this, {}, false, std::nullopt);
}
ValuesIndices Tensor::max(std::int64_t dim, bool keepdim) const {
  return arg_impl(kernels::ArgReduceOp::kMax, *this, dim, keepdim, true, "max");
}
ValuesIndices Tensor::min(std::int64_t dim, bool keepdim) const {
  return arg_impl(kernels::ArgReduceOp::kMin, *this, dim, keepdim, true, "min");
}
Tensor Tensor::amax(const DimList& dims, bool keepdim) const {
  return reduce_impl(ReduceOp::kMax, *this, dims.dims(), keepdim, std::nullopt, "amax");
}
Tensor Tensor::amin(const DimList& dims, bool keepdim) const {
  return reduce_impl(ReduceOp::kMin, *this, dims.dims(), keepdim, std::nullopt, "amin");
}
Tensor Tensor::argmax(std::optional<std::int64_t> dim, bool keepdim) const {
  return arg_all(kernels::ArgReduceOp::kMax, *this, dim, keepdim, "argmax");
}
Tensor Tensor::argmin(std::optional<std::int64_t> dim, bool keepdim) const {
  return arg_all(kernels::ArgReduceOp::kMin, *this, dim, keepdim, "argmin");
}
Tensor Tensor::any() const { return reduce_impl(ReduceOp::kAny, *this, {}, false, std::nullopt); }
Tensor Tensor::all() const { return reduce_impl(ReduceOp::kAll, *this, {}, false, std::nullopt); }

Tensor Tensor::any(const DimList& dims, bool keepdim) const {
  return reduce_impl(ReduceOp::kAny, *this, dims.dims(), keepdim, std::nullopt);
}
Tensor Tensor::all(const DimList& dims, bool keepdim) const {
  return reduce_impl(ReduceOp::kAll, *this, dims.dims(), keepdim, std::nullopt);
}

Tensor count_nonzero(const Tensor& x) {
  detail::check_defined(x, "count_nonzero");
  Tensor b = x.dtype() == DType::kBool ? x : x.ne(0);
  return b.sum();
}

Tensor count_nonzero(const Tensor& x, const DimList& dims) {
  detail::check_defined(x, "count_nonzero");
  Tensor b = x.dtype() == DType::kBool ? x : x.ne(0);
  return b.sum(dims, false, DType::kInt64);
}

Tensor nonzero(const Tensor& x) {
  detail::check_defined(x, "nonzero");
  Tensor mask = x.dtype() == DType::kBool ? x : x.ne(0);
  // The result's size depends on the data: the count goes to the host
  // (a synchronisation on CUDA, as for boolean-mask indexing).
  const std::int64_t count = x.numel() == 0 ? 0 : mask.sum().item().to_int64();
  Tensor out = empty({count, x.dim()}, TensorOptions(DType::kInt64, x.device()));
  if (count > 0 && x.dim() > 0) {
    auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::nonzero, "nonzero");
    fn(detail::kernel_ctx(x.device()), detail::operand(out), detail::operand(mask));
  }
  return out;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  if (a.numel() == 0) return true;
  Tensor bb = b.device() == a.device() ? b : b.to(a.device());
  return a.eq(bb).all().item().to_bool();
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  if (a.numel() == 0) return true;
  Tensor x = a.to(DType::kFloat64), y = b.to(a.device(), DType::kFloat64);
  Tensor diff = (x - y).abs();
  Tensor tol = y.abs() * rtol + atol;
  Tensor ok = diff <= tol;
  // Equal infinities are close; NaN never is.
  ok = ok | (x == y);
  return ok.all().item().to_bool();
}

}  // namespace genesis
