// Shape operations: views (view, transpose, permute, squeeze, expand,
// slice, select, ...) and the copies that combine tensors (cat, stack).
#include "genesis/tensor/shape_ops.h"

#include <algorithm>
#include <numeric>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/storage/storage_view.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/promotion.h"
#include "tensor_internal.h"

namespace genesis {

using detail::shape_str;
using detail::wrap_dim;

Shape infer_size(const Shape& shape, std::int64_t numel) {
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      GENESIS_CHECK(!infer, "only one dimension can be inferred (-1) in shape ", shape_str(shape));
      infer = i;
    } else {
      GENESIS_CHECK(shape[i] >= 0, "invalid shape dimension ", shape[i], " in ", shape_str(shape));
      // Overflowing means more elements than any tensor has (Note [Size overflow]).
      GENESIS_CHECK(mul_fits(known, shape[i], known), "shape ", shape_str(shape), " is invalid for input of size ",
                    numel, " (its sizes multiply to more than 2^63-1)");
    }
  }
  Shape out = shape;
  if (infer) {
    GENESIS_CHECK(known != 0 && numel % known == 0, "shape ", shape_str(shape), " is invalid for input of size ",
                  numel);
    out[*infer] = numel / known;
  } else {
    GENESIS_CHECK(known == numel, "shape ", shape_str(shape), " is invalid for input of size ", numel);
  }
  (void)checked_numel(out);  // sizes 0 hide a product of the others that may not fit
  return out;
}

