// A slow, independent model of NumPy indexing for the index planner's fuzz
// target (fuzz/index_planner.cpp): given a tensor's shape, strides and
// offset and an index expression, it says whether NumPy would raise and, if
// not, the shape of x[items] and, for every element of the result in
// row-major order, which storage element it reads.
//
// It follows NumPy's own algorithm (numpy/core/src/multiarray/mapping.c)
// rather than Genesis's plan: expand the Ellipsis into full slices; every
// index array, boolean mask (compacted to its coordinates), Python bool (a
// new axis of length 1 or 0) and, once any of those is present, every
// integer is "fancy"; the fancy indices broadcast together, and their dims
// go where the first fancy index was when the fancy entries are adjacent in
// the index list (an Ellipsis or None between them breaks that, even one
// that expands to nothing), in front otherwise. Integers are always checked
// against their dim; index arrays only when the broadcast shape has
// elements (x[[], 7] raises, x[[7], []] does not). Arithmetic is in 128
// bits, so extreme slice bounds and steps cannot overflow here.
//
// Beyond NumPy it knows Genesis's documented limits: a result of more than
// kMaxDims (16) dims is an error, so is an intermediate view of more (see
// reference_index), a float index tensor is an error (NumPy
// too), and a boolean mask dim of size 0 matches any size (NumPy does that).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace genesis_fuzz {

using Shape = std::vector<std::int64_t>;

struct RefItem {
  enum Kind { kInt, kSlice, kNone, kEllipsis, kBool, kIntArray, kBoolArray, kFloatArray };
  Kind kind = kNone;
  std::int64_t value = 0;                              // kInt
  std::optional<std::int64_t> start, stop, step;      // kSlice
  bool flag = false;                                   // kBool
  Shape shape;                                         // arrays
  std::vector<std::int64_t> values;                    // arrays, row-major (bool: 0 or 1)
};

struct RefResult {
  bool error = false;
  Shape shape;
  std::vector<std::int64_t> positions;  // storage element read by each result element, row-major
};

inline constexpr std::size_t kRefMaxDims = 16;

namespace detail {

using i128 = __int128;

inline std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Python's slice.indices(length) and the slice's length.
inline void slice_indices(const RefItem& s, std::int64_t length, i128& start, i128& step, std::int64_t& count) {
  step = s.step.value_or(1);
  const i128 len = length;
  const i128 lower = step < 0 ? -1 : 0;
  const i128 upper = step < 0 ? len - 1 : len;
  auto adjust = [&](std::optional<std::int64_t> v, i128 dflt) -> i128 {
    if (!v) return dflt;
    i128 x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  start = adjust(s.start, step < 0 ? upper : lower);
  const i128 stop = adjust(s.stop, step < 0 ? lower : upper);
  i128 n = 0;
  if (step > 0 && start < stop) n = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) n = (start - stop - 1) / (-step) + 1;
  count = static_cast<std::int64_t>(n);
}

}  // namespace detail

