// NumPy indexing: IndexPlan construction, gather and scatter (Note
// [Advanced indexing] in tensor/index.h).
#include "genesis/tensor/index.h"

#include <optional>
#include <sstream>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/storage_view.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/ops.h"
#include "genesis/tensor/promotion.h"
#include "tensor_internal.h"

namespace genesis {
namespace {

// The basic-indexing pass: the view plus the advanced indices found.
struct Parsed {
  Tensor view;
  std::vector<Tensor> indices;           // int64, unbroadcast
  std::vector<std::int64_t> view_dims;   // dim of `view` each index applies to
  std::vector<std::int64_t> orig_dims;   // dim of x, for messages
  std::vector<bool> needs_check;         // false: already known in range
  std::vector<std::size_t> item_pos;     // list positions of the advanced items, in order (more
                                         // than indices when 0-d masks share one axis)
  bool mask = false;
  std::size_t temp_bytes = 0;
};

[[noreturn]] void out_of_bounds(std::int64_t index, std::int64_t dim, std::int64_t size) {
  GENESIS_THROW(IndexError, "index ", index, " is out of bounds for dimension ", dim, " with size ", size);
}

// GENESIS_SYNC_INDEX_CHECKS: waits for the gather just queued and raises
// what its kernel found, with the CPU's message (Note [Asynchronous kernel
// errors]).
void raise_deferred_index_error(const Device& device) {
  cuda::raise_index_errors_now(device.index(), cuda::current_stream(device.index()).id());
}

// NumPy treats a 0-d integer array as an integer: checked against its dim on
// its own (x[[], np.array(7)] is an IndexError on a dim of size 3), not
// after broadcasting with the other index arrays. Such items become ints;
// the list is returned unchanged (no copy) when there are none.
const std::vector<IndexItem>& scalar_tensors_as_ints(const std::vector<IndexItem>& items,
                                                     std::vector<IndexItem>& storage) {
  auto is_scalar_index = [](const IndexItem& it) {
    return it.is_tensor() && it.as_tensor().defined() && it.as_tensor().dim() == 0 &&
           it.as_tensor().dtype() != DType::kBool && !is_floating(it.as_tensor().dtype());
  };
  bool any = false;
  for (const auto& it : items) any = any || is_scalar_index(it);
  if (!any) return items;
  storage.clear();
  for (const auto& it : items) {
    if (is_scalar_index(it)) storage.emplace_back(it.as_tensor().item().to_int64());
    else storage.push_back(it);
  }
  return storage;
}

Parsed parse(const Tensor& x, const std::vector<IndexItem>& items_in) {
  detail::check_defined(x, "index");
  std::vector<IndexItem> normalized;
  const std::vector<IndexItem>& items = scalar_tensors_as_ints(items_in, normalized);
  // Dims consumed by the items, and whether any item is advanced.
  std::int64_t consumed = 0;
  int ellipses = 0;
  bool advanced = false;
  for (const auto& it : items) {
    if (it.is_int() || it.is_slice()) {
      ++consumed;
    } else if (it.is_tensor()) {
      const Tensor& t = it.as_tensor();
      detail::check_defined(t, "index");
      advanced = true;
      if (t.dtype() == DType::kBool) consumed += t.dim();
      else ++consumed;
    } else if (it.is_bool()) {
      advanced = true;
    } else if (it.is_ellipsis()) {
      ++ellipses;
    }
  }
  GENESIS_CHECK_INDEX(ellipses <= 1, "an index can only have a single ellipsis ('...')");
  GENESIS_CHECK_INDEX(consumed <= x.dim(), "too many indices for tensor of dimension ", x.dim(), " (got ", consumed,
                      " indices)");
  Parsed p;
  p.view = x;
  std::int64_t vd = 0, od = 0;  // current dim in the view, in x
  std::optional<std::size_t> zero_d_mask_slot;  // p.indices entry of the 0-d masks' shared axis
  for (std::size_t pos = 0; pos < items.size(); ++pos) {
    const IndexItem& it = items[pos];
    if (it.is_ellipsis()) {
      vd += x.dim() - consumed;
      od += x.dim() - consumed;
    } else if (it.is_new_axis()) {
      p.view = p.view.unsqueeze(vd);
      ++vd;
    } else if (it.is_slice()) {
      const Slice& s = it.as_slice();
      GENESIS_CHECK(s.step.value_or(1) != 0, "slice step cannot be zero");
      p.view = p.view.slice(vd, s.start, s.stop, s.step.value_or(1));
      ++vd;
      ++od;
    } else if (it.is_int()) {
      const std::int64_t size = p.view.size(vd);
      std::int64_t i = it.as_int();
      if (i < -size || i >= size) out_of_bounds(i, od, size);
      if (i < 0) i += size;
      if (advanced) {
        // NumPy: with any array index present, integers are advanced
        // indices too (this decides where the broadcast dims go).
        p.indices.push_back(full({}, Scalar(i), TensorOptions(DType::kInt64, x.device())));
        p.view_dims.push_back(vd);
        p.orig_dims.push_back(od);
        p.needs_check.push_back(false);
        p.item_pos.push_back(pos);
        ++vd;
      } else {
        p.view = p.view.select(vd, i);
      }
      ++od;
    } else if (it.is_bool() || (it.is_tensor() && it.as_tensor().dtype() == DType::kBool && it.as_tensor().dim() == 0)) {
      // A 0-d mask: a new axis of length 1 selected (true) or not (false).
      // NumPy broadcasts every such axis's index with the others into one
      // result dim, of length 0 if any of them is false, so all 0-d masks
      // share the first one's axis: a later one only empties its index (and
      // counts as an item for the adjacency rule), and x[(False,) * 20]
      // needs no 20 intermediate dims.
      const bool keep = it.is_bool() ? it.as_bool() : it.as_tensor().item().to_bool();
      if (zero_d_mask_slot.has_value()) {
        if (!keep) p.indices[*zero_d_mask_slot] = zeros({0}, TensorOptions(DType::kInt64, x.device()));
        p.item_pos.push_back(pos);
        continue;
      }
      zero_d_mask_slot = p.indices.size();
      p.view = p.view.unsqueeze(vd);
      p.indices.push_back(zeros({keep ? 1 : 0}, TensorOptions(DType::kInt64, x.device())));
      p.view_dims.push_back(vd);
      p.orig_dims.push_back(od);
      p.needs_check.push_back(false);
      p.item_pos.push_back(pos);
      p.mask = true;
      ++vd;
    } else {
      // Host indices for a device tensor are moved over (as PyTorch does: a
      // Python list or NumPy array index is built on the host); indices on
      // another GPU are an error rather than a hidden peer copy.
      const Tensor& given = it.as_tensor();
      GENESIS_CHECK(given.device() == x.device() || given.device().is_cpu(),
                    "indices should be on the indexed tensor's device (", x.device(), ") or the cpu but are on ",
                    given.device());
      const Tensor t = given.device() == x.device() ? given : given.to(x.device());
      if (!t.is_same(given)) p.temp_bytes += t.nbytes();
      if (t.dtype() == DType::kBool) {
        for (std::int64_t k = 0; k < t.dim(); ++k) {
          const std::int64_t have = p.view.size(vd + k), want = t.size(k);
          // NumPy accepts a mask dim of size 0 against any size (the mask
          // selects nothing there): np.zeros((2, 3))[np.zeros((2, 0), bool)]
          // has shape (0,).
          GENESIS_CHECK_INDEX(have == want || want == 0, "boolean index did not match indexed array along dimension ", od + k,
                              "; dimension is ", have, " but corresponding boolean dimension is ", want);
        }
        // Mask compaction: the coordinates of the true elements.
        const Tensor nz = nonzero(t);
        p.temp_bytes += nz.nbytes();
        for (std::int64_t k = 0; k < t.dim(); ++k) {
          p.indices.push_back(nz.select(1, k));
          p.view_dims.push_back(vd + k);
          p.orig_dims.push_back(od + k);
          p.needs_check.push_back(false);
          p.item_pos.push_back(pos);
        }
        p.mask = true;
        vd += t.dim();
        od += t.dim();
      } else {
        GENESIS_CHECK_TYPE(!is_floating(t.dtype()), "tensors used as indices must be long, int, byte or bool tensors, got ",
                           t.dtype());
        Tensor idx = t.dtype() == DType::kInt64 ? t : t.to(DType::kInt64);
        if (!idx.is_same(t)) p.temp_bytes += idx.nbytes();
        p.indices.push_back(idx);
        p.view_dims.push_back(vd);
        p.orig_dims.push_back(od);
        p.needs_check.push_back(true);
        p.item_pos.push_back(pos);
        ++vd;
        ++od;
      }
    }
  }
  return p;
}

// Bounds of the integer index tensors of one expression: -size <= idx < size
// in every one, checked before any kernel reads through them. The max and
// min of every tensor are reduced straight into one int64 buffer [2K] on the
// tensors' device (kernel-table reduce calls writing into slices of it: no
// per-tensor result tensors, no copies), then the buffer comes to the host
// in ONE transfer: on CUDA a single device->host wait per index expression
// instead of two per index tensor. The error names the first offending
// tensor, its max checked before its min, as before.
void check_index_bounds(const Parsed& p) {
  std::vector<std::size_t> checked;
  for (std::size_t k = 0; k < p.indices.size(); ++k) {
    if (p.needs_check[k] && p.indices[k].numel() > 0) checked.push_back(k);
  }
  if (checked.empty()) return;
  const Device device = p.view.device();
  const auto num = static_cast<std::int64_t>(checked.size());
  Tensor extremes = empty({2 * num}, TensorOptions(DType::kInt64, device));
  auto reduce = detail::kernel_entry(device, &kernels::KernelTable::reduce, "index (bounds check)");
  auto* slots = static_cast<std::int64_t*>(extremes.data_ptr());
  for (std::int64_t j = 0; j < num; ++j) {
    const Tensor& idx = p.indices[checked[static_cast<std::size_t>(j)]];  // int64
    const kernels::StridedOperand in = detail::operand(idx);
    // The keepdim layout of a full reduction: every size 1 (strides unused).
    kernels::StridedOperand out;
    out.dtype = DType::kInt64;
    out.ndim = in.ndim;
    for (int d = 0; d < in.ndim; ++d) out.sizes[d] = 1;
    out.data = slots + 2 * j;
    reduce(detail::kernel_ctx(device), kernels::ReduceOp::kMax, out, in);
    out.data = slots + 2 * j + 1;
    reduce(detail::kernel_ctx(device), kernels::ReduceOp::kMin, out, in);
  }
  const Tensor host = extremes.cpu();  // the one transfer (and wait) of the expression
  const auto* v = static_cast<const std::int64_t*>(host.data_ptr());
  for (std::int64_t j = 0; j < num; ++j) {
    const std::size_t k = checked[static_cast<std::size_t>(j)];
    const std::int64_t size = p.view.size(p.view_dims[k]);
    if (v[2 * j] >= size) out_of_bounds(v[2 * j], p.orig_dims[k], size);
    if (v[2 * j + 1] < -size) out_of_bounds(v[2 * j + 1], p.orig_dims[k], size);
  }
}

// Fills in the advanced part of `plan` from the parsed items: where the
// broadcast index dims go and the result shape (Note [Advanced indexing]),
// and the bounds (nothing is read or written here, so checking after the
// shape is still before any access). defer_bounds: the caller's gather or
// scatter kernel checks the indices itself (Note [Asynchronous kernel
// errors]); they are still checked here when the result is empty, since
// then no kernel runs to see them.
void plan_advanced(const Parsed& p, IndexPlan& plan, bool defer_bounds) {
  Shape index_shape;
  for (const auto& t : p.indices) index_shape = broadcast_shapes(index_shape, t.shape());
  // NumPy checks index arrays after broadcasting them together: when the
  // broadcast shape has no elements (x[[False, False], [7]], x[[], [7]]) no
  // index is ever used, and none is out of range. (Plain ints are still
  // checked in parse(), as NumPy checks them: x[[], 7] is an IndexError.)
  const bool indices_used = detail::shape_numel(index_shape) > 0;
  bool adjacent = true;
  for (std::size_t k = 1; k < p.item_pos.size(); ++k) {
    if (p.item_pos[k] - p.item_pos[k - 1] > 1) adjacent = false;
  }
  std::vector<bool> indexed(static_cast<std::size_t>(p.view.dim()), false);
  for (auto d : p.view_dims) indexed[static_cast<std::size_t>(d)] = true;
  std::vector<std::int64_t> kept;
  std::int64_t position = 0;
  for (std::int64_t d = 0; d < p.view.dim(); ++d) {
    if (indexed[static_cast<std::size_t>(d)]) continue;
    kept.push_back(d);
    if (adjacent && d < p.view_dims.front()) ++position;
  }
  Shape result;
  for (std::int64_t i = 0; i < position; ++i) result.push_back(p.view.size(kept[static_cast<std::size_t>(i)]));
  for (auto s : index_shape) result.push_back(s);
  for (std::size_t i = static_cast<std::size_t>(position); i < kept.size(); ++i) result.push_back(p.view.size(kept[i]));
  // An empty result runs no kernel that could see the indices: checked here.
  plan.bounds_deferred = indices_used && defer_bounds && detail::shape_numel(result) > 0;
  if (indices_used && !plan.bounds_deferred) check_index_bounds(p);
  GENESIS_CHECK_INDEX(result.size() <= static_cast<std::size_t>(kernels::kMaxDims), "indexing result would have ",
                      result.size(), " dimensions, more than the ", kernels::kMaxDims, " supported");
  plan.result_shape = result;
  plan.advanced_position = position;
  plan.indexed_dims = p.view_dims;
  plan.reported_dims = p.orig_dims;
  plan.index_tensors.clear();
  for (const auto& t : p.indices) plan.index_tensors.push_back(t.expand(index_shape));
}

// The kernel operands of a GATHER or SCATTER plan: the view restrided over
// the result (kept dims keep their strides, index dims get stride 0) and
// one operand per index tensor placed at the index dims.
struct Operands {
  kernels::StridedOperand restrided;
  std::vector<kernels::StridedOperand> indices;
  std::vector<std::int64_t> sizes, strides, report_dims;
  bool unchecked = false;
  kernels::IndexArgs args() const {
    kernels::IndexArgs a;
    a.num_indices = static_cast<int>(indices.size());
    a.indices = indices.data();
    a.indexed_sizes = sizes.data();
    a.indexed_strides = strides.data();
    a.report_dims = report_dims.data();
    a.unchecked = unchecked;
    return a;
  }
};

Operands operands(const IndexPlan& plan) {
  Operands o;
  const Tensor& view = plan.view;
  const auto nd = static_cast<int>(plan.result_shape.size());
  const auto nb = static_cast<int>(plan.index_tensors.front().dim());
  const auto pos = static_cast<int>(plan.advanced_position);
  std::vector<bool> indexed(static_cast<std::size_t>(view.dim()), false);
  for (auto d : plan.indexed_dims) indexed[static_cast<std::size_t>(d)] = true;
  std::vector<std::int64_t> kept;
  for (std::int64_t d = 0; d < view.dim(); ++d)
    if (!indexed[static_cast<std::size_t>(d)]) kept.push_back(d);
  o.restrided.data = view.data_ptr();
  o.restrided.dtype = view.dtype();
  o.restrided.ndim = nd;
  for (int r = 0; r < nd; ++r) {
    o.restrided.sizes[r] = plan.result_shape[static_cast<std::size_t>(r)];
    if (r < pos) o.restrided.strides[r] = view.stride(kept[static_cast<std::size_t>(r)]);
    else if (r >= pos + nb) o.restrided.strides[r] = view.stride(kept[static_cast<std::size_t>(r - nb)]);
  }
  for (std::size_t k = 0; k < plan.index_tensors.size(); ++k) {
    const Tensor& b = plan.index_tensors[k];
    kernels::StridedOperand op;
    op.data = b.data_ptr();
    op.dtype = DType::kInt64;
    op.ndim = nd;
    for (int r = 0; r < nd; ++r) {
      op.sizes[r] = plan.result_shape[static_cast<std::size_t>(r)];
      op.strides[r] = (r >= pos && r < pos + nb) ? b.strides()[static_cast<std::size_t>(r - pos)] : 0;
    }
    o.indices.push_back(op);
    o.sizes.push_back(view.size(plan.indexed_dims[k]));
    o.strides.push_back(view.stride(plan.indexed_dims[k]));
    o.report_dims.push_back(plan.reported_dims[k]);
  }
  o.unchecked = plan.bounds_deferred;
  return o;
}

IndexPlan make_plan(const Tensor& x, const std::vector<IndexItem>& items, IndexKind basic_kind,
                    IndexKind advanced_kind, bool defer_bounds = false) {
  const Parsed p = parse(x, items);
  IndexPlan plan;
  plan.view = p.view;
  plan.ptr_offset = p.view.storage_offset() - x.storage_offset();
  plan.ptr_offset_bytes = plan.ptr_offset * static_cast<std::int64_t>(x.element_size());
  plan.needs_mask_compaction = p.mask;
  plan.temp_memory_bytes = p.temp_bytes;
  if (p.indices.empty()) {
    plan.kind = basic_kind;
    plan.result_shape = p.view.shape();
    plan.result_strides = p.view.strides();
    return plan;
  }
  plan.kind = advanced_kind;
  plan_advanced(p, plan, defer_bounds);
  if (advanced_kind == IndexKind::kGather) {
    plan.result_strides = contiguous_strides(plan.result_shape);
    plan.temp_memory_bytes += static_cast<std::size_t>(checked_nbytes(plan.result_shape, x.element_size(), "index"));
  } else {
    const Operands o = operands(plan);
    plan.result_strides.assign(o.restrided.strides, o.restrided.strides + o.restrided.ndim);
  }
  return plan;
}

// Drops leading size-1 dims of a value that has more dims than the target
// (NumPy accepts x[0] = ones((1, 3)) for a (3,) target).
Tensor strip_leading_ones(Tensor v, std::size_t target_dims) {
  while (static_cast<std::size_t>(v.dim()) > target_dims && v.size(0) == 1) v = v.squeeze(0);
  return v;
}

}  // namespace

std::string IndexItem::str() const {
  std::ostringstream os;
  if (is_int()) os << as_int();
  else if (is_bool()) os << (as_bool() ? "True" : "False");
  else if (is_ellipsis()) os << "...";
  else if (is_new_axis()) os << "None";
  else if (is_slice()) {
    const Slice& s = as_slice();
    if (s.start) os << *s.start;
    os << ':';
    if (s.stop) os << *s.stop;
    if (s.step) os << ':' << *s.step;
  } else {
    os << "tensor(shape=" << detail::shape_str(as_tensor().shape()) << ", dtype=" << as_tensor().dtype() << ")";
  }
  return os.str();
}

const char* index_kind_name(IndexKind k) noexcept {
  switch (k) {
    case IndexKind::kView: return "VIEW";
    case IndexKind::kGather: return "GATHER";
    case IndexKind::kScatter: return "SCATTER";
    case IndexKind::kCopy: return "COPY";
    case IndexKind::kFill: return "FILL";
  }
  return "?";
}

IndexPlan plan_index(const Tensor& x, const std::vector<IndexItem>& items) {
  return make_plan(x, items, IndexKind::kView, IndexKind::kGather);
}

IndexPlan plan_index_put(const Tensor& x, const std::vector<IndexItem>& items, bool value_is_scalar) {
  return make_plan(x, items, value_is_scalar ? IndexKind::kFill : IndexKind::kCopy, IndexKind::kScatter);
}

namespace {

// Note [Fused mask selection]: x[mask] with one bool mask whose shape equals
// x's leading dims (the whole shape, or the first k dims selecting whole
// trailing rows) is a compaction: count = sum(mask) (one device->host read,
// the result size depends on the data), then the masked_select kernel
// copies the selected rows in order. The general path would write the
// [count, k] int64 coordinates (nonzero) and gather through k index
// tensors: for a full float32 mask that is 4x more bytes written than the
// result itself. Returns an undefined tensor when the fast path does not
// apply (the general path then gives the same result).
Tensor try_masked_select(const Tensor& x, const std::vector<IndexItem>& items) {
  if (items.size() != 1 || !items[0].is_tensor()) return {};
  const Tensor& mask = items[0].as_tensor();
  if (!mask.defined() || !x.defined() || mask.dtype() != DType::kBool || mask.dim() < 1 || mask.dim() > x.dim() ||
      mask.device() != x.device())
    return {};
  for (std::int64_t d = 0; d < mask.dim(); ++d) {
    if (mask.size(d) != x.size(d)) return {};  // incl. NumPy's size-0 mask dims: general path
  }
  const auto fn = kernels::kernels_for(x.device().type()).masked_select;
  if (fn == nullptr) return {};
  const std::int64_t n = mask.numel();
  const std::int64_t count = n == 0 ? 0 : mask.sum().item().to_int64();
  Shape shape{count};
  std::int64_t row = 1;  // a product of x's sizes: fits (Note [Size overflow])
  for (std::int64_t d = mask.dim(); d < x.dim(); ++d) {
    shape.push_back(x.size(d));
    row *= x.size(d);
  }
  Tensor out = empty(shape, TensorOptions(x.dtype(), x.device()));
  if (out.numel() == 0) return out;
  // The kernel wants dense operands; copies only when they are not.
  const Tensor src = x.is_contiguous() ? x : x.contiguous();
  const Tensor m = mask.is_contiguous() ? mask : mask.contiguous();
  kernels::StridedOperand mo, so, oo;
  mo.data = m.data_ptr();
  mo.dtype = DType::kBool;
  mo.ndim = 1;
  mo.sizes[0] = n;
  mo.strides[0] = 1;
  so.data = src.data_ptr();
  so.dtype = x.dtype();
  so.ndim = 2;
  so.sizes[0] = n;
  so.sizes[1] = row;
  so.strides[0] = row;
  so.strides[1] = 1;
  oo = so;
  oo.data = out.data_ptr();
  oo.sizes[0] = count;
  fn(detail::kernel_ctx(x.device()), oo, so, mo);
  return out;
}

// Whether index_put on x leaves the bounds check to the scatter kernel
// (Note [Asynchronous kernel errors]).
bool defers_scatter_checks(const Tensor& x) {
  return x.defined() && kernels::kernels_for(x.device().type()).scatter_checks_bounds;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<IndexItem>& items) {
  if (Tensor fused = try_masked_select(x, items); fused.defined()) return fused;
  const bool defer = x.defined() && kernels::kernels_for(x.device().type()).gather_checks_bounds;  // Note [Asynchronous kernel errors]
  const IndexPlan plan = make_plan(x, items, IndexKind::kView, IndexKind::kGather, defer);
  if (plan.kind == IndexKind::kView) return plan.view;
  Tensor out = empty(plan.result_shape, TensorOptions(x.dtype(), x.device()));
  if (out.numel() > 0) {
    auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::gather, "index (gather)");
    const Operands o = operands(plan);
    fn(detail::kernel_ctx(x.device()), detail::operand(out), o.restrided, o.args());
    if (plan.bounds_deferred && cuda::sync_index_checks()) raise_deferred_index_error(x.device());
  }
  return out;
}

void index_put(Tensor& x, const std::vector<IndexItem>& items, const Tensor& value_in, bool accumulate) {
  detail::check_defined(value_in, "index_put");
  detail::check_defined(x, "index_put");
  detail::check_writable(x, "index_put");
  detail::check_no_internal_overlap(x, "index_put");
  const IndexPlan plan = make_plan(x, items, IndexKind::kCopy, IndexKind::kScatter, defers_scatter_checks(x));
  if (plan.kind == IndexKind::kCopy) {  // copy_ handles casts, broadcasting and overlap
    Tensor view = plan.view;
    const Tensor value = strip_leading_ones(value_in, static_cast<std::size_t>(view.dim()));
    if (accumulate) view.add_(value);
    else view.copy_(value);
    return;
  }
  Tensor value = strip_leading_ones(value_in, plan.result_shape.size());
  GENESIS_CHECK(broadcast_shapes(plan.result_shape, value.shape()) == plan.result_shape, "shape mismatch: value tensor of shape ",
                detail::shape_str(value_in.shape()), " cannot be broadcast to indexing result of shape ",
                detail::shape_str(plan.result_shape));
  if (value.device() != x.device() || value.dtype() != x.dtype()) {
    value = value.to(x.device(), x.dtype());
  } else if (detail::may_overlap(x, value)) {
    value = value.clone();  // reads must not see this assignment's writes
  }
  if (detail::shape_numel(plan.result_shape) == 0) return;
  auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::scatter, "index_put (scatter)");
  const Operands o = operands(plan);
  fn(detail::kernel_ctx(x.device()), o.restrided, detail::operand(value, plan.result_shape), o.args(), accumulate);
  if (plan.bounds_deferred && cuda::sync_index_checks()) raise_deferred_index_error(x.device());
}

