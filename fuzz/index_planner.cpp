// Fuzz target: NumPy indexing (plan_index, index, index_put in
// src/tensor/index.cpp) against a slow reference model of NumPy's rules
// (fuzz/index_reference.h).
//
// The bytes choose a tensor (up to 4 dims of up to 4 elements, laid out
// contiguously, transposed, or with a step in its last dim and an offset)
// and an index expression of up to 14 items (enough to pass the 16 dims a
// result may have): integers, slices with any bounds and steps (extreme ones
// included, and 0, which must be rejected), None, Ellipsis, Python bools,
// and integer, boolean and float index tensors of up to 3 dims. The
// tensor's storage holds 0, 1, 2, ..., so every element read names its own
// storage position, and the checks are exact:
//   * the plan, index() and index_put() raise a genesis::Error exactly when
//     NumPy would (a Genesis-only limit aside: more than 16 result dims);
//   * otherwise plan.result_shape and the result's shape are NumPy's, and
//     the result holds the elements NumPy's would;
//   * index_put of a scalar writes exactly those positions, and with
//     accumulate adds once per occurrence (np.add.at), nothing else changes.
// Anything else (a crash, a sanitizer report, an exception that is not a
// genesis::Error, a wrong shape or value) aborts, which libFuzzer reports.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/creation.h"
#include "genesis/tensor/index.h"
#include "genesis/tensor/tensor.h"
#include "index_reference.h"

namespace {

using genesis::DType;
using genesis::IndexItem;
using genesis::Tensor;
using genesis_fuzz::RefItem;
using genesis_fuzz::Shape;

std::string describe(const Shape& shape, int layout, const std::vector<RefItem>& items) {
  static constexpr const char* kLayouts[] = {"contiguous", "transposed", "stepped"};
  std::string s = std::string(kLayouts[layout]) + " x of shape (";
  for (auto d : shape) s += std::to_string(d) + ",";
  s += ") indexed by [";
  for (const auto& it : items) {
    switch (it.kind) {
      case RefItem::kInt: s += std::to_string(it.value); break;
      case RefItem::kSlice:
        s += (it.start ? std::to_string(*it.start) : "") + ":" + (it.stop ? std::to_string(*it.stop) : "") + ":" +
             (it.step ? std::to_string(*it.step) : "");
        break;
      case RefItem::kNone: s += "None"; break;
      case RefItem::kEllipsis: s += "..."; break;
      case RefItem::kBool: s += it.flag ? "True" : "False"; break;
      case RefItem::kIntArray:
      case RefItem::kBoolArray:
      case RefItem::kFloatArray: {
        s += it.kind == RefItem::kIntArray ? "int" : it.kind == RefItem::kBoolArray ? "bool" : "float";
        s += "(shape=(";
        for (auto d : it.shape) s += std::to_string(d) + ",";
        s += "), values=[";
        for (auto v : it.values) s += std::to_string(v) + ",";
        s += "])";
        break;
      }
    }
    s += ", ";
  }
  return s + "]";
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (auto e : v) s += std::to_string(e) + ",";
  return s + "]";
}

// Reported as a crash: what differed, the input, and (when given) the
// elements Genesis produced and those NumPy would.
[[noreturn]] void fail(const char* what, const Shape& shape, int layout, const std::vector<RefItem>& items,
                       const std::vector<std::int64_t>& got = {}, const std::vector<std::int64_t>& want = {}) {
  std::fprintf(stderr, "index planner mismatch: %s\n  %s\n", what, describe(shape, layout, items).c_str());
  if (!got.empty() || !want.empty()) {
    std::fprintf(stderr, "  got  %s\n  want %s\n", join(got).c_str(), join(want).c_str());
  }
  std::abort();
}

std::int64_t pick_bound(FuzzedDataProvider& in) {
  static constexpr std::int64_t kExtremes[] = {std::numeric_limits<std::int64_t>::min(),
                                               std::numeric_limits<std::int64_t>::min() + 1,
                                               std::numeric_limits<std::int64_t>::max(), -(std::int64_t{1} << 40),
                                               std::int64_t{1} << 40};
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) return kExtremes[in.ConsumeIntegralInRange<int>(0, 4)];
  return in.ConsumeIntegralInRange<std::int64_t>(-6, 6);
}