std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
  Shape new_strides(new_shape.size(), 1);
  if (old_shape.empty()) return new_strides;  // a 0-d tensor: every new dim is 1
  const std::int64_t numel = checked_numel(old_shape);
  if (numel == 0) {
    if (old_shape == new_shape) return old_strides;
    return contiguous_strides(new_shape);
  }
  // PyTorch's computeStride: walk chunks of old dims that are contiguous with
  // each other and match them with runs of new dims of the same numel.
  auto view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (auto tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    // Products of sizes within numel cannot overflow; products with a
    // stride can only for absurd strides of size-1 dims: such a layout is
    // reported as not viewable (reshape copies it then).
    tensor_numel *= old_shape[static_cast<std::size_t>(tensor_d)];
    std::int64_t span = 0;
    if (!mul_fits(tensor_numel, chunk_base_stride, span)) return std::nullopt;
    if (tensor_d == 0 || (old_shape[static_cast<std::size_t>(tensor_d - 1)] != 1 &&
                          old_strides[static_cast<std::size_t>(tensor_d - 1)] != span)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[static_cast<std::size_t>(view_d)] == 1)) {
        if (!mul_fits(view_numel, chunk_base_stride, new_strides[static_cast<std::size_t>(view_d)])) return std::nullopt;
        if (!mul_fits(view_numel, new_shape[static_cast<std::size_t>(view_d)], view_numel)) return std::nullopt;
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[static_cast<std::size_t>(tensor_d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor Tensor::view(const Shape& shape_in) const {
  const Shape shape = infer_size(shape_in, numel());
  auto strides_new = view_strides(this->shape(), strides(), shape);
  GENESIS_CHECK(strides_new.has_value(), "view size is not compatible with input tensor's size and stride: cannot view shape ",
                shape_str(this->shape()), " with strides ", shape_str(strides()), " as ", shape_str(shape),
                " (at least one dimension spans across two contiguous subspaces). Use reshape(...) instead.");
  return detail::make_view(*this, shape, *strides_new, storage_offset());
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  const Shape shape = infer_size(shape_in, numel());
  if (auto s = view_strides(this->shape(), strides(), shape)) return detail::make_view(*this, shape, *s, storage_offset());
  return clone().view(shape);
}

Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  const std::int64_t n = dim();
  if (n == 0) {
    wrap_dim(dim0, 0);
    wrap_dim(dim1, 0);
    return *this;
  }
  const auto a = static_cast<std::size_t>(wrap_dim(dim0, n)), b = static_cast<std::size_t>(wrap_dim(dim1, n));
  Shape sh = shape(), st = strides();
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::permute(const Shape& dims) const {
  const std::int64_t n = dim();
  GENESIS_CHECK(static_cast<std::int64_t>(dims.size()) == n, "permute: the number of dims (", dims.size(),
                ") does not match the tensor's dimensions (", n, ")");
  Shape sh(static_cast<std::size_t>(n)), st(static_cast<std::size_t>(n));
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<std::size_t>(wrap_dim(dims[i], n, false));
    GENESIS_CHECK(!seen[d], "permute: dim ", d, " appears more than once in ", shape_str(dims));
    seen[d] = true;
    sh[i] = shape()[d];
    st[i] = strides()[d];
  }
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::T() const {
  Shape dims(static_cast<std::size_t>(dim()));
  std::iota(dims.rbegin(), dims.rend(), 0);
  return permute(dims);
}

Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const std::int64_t s = wrap_dim(start_dim, dim()), e = wrap_dim(end_dim, dim());
  GENESIS_CHECK(s <= e, "flatten: start_dim (", start_dim, ") must not come after end_dim (", end_dim, ")");
  Shape sh;
  for (std::int64_t d = 0; d < s; ++d) sh.push_back(shape()[static_cast<std::size_t>(d)]);
  std::int64_t merged = 1;
  for (std::int64_t d = s; d <= e; ++d) merged *= shape()[static_cast<std::size_t>(d)];
  sh.push_back(merged);
  for (std::int64_t d = e + 1; d < dim(); ++d) sh.push_back(shape()[static_cast<std::size_t>(d)]);
  return reshape(sh);
}

Tensor Tensor::squeeze() const {
  Shape sh, st;
  for (std::size_t d = 0; d < shape().size(); ++d) {
    if (shape()[d] != 1) {
      sh.push_back(shape()[d]);
      st.push_back(strides()[d]);
    }
  }
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::squeeze(std::int64_t d_in) const {
  if (dim() == 0) {
    wrap_dim(d_in, 0);
    return *this;
  }
  const auto d = static_cast<std::size_t>(wrap_dim(d_in, dim()));
  if (shape()[d] != 1) return *this;
  Shape sh = shape(), st = strides();
  sh.erase(sh.begin() + static_cast<std::ptrdiff_t>(d));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(d));
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::unsqueeze(std::int64_t d_in) const {
  const auto d = static_cast<std::size_t>(wrap_dim(d_in, dim() + 1, false));
  Shape sh = shape(), st = strides();
  // A size-1 dim may carry any stride (a slice with a huge step): its
  // product may not fit, and then any stride will do for the new size-1 dim.
  std::int64_t new_stride = 1;
  if (d < sh.size() && !mul_fits(sh[d], st[d], new_stride)) new_stride = st[d];
  sh.insert(sh.begin() + static_cast<std::ptrdiff_t>(d), 1);
  st.insert(st.begin() + static_cast<std::ptrdiff_t>(d), new_stride);
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::expand(const Shape& target) const {
  GENESIS_CHECK(target.size() >= shape().size(), "expand: the target shape ", shape_str(target),
                " has fewer dimensions than the tensor's shape ", shape_str(shape()));
  const std::size_t lead = target.size() - shape().size();
  Shape sh(target.size()), st(target.size());
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      GENESIS_CHECK(target[i] >= 0, "expand: the new leading dimension ", i, " of ", shape_str(target),
                    " cannot be -1 or negative");
      sh[i] = target[i];
      st[i] = 0;
      continue;
    }
    const std::int64_t have = shape()[i - lead];
    const std::int64_t want = target[i] == -1 ? have : target[i];
    GENESIS_CHECK(have == want || have == 1, "expand: the expanded size (", want, ") must match the existing size (",
                  have, ") at non-singleton dimension ", i, ". Target sizes: ", shape_str(target),
                  ". Tensor sizes: ", shape_str(shape()));
    sh[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  return detail::make_view(*this, sh, st, storage_offset());
}

Tensor Tensor::slice(std::int64_t d_in, std::optional<std::int64_t> start_in, std::optional<std::int64_t> stop_in,
                     std::int64_t step) const {
  GENESIS_CHECK(step != 0, "slice step cannot be zero");
  const auto d = static_cast<std::size_t>(wrap_dim(d_in, dim(), false));
  const std::int64_t len = shape()[d];
  std::int64_t start, stop, count;
  // Python's PySlice_AdjustIndices.
  if (step > 0) {
    start = start_in.value_or(0);
    stop = stop_in.value_or(len);
    if (start < 0) start = std::max<std::int64_t>(start + len, 0);
    start = std::min(start, len);
    if (stop < 0) stop = std::max<std::int64_t>(stop + len, 0);
    stop = std::min(stop, len);
    count = stop > start ? (stop - start - 1) / step + 1 : 0;
  } else {
    start = start_in.value_or(len - 1);
    stop = stop_in.has_value() ? *stop_in : -1;
    if (start_in.has_value() && start < 0) start = std::max<std::int64_t>(start + len, -1);
    start = std::min(start, len - 1);
    if (stop_in.has_value()) {
      if (stop < 0) stop = std::max<std::int64_t>(stop + len, -1);
      stop = std::min(stop, len - 1);
    }
    // -step overflows for a step of INT64_MIN; as unsigned it is exact (2^63).
    const std::uint64_t down = 0 - static_cast<std::uint64_t>(step);
    count = start > stop ? static_cast<std::int64_t>(static_cast<std::uint64_t>(start - stop - 1) / down) + 1 : 0;
  }
  Shape sh = shape(), st = strides();
  sh[d] = count;
  // A huge step leaves at most one element, whose stride does not matter:
  // keep the old one rather than a wrapped product.
  if (!mul_fits(strides()[d], step, st[d])) {
    GENESIS_CHECK(count <= 1, "slice: stride ", strides()[d], " * step ", step, " overflows int64");
    st[d] = strides()[d];
  }
  std::int64_t offset = storage_offset() + (count > 0 ? start * strides()[d] : 0);
  // An empty slice starts where its first element would be (x[4:] of four
  // elements at offset 4, as PyTorch and NumPy place it), when that is
  // inside the storage or just past its end; elsewhere it keeps the base.
  if (count == 0 && step > 0) {
    std::int64_t moved = 0, at = 0;
    const auto capacity = static_cast<std::int64_t>(storage().nbytes() / dtype_size(storage().dtype()));
    if (mul_fits(start, strides()[d], moved) && add_fits(storage_offset(), moved, at) && at >= 0 && at <= capacity)
      offset = at;
  }
  return detail::make_view(*this, sh, st, offset);
}

Tensor Tensor::select(std::int64_t d_in, std::int64_t index) const {
  GENESIS_CHECK_INDEX(dim() > 0, "select: cannot index a 0-d tensor (invalid index of a 0-dim tensor)");
  const auto d = static_cast<std::size_t>(wrap_dim(d_in, dim(), false));
  const std::int64_t len = shape()[d];
  GENESIS_CHECK_INDEX(index >= -len && index < len, "index ", index, " is out of bounds for dimension ", d,
                      " with size ", len);
  if (index < 0) index += len;
  Shape sh = shape(), st = strides();
  sh.erase(sh.begin() + static_cast<std::ptrdiff_t>(d));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(d));
  return detail::make_view(*this, sh, st, storage_offset() + index * strides()[d]);
}

Tensor Tensor::narrow(std::int64_t d_in, std::int64_t start, std::int64_t length) const {
  const auto d = wrap_dim(d_in, dim(), false);
  const std::int64_t len = shape()[static_cast<std::size_t>(d)];
  GENESIS_CHECK(length >= 0, "narrow: length must be non-negative, got ", length);
  if (start < 0) start += len;
  // length <= len - start, not start + length <= len: that sum may wrap
  // around to a small number (Note [Size overflow]).
  GENESIS_CHECK(start >= 0 && start <= len && length >= 0 && length <= len - start, "narrow: start (", start,
                ") + length (", length, ") exceeds dimension size (", len, ")");
  return slice(d, start, start + length, 1);
}

std::vector<Tensor> Tensor::split(std::int64_t split_size, std::int64_t d_in) const {
  GENESIS_CHECK(split_size > 0 || (split_size == 0 && dim() > 0 && size(d_in) == 0),
                "split expects split_size to be positive, got ", split_size);
  const auto d = wrap_dim(d_in, dim(), false);
  const std::int64_t len = size(d);
  std::vector<Tensor> out;
  if (len == 0) {
    out.push_back(*this);
    return out;
  }
  // Steps by `len - s > split_size`, never past len: s + split_size may not fit.
  for (std::int64_t s = 0;;) {
    const std::int64_t n = std::min(split_size, len - s);
    out.push_back(narrow(d, s, n));
    if (len - s <= split_size) break;
    s += split_size;
  }
  return out;
}

std::vector<Tensor> Tensor::split(const std::vector<std::int64_t>& sizes, std::int64_t d_in) const {
  const auto d = wrap_dim(d_in, dim(), false);
  std::int64_t total = 0;
  for (auto s : sizes) {
    GENESIS_CHECK(s >= 0, "split: negative section size ", s);
    GENESIS_CHECK(add_fits(total, s, total), "split: the sizes ", shape_str(sizes), " sum to more than 2^63-1");
  }
  GENESIS_CHECK(total == size(d), "split: the sizes ", shape_str(sizes), " sum to ", total,
                " but dimension ", d, " has size ", size(d));
  std::vector<Tensor> out;
  std::int64_t start = 0;
  for (auto s : sizes) {
    out.push_back(narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(std::int64_t chunks, std::int64_t d_in) const {
  GENESIS_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  const auto d = wrap_dim(d_in, dim(), false);
  const std::int64_t len = size(d);
  const std::int64_t each = len / chunks + (len % chunks != 0 ? 1 : 0);  // len + chunks - 1 may overflow
  if (each == 0) return {*this};
  return split(each, d);
}

Tensor broadcast_to(const Tensor& t, const Shape& shape) { return t.expand(shape); }

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  Shape s;
  for (const auto& t : tensors) s = broadcast_shapes(s, t.shape());
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(t.expand(s));
  return out;
}

Tensor cat(const std::vector<Tensor>& all, std::int64_t d_in) {
  GENESIS_CHECK(!all.empty(), "cat: expected a non-empty list of tensors");
  for (const Tensor& t : all) detail::check_defined(t, "cat");
  // As PyTorch: an empty 1-d tensor (shape (0,), what torch.tensor([]) and
  // genesis.tensor([]) make) is left out when the others are not 1-d, so
  // that it can start an accumulation of any shape; its dtype still counts.
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  std::vector<Tensor> tensors;
  for (const Tensor& t : all) {
    if (!legacy_empty(t)) tensors.push_back(t);
  }
  const bool skip = !tensors.empty() && std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) {
    return t.dim() != 1;
  });
  if (!skip) tensors = all;
  const Tensor& first = tensors.front();
  GENESIS_CHECK(first.dim() > 0, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  const auto d = static_cast<std::size_t>(wrap_dim(d_in, first.dim(), false));
  DType dt = first.dtype();
  std::int64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_defined(t, "cat");
    GENESIS_CHECK(t.device() == first.device(), "cat: expected all tensors on one device, but tensor ", i, " is on ",
                  t.device(), " and tensor 0 on ", first.device());
    GENESIS_CHECK(t.dim() == first.dim(), "cat: tensors must have the same number of dimensions: got ", first.dim(),
                  " and ", t.dim(), " (tensor ", i, ")");
    for (std::size_t k = 0; k < t.shape().size(); ++k) {
      GENESIS_CHECK(k == d || t.shape()[k] == first.shape()[k], "cat: sizes of tensors must match except in dimension ",
                    d, ". Expected size ", first.shape()[k], " but got size ", t.shape()[k], " for tensor number ", i,
                    " in the list");
    }
    dt = promote_types(dt, t.dtype());
    GENESIS_CHECK(add_fits(total, t.shape()[d], total), "cat: the sizes along dimension ", d,
                  " add up to more than 2^63-1 (at tensor ", i, ")");
  }
  if (skip) {
    for (const Tensor& t : all) {
      if (!legacy_empty(t)) continue;
      GENESIS_CHECK(t.device() == first.device(), "cat: expected all tensors on one device, but an empty one is on ",
                    t.device(), " and the others on ", first.device());
      dt = promote_types(dt, t.dtype());
    }
  }
  Shape out_shape = first.shape();
  out_shape[d] = total;
  Tensor out = empty(out_shape, TensorOptions(dt, first.device()));
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    const std::int64_t len = t.shape()[d];
    if (len > 0) out.narrow(static_cast<std::int64_t>(d), at, len).copy_(t);
    at += len;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, std::int64_t d_in) {
  GENESIS_CHECK(!tensors.empty(), "stack expects a non-empty list of tensors");
  detail::check_defined(tensors.front(), "stack");
  const auto d = wrap_dim(d_in, tensors.front().dim() + 1, false);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    detail::check_defined(tensors[i], "stack");
    GENESIS_CHECK(tensors[i].shape() == tensors.front().shape(), "stack expects each tensor to be equal size, but got ",
                  shape_str(tensors.front().shape()), " at entry 0 and ", shape_str(tensors[i].shape()), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace genesis
