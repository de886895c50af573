// Slicing and NumPy indexing at the edges of int64 and of what an index
// expression may hold: the cases the index planner's fuzz target
// (fuzz/index_planner.cpp) found, each checked against NumPy's answer.
#include <gtest/gtest.h>

#include <limits>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

// A step of INT64_MIN cannot be negated in int64; NumPy (whose Python slice
// clamps it to -INT64_MAX) takes one element: the last, or the start.
TEST(IndexLimits, SliceStepInt64Min) {
  const Tensor x = arange(5);
  EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, kMin).tolist<int>(), (std::vector<int>{4}));
  EXPECT_EQ(x.slice(0, 0, std::nullopt, kMin).tolist<int>(), (std::vector<int>{0}));
  EXPECT_EQ(x.slice(0, 3, 1, kMin).tolist<int>(), (std::vector<int>{3}));
  EXPECT_EQ(x.slice(0, 1, 3, kMin).numel(), 0);
  EXPECT_EQ(index(x, {Slice(None, None, kMin)}).tolist<int>(), (std::vector<int>{4}));
  EXPECT_EQ(arange(0).slice(0, std::nullopt, std::nullopt, kMin).numel(), 0);
}

// 0-d boolean indices (Python's True and False) broadcast together into one
// result dim, of length 0 if any is false (NumPy's answers in the comments).
// Each used to add a dim of its own to the intermediate view, so 14 of them
// on a 3-d tensor passed the 16-dim limit.
TEST(IndexLimits, ManyZeroDimMasksShareOneAxis) {
  const Tensor x = arange(24).reshape({2, 3, 4});
  const IndexItem all{Slice(None, None, None)};
  const std::vector<IndexItem> fourteen_false(14, IndexItem(false));
  const std::vector<IndexItem> fourteen_true(14, IndexItem(true));
  EXPECT_EQ(index(x, fourteen_false).shape(), (Shape{0, 2, 3, 4}));       // a[(False,)*14]
  const Tensor t = index(x, fourteen_true);                               // a[(True,)*14]
  EXPECT_EQ(t.shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(t.reshape({-1}).tolist<std::int64_t>(), x.reshape({-1}).tolist<std::int64_t>());
  EXPECT_EQ(index(x, {all, true, all, false}).shape(), (Shape{0, 2, 3, 4}));  // not adjacent: in front
  EXPECT_EQ(index(x, {true, std::int64_t{0}, false}).shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(index(x, {std::int64_t{0}, true, std::int64_t{1}, false}).shape(), (Shape{0, 4}));
  EXPECT_EQ(index(x, {all, true, true}).shape(), (Shape{2, 1, 3, 4}));       // adjacent: in place
  const Tensor u = index(x, {true, all, true, std::int64_t{1}});              // (1, 2, 4)
  EXPECT_EQ(u.shape(), (Shape{1, 2, 4}));
  EXPECT_EQ(u.reshape({-1}).tolist<std::int64_t>(), (std::vector<std::int64_t>{4, 5, 6, 7, 16, 17, 18, 19}));
}

}  // namespace
}  // namespace genesis