inline RefResult reference_index(const Shape& xs, const Shape& xst, std::int64_t xoff,
                                  const std::vector<RefItem>& items_in) {
  using detail::i128;
  RefResult err;
  err.error = true;
  // A 0-d integer array is an integer, a 0-d boolean array a Python bool.
  std::vector<RefItem> items = items_in;
  for (auto& it : items) {
    if (it.kind == RefItem::kIntArray && it.shape.empty()) {
      it.kind = RefItem::kInt;
      it.value = it.values.at(0);
    } else if (it.kind == RefItem::kBoolArray && it.shape.empty()) {
      it.kind = RefItem::kBool;
      it.flag = it.values.at(0) != 0;
    }
  }
  // Genesis-only limit: indexing builds an intermediate view that holds the
  // tensor's dims (less those a plain integer selects while no array index
  // is present), one per None, and one shared by every 0-d boolean. A view
  // of more than kMaxDims dims at any point of the scan is refused with an
  // error even where NumPy's result would fit (x of 4 dims with 14 Nones
  // around a 3-d mask).
  {
    bool advanced = false;
    for (const auto& it : items) advanced = advanced || it.kind == RefItem::kBool || it.kind == RefItem::kIntArray ||
                                            it.kind == RefItem::kBoolArray || it.kind == RefItem::kFloatArray;
    std::int64_t view = static_cast<std::int64_t>(xs.size());
    bool zero_d_axis = false;
    for (const auto& it : items) {
      if (it.kind == RefItem::kNone || (it.kind == RefItem::kBool && !zero_d_axis)) {
        zero_d_axis = zero_d_axis || it.kind == RefItem::kBool;
        if (++view > static_cast<std::int64_t>(kRefMaxDims)) return err;
      } else if (it.kind == RefItem::kInt && !advanced) {
        --view;
      }
    }
  }
  const auto n = static_cast<std::int64_t>(xs.size());
  std::int64_t consumed = 0;
  int ellipses = 0;
  bool advanced = false;
  for (const auto& it : items) {
    switch (it.kind) {
      case RefItem::kInt:
      case RefItem::kSlice: ++consumed; break;
      case RefItem::kIntArray:
      case RefItem::kFloatArray: ++consumed; advanced = true; break;
      case RefItem::kBoolArray: consumed += static_cast<std::int64_t>(it.shape.size()); advanced = true; break;
      case RefItem::kBool: advanced = true; break;
      case RefItem::kEllipsis: ++ellipses; break;
      case RefItem::kNone: break;
    }
  }
  if (ellipses > 1 || consumed > n) return err;

  struct Basic {
    std::int64_t len;
    i128 start, step;
    std::int64_t dim;  // -1: a new axis
  };
  struct Adv {
    Shape shape;
    std::vector<std::int64_t> values;
    std::int64_t dim;  // -1: the new axis of a Python bool
  };
  std::vector<Basic> basics;
  std::vector<Adv> advs;
  std::vector<std::size_t> fancy_pos;
  std::size_t insert_at = 0;
  i128 fixed = xoff;
  std::int64_t d = 0;
  auto mark_fancy = [&](std::size_t pos) {
    if (fancy_pos.empty()) insert_at = basics.size();
    fancy_pos.push_back(pos);
  };
  for (std::size_t pos = 0; pos < items.size(); ++pos) {
    const RefItem& it = items[pos];
    switch (it.kind) {
      case RefItem::kEllipsis:
        for (std::int64_t k = 0; k < n - consumed; ++k, ++d) basics.push_back({xs[d], 0, 1, d});
        break;
      case RefItem::kNone: basics.push_back({1, 0, 0, -1}); break;
      case RefItem::kSlice: {
        if (it.step.value_or(1) == 0) return err;
        Basic b{0, 0, 0, d};
        detail::slice_indices(it, xs[d], b.start, b.step, b.len);
        basics.push_back(b);
        ++d;
        break;
      }
      case RefItem::kInt: {
        const std::int64_t size = xs[d];
        if (it.value < -size || it.value >= size) return err;
        const std::int64_t i = it.value < 0 ? it.value + size : it.value;
        if (advanced) {
          mark_fancy(pos);
          advs.push_back({{}, {i}, d});
        } else {
          fixed += static_cast<i128>(i) * xst[d];
        }
        ++d;
        break;
      }
      case RefItem::kBool:
        mark_fancy(pos);
        advs.push_back({{it.flag ? 1 : 0}, it.flag ? std::vector<std::int64_t>{0} : std::vector<std::int64_t>{}, -1});
        break;
      case RefItem::kFloatArray: return err;
      case RefItem::kIntArray:
        mark_fancy(pos);
        advs.push_back({it.shape, it.values, d});
        ++d;
        break;
      case RefItem::kBoolArray: {
        const auto k = static_cast<std::int64_t>(it.shape.size());
        for (std::int64_t j = 0; j < k; ++j) {
          if (xs[d + j] != it.shape[j] && it.shape[j] != 0) return err;
        }
        mark_fancy(pos);
        std::vector<std::vector<std::int64_t>> coords(static_cast<std::size_t>(k));
        const std::int64_t total = detail::numel(it.shape);
        for (std::int64_t flat = 0; flat < total; ++flat) {
          if (it.values[static_cast<std::size_t>(flat)] == 0) continue;
          std::int64_t rem = flat;
          for (std::int64_t j = k - 1; j >= 0; --j) {
            coords[static_cast<std::size_t>(j)].push_back(rem % it.shape[j]);
            rem /= it.shape[j];
          }
        }
        for (std::int64_t j = 0; j < k; ++j) {
          auto& c = coords[static_cast<std::size_t>(j)];
          const auto count = static_cast<std::int64_t>(c.size());
          advs.push_back({{count}, std::move(c), d + j});
        }
        d += k;
        break;
      }
    }
  }
  for (; d < n; ++d) basics.push_back({xs[d], 0, 1, d});

  // The broadcast shape of the fancy indices.
  Shape bshape;
  for (const auto& a : advs) {
    const std::size_t r = std::max(bshape.size(), a.shape.size());
    Shape out(r, 1);
    for (std::size_t i = 0; i < r; ++i) {
      const std::int64_t x = i + bshape.size() >= r ? bshape[i + bshape.size() - r] : 1;
      const std::int64_t y = i + a.shape.size() >= r ? a.shape[i + a.shape.size() - r] : 1;
      if (x != y && x != 1 && y != 1) return err;
      out[i] = x == 1 ? y : x;
    }
    bshape = out;
  }
  if (!advs.empty() && detail::numel(bshape) > 0) {
    for (const auto& a : advs) {
      if (a.dim < 0) continue;
      for (auto v : a.values) {
        if (v < -xs[a.dim] || v >= xs[a.dim]) return err;
      }
    }
  }
  bool adjacent = true;
  for (std::size_t k = 1; k < fancy_pos.size(); ++k) adjacent = adjacent && fancy_pos[k] == fancy_pos[k - 1] + 1;
  if (!adjacent) insert_at = 0;
  if (advs.empty()) insert_at = basics.size();

  RefResult r;
  for (std::size_t i = 0; i < insert_at; ++i) r.shape.push_back(basics[i].len);
  for (auto s : bshape) r.shape.push_back(s);
  for (std::size_t i = insert_at; i < basics.size(); ++i) r.shape.push_back(basics[i].len);
  if (r.shape.size() > kRefMaxDims) return err;

  const std::int64_t total = detail::numel(r.shape);
  const std::size_t nb = advs.empty() ? 0 : bshape.size();
  std::vector<std::int64_t> idx(r.shape.size(), 0);
  for (std::int64_t flat = 0; flat < total; ++flat) {
    std::int64_t rem = flat;
    for (std::size_t j = r.shape.size(); j-- > 0;) {
      idx[j] = rem % r.shape[j];
      rem /= r.shape[j];
    }
    i128 off = fixed;
    for (std::size_t i = 0; i < basics.size(); ++i) {
      const std::size_t j = i < insert_at ? i : i + nb;
      const Basic& b = basics[i];
      if (b.dim >= 0) off += (b.start + static_cast<i128>(idx[j]) * b.step) * xst[static_cast<std::size_t>(b.dim)];
    }
    for (const auto& a : advs) {
      if (a.dim < 0) continue;
      // Broadcast: a's dims align with the last a.shape.size() dims of bshape.
      std::int64_t at = 0;
      for (std::size_t k = 0; k < a.shape.size(); ++k) {
        const std::size_t bj = insert_at + (nb - a.shape.size()) + k;
        at = at * a.shape[k] + (a.shape[k] == 1 ? 0 : idx[bj]);
      }
      std::int64_t v = a.values[static_cast<std::size_t>(at)];
      if (v < 0) v += xs[static_cast<std::size_t>(a.dim)];
      off += static_cast<i128>(v) * xst[static_cast<std::size_t>(a.dim)];
    }
    r.positions.push_back(static_cast<std::int64_t>(off));
  }
  return r;
}

}  // namespace genesis_fuzz
