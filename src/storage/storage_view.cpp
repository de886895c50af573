// StorageView: bounds are checked once, at construction, so that data_ptr()
// and everything built on a view can trust them.
#include "genesis/storage/storage_view.h"

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"

namespace genesis {
namespace {

std::string dims(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    if (i > 0) step = checked_mul(step, shape[i] > 0 ? shape[i] : 1, "contiguous_strides");
  }
  return s;
}

StorageView::StorageView(Storage base) : StorageView(base, 0, base.shape(), contiguous_strides(base.shape())) {}

StorageView::StorageView(Storage base, std::int64_t offset, std::vector<std::int64_t> shape,
                         std::vector<std::int64_t> stride)
    : base_(std::move(base)), offset_(offset), shape_(std::move(shape)), stride_(std::move(stride)) {
  GENESIS_CHECK(base_.defined(), "StorageView: the base storage is null");
  GENESIS_CHECK(shape_.size() == stride_.size(), "StorageView: shape ", dims(shape_), " has ", shape_.size(),
                " dimensions but stride ", dims(stride_), " has ", stride_.size());
  GENESIS_CHECK(offset_ >= 0, "StorageView: offset must be >= 0, got ", offset_);
  // Extent in __int128 so that absurd shapes or strides cannot wrap around
  // into something that looks in bounds.
  __int128 count = 1, lo = offset_, hi = offset_;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    GENESIS_CHECK(shape_[i] >= 0, "StorageView: dimension ", i, " of shape ", dims(shape_), " is negative");
    count *= shape_[i];
    GENESIS_CHECK(count <= INT64_MAX, "StorageView: shape ", dims(shape_), " has too many elements");
  }
  numel_ = static_cast<std::int64_t>(count);
  if (numel_ == 0) return;
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    const __int128 reach = static_cast<__int128>(shape_[i] - 1) * stride_[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const std::int64_t base_numel = base_.numel();
  GENESIS_CHECK(lo >= 0 && hi < base_numel, "StorageView: offset ", offset_, ", shape ", dims(shape_), " and stride ",
                dims(stride_), " reach elements [", static_cast<long long>(lo), ", ",
                static_cast<long long>(hi), "] but the base has ", base_numel, " elements");
}

void* StorageView::data_ptr() const {
  auto* p = static_cast<char*>(base_.data_ptr());
  return p == nullptr ? nullptr : p + offset_ * static_cast<std::int64_t>(base_.itemsize());
}

bool StorageView::is_contiguous() const noexcept {
  if (numel_ == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (stride_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

}  // namespace genesis
