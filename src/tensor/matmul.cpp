// matmul (torch.matmul semantics) over the batched kernel entry.
#include <atomic>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/ops.h"
#include "genesis/tensor/promotion.h"
#include "genesis/tensor/shape_ops.h"
#include "tensor_internal.h"

namespace genesis {
namespace {

std::atomic<bool> g_allow_tf32{false};

// A [B, R, C] view whose matrices have a unit stride in one dim and a
// leading dimension BLAS accepts (Note in cpu_matmul.cpp); copies otherwise.
Tensor blas_layout(const Tensor& t) {
  const std::int64_t rows = t.size(1), cols = t.size(2), rs = t.stride(1), cs = t.stride(2);
  const bool row_major = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<std::int64_t>(1, cols));
  const bool col_major = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<std::int64_t>(1, rows));
  return row_major || col_major ? t : t.contiguous();
}

struct Plan {
  Shape out_shape;     // the user-visible result shape
  Shape batch;         // broadcast batch dims
  std::int64_t m = 0, n = 0, k = 0;
  Tensor a3, b3;       // [B, m, k], [B, k, n]
};

Plan plan(const Tensor& a, const Tensor& b) {
  detail::check_defined(a, "matmul");
  detail::check_defined(b, "matmul");
  GENESIS_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got ", a.dim(),
                "D and ", b.dim(), "D");
  GENESIS_CHECK(a.device() == b.device(), "matmul: expected both tensors on one device, got ", a.device(), " and ",
                b.device());
  GENESIS_CHECK_TYPE(a.dtype() == b.dtype(), "expected m1 and m2 to have the same dtype, but got: ", a.dtype(),
                     " != ", b.dtype());
  GENESIS_CHECK_TYPE(a.dtype() != DType::kBool, "matmul: bool tensors are not supported");
  Tensor x = a.dim() == 1 ? a.unsqueeze(0) : a;   // [.., m, k]
  Tensor y = b.dim() == 1 ? b.unsqueeze(-1) : b;  // [.., k, n]
  Plan p;
  p.m = x.size(-2);
  p.k = x.size(-1);
  p.n = y.size(-1);
  GENESIS_CHECK(y.size(-2) == p.k, "mat1 and mat2 shapes cannot be multiplied (", detail::shape_str(a.shape()),
                " and ", detail::shape_str(b.shape()), "): inner dimensions ", p.k, " and ", y.size(-2), " differ");
  const Shape xb(x.shape().begin(), x.shape().end() - 2), yb(y.shape().begin(), y.shape().end() - 2);
  p.batch = broadcast_shapes(xb, yb);
  const std::int64_t bsz = checked_numel(p.batch, "matmul");  // the batch dims broadcast together may be too many
  Shape xs = p.batch, ys = p.batch;
  xs.insert(xs.end(), {p.m, p.k});
  ys.insert(ys.end(), {p.k, p.n});
  p.a3 = blas_layout(x.expand(xs).reshape({bsz, p.m, p.k}));
  p.b3 = blas_layout(y.expand(ys).reshape({bsz, p.k, p.n}));
  p.out_shape = p.batch;
  if (a.dim() > 1) p.out_shape.push_back(p.m);
  if (b.dim() > 1) p.out_shape.push_back(p.n);
  return p;
}

void run(const Plan& p, const Tensor& out3) {
  if (out3.numel() == 0) return;
  auto fn = detail::kernel_entry(out3.device(), &kernels::KernelTable::matmul, "matmul");
  kernels::MatmulParams params;
  params.allow_tf32 = g_allow_tf32.load(std::memory_order_relaxed);
  fn(detail::kernel_ctx(out3.device()), detail::operand(out3), detail::operand(p.a3), detail::operand(p.b3), params);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const Plan p = plan(a, b);
  Tensor out = empty(p.out_shape, TensorOptions(a.dtype(), a.device()));
  run(p, out.view({p.a3.size(0), p.m, p.n}));
  return out;
}

Tensor& matmul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  const Plan p = plan(a, b);
  detail::check_defined(out, "matmul_out");
  detail::check_writable(out, "matmul_out");
  GENESIS_CHECK_TYPE(out.dtype() == a.dtype(), "matmul_out: expected out to have dtype ", a.dtype(), ", got ",
                     out.dtype());
  GENESIS_CHECK(out.shape() == p.out_shape, "matmul_out: expected out of shape ", detail::shape_str(p.out_shape),
                ", got ", detail::shape_str(out.shape()));
  GENESIS_CHECK(out.device() == a.device(), "matmul_out: out is on ", out.device(), ", the operands on ", a.device());
  const bool direct = out.is_contiguous() && !detail::may_overlap(out, a) && !detail::may_overlap(out, b);
  if (direct) {
    run(p, out.view({p.a3.size(0), p.m, p.n}));
  } else {
    Tensor tmp = empty(p.out_shape, TensorOptions(a.dtype(), a.device()));
    run(p, tmp.view({p.a3.size(0), p.m, p.n}));
    out.copy_(tmp);
  }
  return out;
}

Tensor Tensor::matmul(const Tensor& other) const { return genesis::matmul(*this, other); }

void set_allow_tf32(bool allow) noexcept { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() noexcept { return g_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace genesis
