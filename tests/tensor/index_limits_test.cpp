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

}  // namespace
}  // namespace genesis
