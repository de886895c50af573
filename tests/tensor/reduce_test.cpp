// Reductions over everything, a dim or a tuple of dims, with keepdim.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

using D = DType;

TEST(TensorReduce, SumAndDims) {
  Tensor x = arange(24, D::kFloat32).view({2, 3, 4});
  EXPECT_EQ(x.sum().item<float>(), 276.0f);
  EXPECT_EQ(x.sum().dim(), 0);
  Tensor s0 = x.sum(0);
  EXPECT_EQ(s0.shape(), (Shape{3, 4}));
  EXPECT_EQ(s0.tolist<float>()[0], 12.0f);
  Tensor s12 = x.sum({1, 2});
  EXPECT_EQ(s12.tolist<float>(), (std::vector<float>{66, 210}));
  Tensor k = x.sum({-1, 0}, true);
  EXPECT_EQ(k.shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(k.tolist<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_THROW(x.sum({1, 1}), InvalidArgumentError);
  EXPECT_THROW(x.sum(3), IndexError);
  // On a transposed view.
  EXPECT_EQ(x.transpose(0, 2).sum(2).tolist<float>(), x.sum(0).T().contiguous().tolist<float>());
}

TEST(TensorReduce, Dtypes) {
  EXPECT_EQ(tensor({1, 2}, D::kInt8).sum().dtype(), D::kInt64);
  EXPECT_EQ(tensor({true, true, false}).sum().dtype(), D::kInt64);
  EXPECT_EQ(tensor({true, true, false}).sum().item<std::int64_t>(), 2);
  EXPECT_EQ(tensor({100, 100}, D::kInt8).sum().item<std::int64_t>(), 200);
  EXPECT_EQ(tensor({1.0, 2.0}, D::kFloat16).sum().dtype(), D::kFloat16);
  EXPECT_EQ(tensor({1, 2}, D::kInt32).sum(D::kFloat64).dtype(), D::kFloat64);
  EXPECT_EQ(tensor({1, 2}, D::kInt8).sum(0, false, D::kInt32).dtype(), D::kInt32);
  EXPECT_EQ(tensor({2, 3, 4}, D::kInt16).prod().item<std::int64_t>(), 24);
  EXPECT_EQ(tensor({2, 3, 4}, D::kInt16).prod().dtype(), D::kInt64);
  EXPECT_THROW(tensor({1, 2}).mean(), InvalidArgumentError);
  EXPECT_EQ(tensor({1, 2}).mean(D::kFloat32).item<float>(), 1.5f);
}

TEST(TensorReduce, MeanMaxMin) {
  Tensor x = tensor({{1.0, 5.0, 3.0}, {4.0, 2.0, 6.0}});
  EXPECT_EQ(x.mean().item<float>(), 3.5f);
  EXPECT_EQ(x.mean(1).tolist<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(x.mean({0, 1}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(x.max().item<float>(), 6.0f);
  EXPECT_EQ(x.min().item<float>(), 1.0f);
  auto [values, indices] = x.max(1);
  EXPECT_EQ(values.tolist<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(indices.tolist<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(indices.dtype(), D::kInt64);
  auto mn = x.min(0, true);
  EXPECT_EQ(mn.values.shape(), (Shape{1, 3}));
  EXPECT_EQ(mn.values.tolist<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(mn.indices.tolist<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ(x.amax({0, 1}).item<float>(), 6.0f);
  EXPECT_EQ(x.amin(0).tolist<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(x.argmax().item<std::int64_t>(), 5);
  EXPECT_EQ(x.argmin().item<std::int64_t>(), 0);
  EXPECT_EQ(x.argmax(0).tolist<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(x.argmax(std::nullopt, true).shape(), (Shape{1, 1}));
  // Ties: the first index. Ints keep their dtype.
  Tensor t = tensor({3, 7, 7, 1});
  EXPECT_EQ(t.argmax().item<std::int64_t>(), 1);
  EXPECT_EQ(t.max().dtype(), D::kInt64);
  // NaN propagates and wins.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor n = tensor({1.0, nan, 3.0});
  EXPECT_TRUE(std::isnan(n.max().item<float>()));
  EXPECT_TRUE(std::isnan(n.min().item<float>()));
  EXPECT_EQ(n.argmax().item<std::int64_t>(), 1);
  EXPECT_TRUE(std::isnan(n.sum().item<float>()));
}

TEST(TensorReduce, EmptyAndScalar) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.sum().item<float>(), 0.0f);
  EXPECT_EQ(e.sum(0).tolist<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(e.sum(1).shape(), (Shape{0}));
  EXPECT_EQ(e.prod(0).tolist<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_TRUE(std::isnan(e.mean().item<float>()));
  EXPECT_THROW(e.max(), InvalidArgumentError);
  EXPECT_THROW(e.max(0), IndexError);
  EXPECT_THROW(e.argmax(), InvalidArgumentError);
  EXPECT_EQ(e.max(1).values.shape(), (Shape{0}));
  Tensor s = tensor(4.0);
  EXPECT_EQ(s.sum().item<float>(), 4.0f);
  EXPECT_EQ(s.sum(0).item<float>(), 4.0f);
  EXPECT_EQ(s.max(0).indices.item<std::int64_t>(), 0);
  EXPECT_EQ(s.argmax().item<std::int64_t>(), 0);
}

TEST(TensorReduce, AnyAllCount) {
  Tensor m = tensor({false, true, false});
  EXPECT_TRUE(m.any().item<bool>());
  EXPECT_FALSE(m.all().item<bool>());
  EXPECT_EQ(count_nonzero(tensor({0, 3, 0, 5})).item<std::int64_t>(), 2);
  EXPECT_EQ(nonzero(tensor({{0, 1}, {1, 0}})).tolist<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(nonzero(zeros({3})).shape(), (Shape{0, 1}));
  // Several chunks (parallel two-pass compaction), strided mask: row-major order.
  Tensor big = remainder(arange(300000), 7) == 0;
  Tensor nz = nonzero(big.view({600, 500}).T());  // [500, 600] view
  ASSERT_EQ(nz.size(0), (300000 + 6) / 7);
  const auto coords = nz.tolist<std::int64_t>();
  std::vector<std::int64_t> expected;
  for (std::int64_t i = 0; i < 500; ++i)
    for (std::int64_t j = 0; j < 600; ++j)
      if ((j * 500 + i) % 7 == 0) {
        expected.push_back(i);
        expected.push_back(j);
      }
  EXPECT_EQ(coords, expected);
}

TEST(TensorReduce, LargeIsDeterministicAndAccurate) {
  manual_seed(3);
  Tensor x = rand({3'000'000});
  const float a = x.sum().item<float>();
  const float b = x.sum().item<float>();
  EXPECT_EQ(a, b);
  EXPECT_NEAR(a / 3e6, 0.5, 0.01);
  Tensor ones_big = ones({1 << 22});
  EXPECT_EQ(ones_big.sum().item<float>(), static_cast<float>(1 << 22));  // accumulates in double
  Tensor y = arange(1 << 20, D::kFloat64).view({1024, 1024});
  Tensor rows = y.sum(1);
  EXPECT_EQ(rows.tolist<double>()[1], 1024.0 * 1024 + 1023.0 * 1024 / 2);
  Tensor cols = y.sum(0);
  EXPECT_EQ(cols.tolist<double>()[0], 1024.0 * 1023 / 2 * 1024);
  auto [v, i] = y.max(1);
  EXPECT_EQ(i.tolist<std::int64_t>()[5], 1023);
}

}  // namespace
}  // namespace genesis

namespace genesis {
namespace {

// Sum/max over random dim subsets of random (possibly permuted) tensors
// against a naive loop; covers the per-output, blocked and row paths.
TEST(TensorReduce, RandomizedAgainstNaive) {
  std::mt19937 rng(5);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const Shape base{rnd(1, 9), rnd(1, 40), rnd(1, 12)};
    Tensor x = randn(base, DType::kFloat64);
    if (rnd(0, 1)) x = x.permute({2, 0, 1});
    const Shape sh = x.shape();
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 0; d < 3; ++d)
      if (rnd(0, 1)) dims.push_back(d);
    if (dims.empty()) dims.push_back(rnd(0, 2));
    const bool keep = rnd(0, 1);
    Tensor s = x.sum(dims, keep), m = x.amax(dims, keep);
    const auto v = x.contiguous().tolist<double>();
    std::vector<bool> red(3, false);
    for (auto d : dims) red[static_cast<std::size_t>(d)] = true;
    Shape out_shape{red[0] ? 1 : sh[0], red[1] ? 1 : sh[1], red[2] ? 1 : sh[2]};
    std::vector<double> es(static_cast<std::size_t>(out_shape[0] * out_shape[1] * out_shape[2]), 0.0);
    std::vector<double> em(es.size(), -1e300);
    for (std::int64_t i = 0; i < sh[0]; ++i)
      for (std::int64_t j = 0; j < sh[1]; ++j)
        for (std::int64_t k = 0; k < sh[2]; ++k) {
          const std::int64_t o = ((red[0] ? 0 : i) * out_shape[1] + (red[1] ? 0 : j)) * out_shape[2] + (red[2] ? 0 : k);
          const double val = v[static_cast<std::size_t>((i * sh[1] + j) * sh[2] + k)];
          es[static_cast<std::size_t>(o)] += val;
          em[static_cast<std::size_t>(o)] = std::max(em[static_cast<std::size_t>(o)], val);
        }
    const auto got_s = s.tolist<double>(), got_m = m.tolist<double>();
    ASSERT_EQ(got_s.size(), es.size());
    for (std::size_t i = 0; i < es.size(); ++i) {
      ASSERT_NEAR(got_s[i], es[i], 1e-9) << "trial " << trial;
      ASSERT_EQ(got_m[i], em[i]) << "trial " << trial;
    }
    ASSERT_EQ(s.dim(), keep ? 3 : 3 - static_cast<std::int64_t>(dims.size()));
  }
}

}  // namespace
}  // namespace genesis
