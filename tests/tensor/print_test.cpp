// Tensor::str() against what PyTorch prints (torch/_tensor_str.py,
// default print options), with "genesis." in place of "torch." in dtypes.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "genesis/memory/device_allocators.h"
#include "genesis/tensor/api.h"

namespace genesis {
namespace {

TEST(TensorPrint, Basic) {
  EXPECT_EQ(tensor({{1.0, 2.0}, {3.0, 4.0}}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(tensor({1.5, 2.25}).str(), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(tensor({-1.5, 2.0}).str(), "tensor([-1.5000,  2.0000])");
  EXPECT_EQ(tensor({1, 2, 3}).str(), "tensor([1, 2, 3])");
  EXPECT_EQ(tensor({true, false}).str(), "tensor([ True, False])");
  EXPECT_EQ(tensor({1, 2}, DType::kInt32).str(), "tensor([1, 2], dtype=genesis.int32)");
  EXPECT_EQ(zeros({3}, DType::kFloat16).str(), "tensor([0., 0., 0.], dtype=genesis.float16)");
  EXPECT_EQ(tensor(3.0).str(), "tensor(3.)");
  EXPECT_EQ(tensor(2.5).str(), "tensor(2.5000)");
  EXPECT_EQ(tensor(7).str(), "tensor(7)");
  EXPECT_EQ(tensor({-3, 10}).str(), "tensor([-3, 10])");
  EXPECT_EQ(tensor({std::numeric_limits<std::int64_t>::max()}).str(), "tensor([9223372036854775807])");
  EXPECT_EQ(tensor(true).str(), "tensor(True)");
  std::ostringstream os;
  os << tensor({1, 2});
  EXPECT_EQ(os.str(), "tensor([1, 2])");
}

TEST(TensorPrint, Empty) {
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(zeros({2, 0}).str(), "tensor([], size=(2, 0))");
  EXPECT_EQ(zeros({0}, DType::kInt64).str(), "tensor([], dtype=genesis.int64)");
}

TEST(TensorPrint, ScientificAndNonFinite) {
  EXPECT_EQ(tensor({1e-5, 1.0}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(tensor({1.0, 10000.0}).str(), "tensor([1.0000e+00, 1.0000e+04])");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(tensor({nan, 1.0}).str(), "tensor([nan, 1.])");
  EXPECT_EQ(tensor({-inf, 1.5}).str(), "tensor([  -inf, 1.5000])");
}

TEST(TensorPrint, NestedAndWrapped) {
  EXPECT_EQ(arange(8).view({2, 2, 2}).str(),
            "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  EXPECT_EQ(arange(30, DType::kFloat32).str(),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  // A non-contiguous view prints its logical order.
  EXPECT_EQ(arange(4).view({2, 2}).T().str(), "tensor([[0, 2],\n        [1, 3]])");
}

TEST(TensorPrint, Summarised) {
  EXPECT_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(arange(10000).view({100, 100}).str(),
            "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
            "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
            "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
            "        ...,\n"
            "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
            "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
            "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])");
}

// Note [Printing reads the edges]: a summarised tensor is printed from a copy
// of the items shown, never from a converted copy of all of it.
TEST(TensorPrint, SummarisedReadsOnlyTheEdges) {
  auto& host = memory::allocator_for(Device{});
  const Tensor big = zeros({1}).expand({std::int64_t{10000000000}});  // 40 GB as float64, were it copied
  EXPECT_EQ(big.str(), "tensor([0., 0., 0.,  ..., 0., 0., 0.])");
  const Tensor x = arange(4000000, std::nullopt, Device{}).view({2000, 2000});
  host.reset_peak_stats();
  const auto before = host.stats().allocated_bytes[0].current;
  const std::string text = x.T().str();
  EXPECT_LE(host.stats().allocated_bytes[0].peak - before, 4096) << "printing allocated more than the 36 items shown";
  EXPECT_EQ(text,
            "tensor([[      0,    2000,    4000,  ..., 3994000, 3996000, 3998000],\n"
            "        [      1,    2001,    4001,  ..., 3994001, 3996001, 3998001],\n"
            "        [      2,    2002,    4002,  ..., 3994002, 3996002, 3998002],\n"
            "        ...,\n"
            "        [   1997,    3997,    5997,  ..., 3995997, 3997997, 3999997],\n"
            "        [   1998,    3998,    5998,  ..., 3995998, 3997998, 3999998],\n"
            "        [   1999,    3999,    5999,  ..., 3995999, 3997999, 3999999]])");
}

}  // namespace
}  // namespace genesis