void index_put(Tensor& x, const std::vector<IndexItem>& items, Scalar value, bool accumulate) {
  detail::check_defined(x, "index_put");
  detail::check_writable(x, "index_put");
  check_fits(value, x.dtype());
  const IndexPlan plan = make_plan(x, items, IndexKind::kFill, IndexKind::kScatter, defers_scatter_checks(x));
  if (plan.kind == IndexKind::kFill) {
    Tensor view = plan.view;
    if (accumulate) view.add_(value);
    else view.fill_(value);
    return;
  }
  if (detail::shape_numel(plan.result_shape) == 0) return;
  auto fn = detail::kernel_entry(x.device(), &kernels::KernelTable::scatter, "index_put (scatter)");
  const Operands o = operands(plan);
  fn(detail::kernel_ctx(x.device()), o.restrided, detail::scalar_operand(value, x.dtype(), plan.result_shape), o.args(),
     accumulate);
  if (plan.bounds_deferred && cuda::sync_index_checks()) raise_deferred_index_error(x.device());
}

Tensor Tensor::operator[](const std::vector<IndexItem>& items) const { return index(*this, items); }
Tensor Tensor::index_with_tensor(const Tensor& idx) const { return index(*this, {IndexItem(idx)}); }
Tensor& Tensor::index_put_(const std::vector<IndexItem>& items, const Tensor& value, bool accumulate) {
  index_put(*this, items, value, accumulate);
  return *this;
}
Tensor& Tensor::index_put_(const std::vector<IndexItem>& items, Scalar value, bool accumulate) {
  index_put(*this, items, value, accumulate);
  return *this;
}

}  // namespace genesis