std::optional<std::int64_t> maybe_bound(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return std::nullopt;
  return pick_bound(in);
}

Shape array_shape(FuzzedDataProvider& in, const Shape& xs, std::int64_t dim, bool match) {
  const int rank = in.ConsumeIntegralInRange<int>(0, 3);
  Shape s;
  for (int k = 0; k < rank; ++k) {
    const auto at = static_cast<std::size_t>(dim + k);
    if (match && at < xs.size()) s.push_back(xs[at]);
    else s.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, 3));
  }
  return s;
}

struct Made {
  Tensor store;  // 1-d int64 storage holding 0, 1, 2, ...
  Tensor x;      // the indexed view of it
};

Made make_tensor(const Shape& shape, int layout) {
  std::int64_t numel = 1;
  for (auto d : shape) numel *= d;
  const auto nd = static_cast<std::int64_t>(shape.size());
  Made m;
  if (layout == 1 && nd >= 2) {  // transposed
    Shape rev(shape.rbegin(), shape.rend());
    Shape dims;
    for (std::int64_t d = nd - 1; d >= 0; --d) dims.push_back(d);
    m.store = genesis::arange(numel, DType::kInt64);
    m.x = m.store.view(rev).permute(dims);
  } else if (layout == 2 && nd >= 1) {  // every other element of the last dim, from an offset of 1
    Shape wide = shape;
    wide.back() = 2 * shape.back() + 1;
    std::int64_t wide_numel = 1;
    for (auto d : wide) wide_numel *= d;
    m.store = genesis::arange(wide_numel, DType::kInt64);
    m.x = m.store.view(wide).slice(nd - 1, 1, std::nullopt, 2);
  } else {
    m.store = genesis::arange(numel, DType::kInt64);
    m.x = m.store.view(shape);
  }
  return m;
}

