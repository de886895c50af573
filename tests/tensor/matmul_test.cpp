// matmul: shapes (torch.matmul rules), dtypes, batching, out=.
#include <gtest/gtest.h>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

// Reference product in double.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const auto av = a.tolist<double>(), bv = b.tolist<double>();
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<double> out(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = 0; j < n; ++j) out[i * n + j] += av[i * k + p] * bv[p * n + j];
  return tensor(out, {m, n}, DType::kFloat64);
}

TEST(TensorMatmul, TwoD) {
  Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}});
  Tensor b = tensor({{5.0, 6.0}, {7.0, 8.0}});
  EXPECT_EQ(matmul(a, b).tolist<float>(), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(a.matmul(b.T()).tolist<float>(), (std::vector<float>{17, 23, 39, 53}));
  EXPECT_EQ(matmul(a.T(), b).tolist<float>(), (std::vector<float>{26, 30, 38, 44}));
  manual_seed(0);
  for (auto dt : {DType::kFloat32, DType::kFloat64}) {
    Tensor x = randn({37, 53}, dt), y = randn({53, 29}, dt);
    EXPECT_TRUE(allclose(matmul(x, y), ref_matmul(x, y), 1e-4, 1e-4));
    EXPECT_TRUE(allclose(matmul(y.T(), x.T()), ref_matmul(x, y).T(), 1e-4, 1e-4));
    // Strided (non-unit) operands are copied to a BLAS layout first.
    Tensor xs = randn({37, 106}, dt)[{Slice(), Slice(None, None, 2)}];
    EXPECT_TRUE(allclose(matmul(xs, y), ref_matmul(xs.contiguous(), y), 1e-4, 1e-4));
  }
  EXPECT_THROW(matmul(ones({2, 3}), ones({2, 3})), InvalidArgumentError);
  EXPECT_THROW(matmul(ones({2, 2}), ones({2, 2}, DType::kFloat64)), TypeMismatchError);
  EXPECT_THROW(matmul(ones({2, 2}, DType::kBool), ones({2, 2}, DType::kBool)), TypeMismatchError);
}

TEST(TensorMatmul, VectorsAndBatches) {
  Tensor v = tensor({1.0, 2.0, 3.0});
  Tensor dot = matmul(v, v);
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_EQ(dot.item<float>(), 14.0f);
  Tensor m = arange(6, DType::kFloat32).view({2, 3});
  EXPECT_EQ(matmul(m, v).shape(), (Shape{2}));
  EXPECT_EQ(matmul(m, v).tolist<float>(), (std::vector<float>{8, 26}));
  EXPECT_EQ(matmul(tensor({1.0, 1.0}), m).tolist<float>(), (std::vector<float>{3, 5, 7}));
  manual_seed(1);
  Tensor a = randn({4, 5, 6}), b = randn({6, 7});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{4, 5, 7}));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(allclose(c[i], ref_matmul(a[i], b), 1e-4, 1e-4));
  Tensor bb = randn({3, 1, 6, 2});
  EXPECT_EQ(matmul(a, bb).shape(), (Shape{3, 4, 5, 2}));
  Tensor g = matmul(a, bb);
  EXPECT_TRUE(allclose((g[{2, 3}]), ref_matmul(a[3], (bb[{2, 0}])), 1e-4, 1e-4));
  EXPECT_EQ(matmul(zeros({2, 0}), zeros({0, 3})).tolist<float>(), std::vector<float>(6, 0.0f));
}

TEST(TensorMatmul, HalfAndIntegerDtypes) {
  Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}}, DType::kFloat16);
  Tensor b = tensor({{0.5, 1.0}, {1.5, 2.0}}, DType::kFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), DType::kFloat16);
  EXPECT_EQ(matmul(a, b).tolist<float>(), (std::vector<float>{3.5f, 5, 7.5f, 11}));
  EXPECT_EQ(matmul(a.to(DType::kBFloat16), b.to(DType::kBFloat16)).tolist<float>(),
            (std::vector<float>{3.5f, 5, 7.5f, 11}));
  Tensor i = arange(6).view({2, 3});
  EXPECT_EQ(matmul(i, i.T()).tolist<std::int64_t>(), (std::vector<std::int64_t>{5, 14, 14, 50}));
  EXPECT_EQ(matmul(i.to(DType::kInt32), i.T().to(DType::kInt32)).dtype(), DType::kInt32);
  // Larger than the parallel grain: rows split across threads.
  manual_seed(4);
  Tensor x = randint(-5, 5, {300, 70}), y = randint(-5, 5, {70, 90});
  EXPECT_TRUE(equal(matmul(x, y), matmul(x.to(DType::kFloat64), y.to(DType::kFloat64)).to(DType::kInt64)));
}

TEST(TensorMatmul, OutWritesWithoutAllocating) {
  manual_seed(2);
  Tensor a = randn({16, 8}), b = randn({8, 4});
  Tensor out = empty({16, 4});
  const void* p = out.data_ptr();
  matmul_out(out, a, b);
  EXPECT_EQ(out.data_ptr(), p);
  EXPECT_TRUE(allclose(out, matmul(a, b)));
  Tensor wrong = empty({4, 16});
  EXPECT_THROW(matmul_out(wrong, a, b), InvalidArgumentError);
  Tensor wrong_dtype = empty({16, 4}, DType::kFloat64);
  EXPECT_THROW(matmul_out(wrong_dtype, a, b), TypeMismatchError);
  Tensor big = zeros({4, 16});
  Tensor tview = big.T();  // non-contiguous out: computed then copied
  matmul_out(tview, a, b);
  EXPECT_TRUE(allclose(big.T(), matmul(a, b)));
  EXPECT_FALSE(allow_tf32());
  set_allow_tf32(true);
  EXPECT_TRUE(allow_tf32());
  set_allow_tf32(false);
}

}  // namespace
}  // namespace genesis
