// Shape operations: views, view errors, reshape, stack/cat/split/chunk.
#include <gtest/gtest.h>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

TEST(TensorShape, ViewIsZeroCopy) {
  Tensor x = arange(12);
  Tensor v = x.view({3, 4});
  EXPECT_EQ(v.data_ptr(), x.data_ptr());
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(x.view({2, -1}).shape(), (Shape{2, 6}));
  EXPECT_EQ(x.view({-1}).shape(), (Shape{12}));
  EXPECT_THROW(x.view({5, -1}), InvalidArgumentError);
  EXPECT_THROW(x.view({-1, -1}), InvalidArgumentError);
  EXPECT_THROW(x.view({5}), InvalidArgumentError);
  EXPECT_EQ(tensor(3).view({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(zeros({0, 3}).view({3, 0}).shape(), (Shape{3, 0}));
}

TEST(TensorShape, ViewErrorsClearlyWhenImpossible) {
  Tensor t = arange(12).view({3, 4}).T();
  try {
    t.view({12});
    FAIL() << "expected an error";
  } catch (const InvalidArgumentError& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("view size is not compatible"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("reshape"), std::string::npos) << m;
  }
  Tensor r = t.reshape({12});  // copies
  EXPECT_NE(r.data_ptr(), t.data_ptr());
  EXPECT_EQ(r.tolist<int>(), (std::vector<int>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // Views that are possible on non-contiguous tensors.
  Tensor s = arange(24).view({2, 3, 4}).slice(2, 0, 2);  // [2, 3, 2] strides [12, 4, 1]
  EXPECT_EQ(s.view({2, 3, 2, 1}).strides(), (Shape{12, 4, 1, 1}));
  EXPECT_EQ(s.transpose(0, 1).view({3, 2, 2}).strides(), (Shape{4, 12, 1}));
  EXPECT_THROW(s.view({12}), InvalidArgumentError);
  EXPECT_EQ(s.reshape({6, 2}).shape(), (Shape{6, 2}));
  Tensor reshaped_view = arange(12).reshape({3, 4});
  EXPECT_TRUE(reshaped_view.is_contiguous());
}

TEST(TensorShape, TransposePermuteT) {
  Tensor x = arange(24).view({2, 3, 4});
  Tensor t = x.transpose(0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(t.strides(), (Shape{4, 12, 1}));
  EXPECT_EQ(t.data_ptr(), x.data_ptr());
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_THROW(x.permute({0, 0, 1}), InvalidArgumentError);
  EXPECT_THROW(x.permute({0, 1}), InvalidArgumentError);
  EXPECT_EQ(x.T().shape(), (Shape{4, 3, 2}));
  Tensor m = arange(6).view({2, 3});
  EXPECT_EQ(m.T().tolist<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(tensor(1).T().dim(), 0);
}

TEST(TensorShape, FlattenSqueezeUnsqueezeExpand) {
  Tensor x = arange(24).view({2, 3, 4});
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.flatten().data_ptr(), x.data_ptr());
  EXPECT_EQ(tensor(5).flatten().shape(), (Shape{1}));
  Tensor s = zeros({1, 3, 1, 2});
  EXPECT_EQ(s.squeeze().shape(), (Shape{3, 2}));
  EXPECT_EQ(s.squeeze(2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(s.squeeze(1).shape(), (Shape{1, 3, 1, 2}));
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1, 1, 3, 1, 2}));
  EXPECT_EQ(s.unsqueeze(-1).shape(), (Shape{1, 3, 1, 2, 1}));
  EXPECT_THROW(s.unsqueeze(6), IndexError);
  Tensor r = tensor({1, 2, 3});
  Tensor e = r.expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.tolist<int>(), (std::vector<int>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(r.view({3, 1}).expand({-1, 4}).shape(), (Shape{3, 4}));
  EXPECT_THROW(r.expand({2, 4}), InvalidArgumentError);
  Tensor c = e.contiguous();
  EXPECT_EQ(c.strides(), (Shape{3, 1}));
}

TEST(TensorShape, StackCatSplitChunk) {
  Tensor a = tensor({1, 2}), b = tensor({3, 4});
  Tensor s = stack({a, b});
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.tolist<int>(), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(stack({a, b}, 1).tolist<int>(), (std::vector<int>{1, 3, 2, 4}));
  EXPECT_EQ(stack({a, b}, -1).shape(), (Shape{2, 2}));
  EXPECT_THROW(stack({a, tensor({1})}), InvalidArgumentError);
  EXPECT_THROW(stack({}), InvalidArgumentError);
  Tensor c = cat({a, b, tensor({5})});
  EXPECT_EQ(c.tolist<int>(), (std::vector<int>{1, 2, 3, 4, 5}));
  Tensor m = arange(6).view({2, 3});
  EXPECT_EQ(cat({m, m}, 1).shape(), (Shape{2, 6}));
  EXPECT_EQ(cat({m, m.to(DType::kFloat32)}).dtype(), DType::kFloat32);
  EXPECT_THROW(cat({m, arange(4).view({2, 2})}), InvalidArgumentError);
  auto parts = arange(10).split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].tolist<int>(), (std::vector<int>{8, 9}));
  EXPECT_EQ(parts[1].data_ptr(), static_cast<char*>(parts[0].data_ptr()) + 4 * 8);
  auto sized = arange(10).split(std::vector<std::int64_t>{3, 7});
  EXPECT_EQ(sized[1].numel(), 7);
  EXPECT_THROW(arange(10).split(std::vector<std::int64_t>{3, 3}), InvalidArgumentError);
  auto ch = arange(10).chunk(3);
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].numel(), 4);
  EXPECT_EQ(ch[2].numel(), 2);
  EXPECT_EQ(m.chunk(3, 1).size(), 3u);
  // Batching: stack then reduce over dims (1, 2).
  std::vector<Tensor> mats;
  for (int i = 0; i < 4; ++i) mats.push_back(full({5, 5}, i));
  EXPECT_EQ(stack(mats).sum({1, 2}).tolist<float>(), (std::vector<float>{0, 25, 50, 75}));
}

TEST(TensorShape, SliceSelectNarrow) {
  Tensor x = arange(10);
  EXPECT_EQ(x.slice(0, 2, 8, 3).tolist<int>(), (std::vector<int>{2, 5}));
  EXPECT_EQ(x.slice(0, std::nullopt, std::nullopt, -3).tolist<int>(), (std::vector<int>{9, 6, 3, 0}));
  EXPECT_EQ(x.slice(0, -3, std::nullopt).tolist<int>(), (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(x.slice(0, 100, 200).numel(), 0);
  EXPECT_EQ(x.narrow(0, 2, 3).tolist<int>(), (std::vector<int>{2, 3, 4}));
  EXPECT_THROW(x.narrow(0, 8, 3), InvalidArgumentError);
  try {
    x.narrow(0, 0, -1);
    ADD_FAILURE() << "narrow with a negative length must throw";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(e.message(), "narrow: length must be non-negative, got -1");
  }
  EXPECT_EQ(x.select(0, -1).item<int>(), 9);
  EXPECT_THROW(x.select(0, 10), IndexError);
}

}  // namespace
}  // namespace genesis

namespace genesis {
namespace {

TEST(TensorShape, TransposedCopiesAreTiledCorrectly) {
  Tensor x = arange(3 * 50 * 70).view({3, 50, 70});
  for (DType dt : {DType::kInt64, DType::kFloat32, DType::kFloat16}) {
    Tensor t = empty({3, 70, 50}, dt);
    t.copy_(x.transpose(1, 2));
    const auto v = t.tolist<std::int64_t>();
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t i = 0; i < 70; i += 7)
        for (std::int64_t j = 0; j < 50; j += 3) {
          const std::int64_t want = (b * 50 + j) * 70 + i;
          const std::int64_t got = v[static_cast<std::size_t>((b * 70 + i) * 50 + j)];
          if (dt == DType::kFloat16) ASSERT_EQ(got, static_cast<std::int64_t>(static_cast<float>(Half(static_cast<float>(want)))));
          else ASSERT_EQ(got, want);
        }
  }
  // Writing into a transposed destination.
  Tensor d = zeros({70, 50}, DType::kInt64);
  d.T().copy_(x[0]);
  EXPECT_TRUE(equal(d.T(), x[0]));
}

}  // namespace
}  // namespace genesis