std::vector<IndexItem> to_items(const std::vector<RefItem>& refs) {
  std::vector<IndexItem> items;
  for (const auto& r : refs) {
    switch (r.kind) {
      case RefItem::kInt: items.emplace_back(r.value); break;
      case RefItem::kSlice: items.emplace_back(genesis::Slice(r.start, r.stop, r.step)); break;
      case RefItem::kNone: items.emplace_back(genesis::None); break;
      case RefItem::kEllipsis: items.emplace_back(genesis::Ellipsis); break;
      case RefItem::kBool: items.emplace_back(r.flag); break;
      case RefItem::kIntArray:
      case RefItem::kBoolArray:
      case RefItem::kFloatArray: {
        // The dtype of an integer array rides in values' storage: kept in
        // RefItem::value (values always fit it).
        const DType dt = r.kind == RefItem::kBoolArray    ? DType::kBool
                         : r.kind == RefItem::kFloatArray ? DType::kFloat32
                                                          : static_cast<DType>(r.value);
        items.emplace_back(genesis::tensor(r.values, r.shape, dt));
        break;
      }
    }
  }
  return items;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const int nd = in.ConsumeIntegralInRange<int>(0, 4);
  Shape xs;
  for (int d = 0; d < nd; ++d) xs.push_back(in.ConsumeIntegralInRange<std::int64_t>(0, 4));
  const int layout = in.ConsumeIntegralInRange<int>(0, 2);
  const int count = in.ConsumeIntegralInRange<int>(0, 14);
  std::vector<RefItem> refs;
  std::int64_t dim = 0;  // the x dim the next item would index, roughly (Ellipsis ignored)
  static constexpr DType kIntTypes[] = {DType::kInt64, DType::kInt32, DType::kInt16, DType::kUInt8};
  for (int i = 0; i < count; ++i) {
    RefItem r;
    r.kind = static_cast<RefItem::Kind>(in.ConsumeIntegralInRange<int>(0, 7));
    switch (r.kind) {
      case RefItem::kInt: r.value = pick_bound(in); ++dim; break;
      case RefItem::kSlice:
        r.start = maybe_bound(in);
        r.stop = maybe_bound(in);
        r.step = maybe_bound(in);
        ++dim;
        break;
      case RefItem::kBool: r.flag = in.ConsumeBool(); break;
      case RefItem::kIntArray: {
        r.shape = array_shape(in, xs, dim, false);
        const DType dt = kIntTypes[in.ConsumeIntegralInRange<int>(0, 3)];
        r.value = static_cast<std::int64_t>(dt);
        std::int64_t n = 1;
        for (auto d : r.shape) n *= d;
        for (std::int64_t k = 0; k < n; ++k) {
          std::int64_t v = dt == DType::kInt64 ? pick_bound(in) : in.ConsumeIntegralInRange<std::int64_t>(-6, 6);
          if (dt == DType::kUInt8 && v < 0) v = -v;
          r.values.push_back(v);
        }
        ++dim;
        break;
      }
      case RefItem::kBoolArray:
      case RefItem::kFloatArray: {
        r.shape = array_shape(in, xs, dim, in.ConsumeBool());
        std::int64_t n = 1;
        for (auto d : r.shape) n *= d;
        for (std::int64_t k = 0; k < n; ++k) r.values.push_back(in.ConsumeBool() ? 1 : 0);
        dim += r.kind == RefItem::kBoolArray ? static_cast<std::int64_t>(r.shape.size()) : 1;
        break;
      }
      case RefItem::kNone:
      case RefItem::kEllipsis: break;
    }
    refs.push_back(std::move(r));
  }
  const bool accumulate = in.ConsumeBool();

  Made made = make_tensor(xs, layout);
  const genesis_fuzz::RefResult want = genesis_fuzz::reference_index(made.x.shape(), made.x.strides(),
                                                                     made.x.storage_offset(), refs);
  const std::vector<IndexItem> items = to_items(refs);

  // plan_index and index().
  bool raised = false;
  try {
    const genesis::IndexPlan plan = genesis::plan_index(made.x, items);
    if (want.error) fail("plan_index accepted an expression NumPy rejects", xs, layout, refs);
    if (plan.result_shape != want.shape) fail("plan_index: wrong result shape", xs, layout, refs);
    const Tensor got = genesis::index(made.x, items);
    if (got.shape() != want.shape) fail("index: wrong result shape", xs, layout, refs);
    const std::vector<std::int64_t> values = got.tolist<std::int64_t>();
    if (values != want.positions) fail("index: wrong elements", xs, layout, refs, values, want.positions);
  } catch (const genesis::Error&) {
    raised = true;
  }
  if (raised && !want.error) fail("plan_index or index raised on an expression NumPy accepts", xs, layout, refs);

  // index_put of a scalar into a fresh copy of the same layout.
  Made put = make_tensor(xs, layout);
  const std::vector<std::int64_t> before = put.store.tolist<std::int64_t>();
  raised = false;
  try {
    genesis::index_put(put.x, items, genesis::Scalar(accumulate ? 1000 : -1), accumulate);
  } catch (const genesis::Error&) {
    raised = true;
  }
  if (raised != want.error) fail(raised ? "index_put raised on an expression NumPy accepts"
                                        : "index_put accepted an expression NumPy rejects",
                                 xs, layout, refs);
  if (!raised) {
    std::vector<std::int64_t> expect = before;
    std::map<std::int64_t, int> hits;
    for (auto p : want.positions) ++hits[p];
    for (const auto& [p, n] : hits) {
      expect[static_cast<std::size_t>(p)] = accumulate ? before[static_cast<std::size_t>(p)] + 1000 * n : -1;
    }
    const std::vector<std::int64_t> after = put.store.tolist<std::int64_t>();
    if (after != expect) fail("index_put wrote the wrong elements", xs, layout, refs, after, expect);
  }
  return 0;
}
