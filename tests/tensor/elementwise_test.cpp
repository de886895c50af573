// Element-wise operations, in-place and out= forms, comparisons, where.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

using D = DType;

TEST(TensorElementwise, Arithmetic) {
  Tensor x = tensor({1.0, 2.0, 3.0});
  Tensor y = tensor({4.0, 5.0, 6.0});
  EXPECT_EQ((x + y).tolist<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ((x - y).tolist<float>(), (std::vector<float>{-3, -3, -3}));
  EXPECT_EQ((x * y).tolist<float>(), (std::vector<float>{4, 10, 18}));
  EXPECT_EQ((y / x).tolist<float>(), (std::vector<float>{4, 2.5f, 2}));
  EXPECT_EQ((2 - x).tolist<float>(), (std::vector<float>{1, 0, -1}));
  EXPECT_EQ((6 / x).tolist<float>(), (std::vector<float>{6, 3, 2}));
  EXPECT_EQ((-x).tolist<float>(), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(x.pow(2).tolist<float>(), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(pow(2, x).tolist<float>(), (std::vector<float>{2, 4, 8}));
  EXPECT_EQ(maximum(x, tensor({2.0, 2.0, 2.0})).tolist<float>(), (std::vector<float>{2, 2, 3}));
  EXPECT_EQ(minimum(x, tensor({2.0, 2.0, 2.0})).tolist<float>(), (std::vector<float>{1, 2, 2}));
}

TEST(TensorElementwise, IntegerSemantics) {
  Tensor a = tensor({7, -7, 7, -7});
  Tensor b = tensor({2, 2, -2, -2});
  EXPECT_EQ(floor_divide(a, b).tolist<int>(), (std::vector<int>{3, -4, -4, 3}));
  EXPECT_EQ(remainder(a, b).tolist<int>(), (std::vector<int>{1, 1, -1, -1}));
  EXPECT_EQ(remainder(tensor({7.5, -7.5}), 2).tolist<float>(), (std::vector<float>{1.5f, 0.5f}));
  EXPECT_EQ(floor_divide(tensor({7.5, -7.5}), 2).tolist<float>(), (std::vector<float>{3, -4}));
  EXPECT_EQ((a / b).dtype(), D::kFloat32);
  EXPECT_EQ((a / b).tolist<float>(), (std::vector<float>{3.5f, -3.5f, -3.5f, 3.5f}));
  EXPECT_EQ(tensor({2, 3}).pow(3).tolist<int>(), (std::vector<int>{8, 27}));
  EXPECT_EQ(pow(tensor({2, -1, 1}), tensor({-1, -3, -2})).tolist<int>(), (std::vector<int>{0, -1, 1}));
  EXPECT_THROW(tensor({2, 3}).pow(-1), InvalidArgumentError);
  EXPECT_EQ(tensor({2, 3}).pow(0.5).dtype(), D::kFloat32);
  // Wrap-around like two's complement.
  Tensor u = tensor({250}, D::kUInt8);
  EXPECT_EQ((u + 10).tolist<int>(), (std::vector<int>{4}));
  EXPECT_EQ((-u).tolist<int>(), (std::vector<int>{6}));
  Tensor i = tensor({std::numeric_limits<std::int64_t>::max()});
  EXPECT_EQ((i + 1).item<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(abs(tensor({-3, 4}, D::kInt8)).tolist<int>(), (std::vector<int>{3, 4}));
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(floor_divide(tensor({lo}), -1).item<std::int64_t>(), lo);  // wraps, no trap
  EXPECT_EQ(remainder(tensor({lo}), -1).item<std::int64_t>(), 0);
  EXPECT_THROW(floor_divide(tensor({5}), 0), DivisionByZeroError);  // integer_ops_test.cpp has the rest
  EXPECT_EQ((-tensor({lo})).item<std::int64_t>(), lo);
}

TEST(TensorElementwise, UnaryMath) {
  Tensor x = tensor({0.0, 1.0, 4.0});
  EXPECT_TRUE(allclose(x.exp(), tensor({1.0, std::exp(1.0), std::exp(4.0)})));
  EXPECT_TRUE(allclose(x.sqrt(), tensor({0.0, 1.0, 2.0})));
  EXPECT_TRUE(allclose(tensor({1.0, std::exp(2.0)}).log(), tensor({0.0, 2.0})));
  EXPECT_EQ(tensor({-1.5, 0.0, 2.0}).abs().tolist<float>(), (std::vector<float>{1.5f, 0, 2}));
  EXPECT_EQ(tensor({-1.5, 0.0, 2.0}).relu().tolist<float>(), (std::vector<float>{0, 0, 2}));
  EXPECT_EQ(tensor({-2, 3}).relu().tolist<int>(), (std::vector<int>{0, 3}));
  EXPECT_TRUE(allclose(tensor({0.0}).sigmoid(), tensor({0.5})));
  EXPECT_TRUE(allclose(tensor({0.0}).tanh(), tensor({0.0})));
  // Integers go to float32.
  EXPECT_EQ(tensor({1, 2}).exp().dtype(), D::kFloat32);
  EXPECT_EQ(tensor({4}).sqrt().item<float>(), 2.0f);
  EXPECT_TRUE(std::isnan(tensor({-1.0}).sqrt().item<float>()));
  EXPECT_THROW(-tensor({true}), TypeMismatchError);
  EXPECT_EQ((~tensor({true, false})).tolist<bool>(), (std::vector<bool>{false, true}));
  // Half types compute in float and round once.
  Tensor h = tensor({1.0, 2.0}, D::kFloat16);
  EXPECT_EQ(h.exp().dtype(), D::kFloat16);
  EXPECT_EQ(h.exp().tolist<float>()[1], static_cast<float>(Half(std::exp(2.0f))));
  Tensor bf = tensor({1.0, 2.0}, D::kBFloat16);
  EXPECT_EQ((bf * 3).tolist<float>(), (std::vector<float>{3, 6}));
}

TEST(TensorElementwise, Comparisons) {
  Tensor x = tensor({0.2, 0.7, 0.5});
  Tensor m = x > 0.5;
  EXPECT_EQ(m.dtype(), D::kBool);
  EXPECT_EQ(m.tolist<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((x >= 0.5).tolist<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((x < 0.5).tolist<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((x <= 0.5).tolist<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((x == 0.5).tolist<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((x != 0.5).tolist<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((tensor({1, 2}) == tensor({1.0, 2.5})).tolist<bool>(), (std::vector<bool>{true, false}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ((tensor({nan}) == tensor({nan})).tolist<bool>(), (std::vector<bool>{false}));
  EXPECT_EQ((m & (x > 0.1)).tolist<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((m | (x < 0.3)).tolist<bool>(), (std::vector<bool>{true, true, false}));
}

TEST(TensorElementwise, Where) {
  Tensor c = tensor({true, false, true});
  EXPECT_EQ(where(c, tensor({1, 2, 3}), tensor({10, 20, 30})).tolist<int>(), (std::vector<int>{1, 20, 3}));
  EXPECT_EQ(where(c, 1.5, tensor({10, 20, 30})).dtype(), D::kFloat32);
  EXPECT_EQ(where(c, 1.5, 0).tolist<float>(), (std::vector<float>{1.5f, 0, 1.5f}));
  Tensor x = tensor({{-1.0, 2.0}, {3.0, -4.0}});
  EXPECT_EQ(where(x > 0, x, 0.0).tolist<float>(), (std::vector<float>{0, 2, 3, 0}));
  EXPECT_EQ(where(tensor({true, false}).view({2, 1}), tensor({1, 2, 3}), 0).shape(), (Shape{2, 3}));
  EXPECT_THROW(where(tensor({1, 0}), 1, 0), TypeMismatchError);
}

TEST(TensorElementwise, InPlace) {
  Tensor x = ones({2, 2});
  const void* p = x.data_ptr();
  x += 1.0;
  x *= 3;
  x.add_(tensor({1.0, 2.0}));  // broadcast of the other operand
  x.sub_(1).div_(2);
  EXPECT_EQ(x.data_ptr(), p);
  EXPECT_EQ(x.tolist<float>(), (std::vector<float>{3, 3.5f, 3, 3.5f}));
  x.exp_();
  EXPECT_NEAR(x.tolist<float>()[0], std::exp(3.0f), 1e-3);
  Tensor i = tensor({1, 2});
  EXPECT_THROW(i.exp_(), TypeMismatchError);
  EXPECT_THROW(i += 1.5, TypeMismatchError);
  EXPECT_THROW(i /= 2, TypeMismatchError);
  i *= 3;
  EXPECT_EQ(i.tolist<int>(), (std::vector<int>{3, 6}));
  Tensor small = ones({2});
  EXPECT_THROW(small.add_(ones({2, 2})), InvalidArgumentError);
  Tensor h = ones({2}, D::kFloat16);
  h += tensor({1.5, 2.5}, D::kFloat64);  // float64 result fits float16's category
  EXPECT_EQ(h.dtype(), D::kFloat16);
  EXPECT_EQ(h.tolist<float>(), (std::vector<float>{2.5f, 3.5f}));
  Tensor v = arange(6, DType::kFloat32);
  v.slice(0, 0, 3).mul_(10);
  EXPECT_EQ(v.tolist<float>(), (std::vector<float>{0, 10, 20, 3, 4, 5}));
  // Overlapping in-place: a[1:] += a[:-1] reads the old values (NumPy).
  Tensor a = arange(5);
  Tensor tail = a.slice(0, 1, std::nullopt);
  tail.add_(a.slice(0, 0, -1));
  EXPECT_EQ(a.tolist<int>(), (std::vector<int>{0, 1, 3, 5, 7}));
  x.relu_().neg_().abs_().sqrt_().log_();
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
}

TEST(TensorElementwise, OutVariants) {
  Tensor a = tensor({1.0, 2.0}), b = tensor({3.0, 4.0});
  Tensor out = empty({2});
  const void* p = out.data_ptr();
  add_out(out, a, b);
  EXPECT_EQ(out.data_ptr(), p);
  EXPECT_EQ(out.tolist<float>(), (std::vector<float>{4, 6}));
  mul_out(out, a, 10);
  EXPECT_EQ(out.tolist<float>(), (std::vector<float>{10, 20}));
  Tensor out64 = empty({2}, D::kFloat64);
  div_out(out64, a, b);
  EXPECT_NEAR(out64.tolist<double>()[0], 1.0f / 3.0f, 1e-7);
  Tensor outi = empty({2}, D::kInt64);
  EXPECT_THROW(add_out(outi, a, b), TypeMismatchError);
  Tensor wrong = empty({3});
  EXPECT_THROW(add_out(wrong, a, b), InvalidArgumentError);
  Tensor mask = empty({2}, D::kBool);
  binary_out(kernels::BinaryOp::kGt, mask, a, 1.5);
  EXPECT_EQ(mask.tolist<bool>(), (std::vector<bool>{false, true}));
  unary_out(kernels::UnaryOp::kNeg, out, a);
  EXPECT_EQ(out.tolist<float>(), (std::vector<float>{-1, -2}));
  exp_out(out, a);
  EXPECT_NEAR(out.tolist<float>()[1], std::exp(2.0f), 1e-5);
  // Writing into a non-contiguous out.
  Tensor big = zeros({2, 2});
  Tensor col = big.select(1, 0);
  sub_out(col, b, a);
  EXPECT_EQ(big.tolist<float>(), (std::vector<float>{2, 0, 2, 0}));
}

TEST(TensorElementwise, LargeMultithreaded) {
  const std::int64_t n = 1 << 20;
  Tensor x = arange(n, DType::kFloat64);
  Tensor y = x * 2 + 1;
  EXPECT_EQ(y.sum().item<double>(), static_cast<double>(n) * static_cast<double>(n - 1) + static_cast<double>(n));
  Tensor t = x.view({1024, 1024}).T();  // strided input
  Tensor z = t + 0;
  EXPECT_EQ(z.tolist<double>()[1], 1024.0);
  EXPECT_TRUE(equal(z.T(), x.view({1024, 1024})));
}

TEST(TensorConcurrency, IndependentOpsFromManyThreads) {
  // Many threads share the CPU pool; each result must be unaffected.
  std::vector<std::thread> threads;
  std::vector<double> sums(6, 0.0);
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([t, &sums] {
      Tensor x = full({1 << 16}, t, DType::kFloat64);
      for (int r = 0; r < 5; ++r) x = x * 1.0 + 0.0;
      sums[static_cast<std::size_t>(t)] = x.sum().item<double>();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(sums[static_cast<std::size_t>(t)], t * 65536.0);
}

TEST(TensorElementwise, DeviceMismatchAndUndefined) {
  Tensor e = zeros({3}).expand({2, 3});
  EXPECT_THROW(e.add_(1), InvalidArgumentError);
  EXPECT_THROW(e.copy_(ones({2, 3})), InvalidArgumentError);
  EXPECT_THROW(Tensor() + 1, InvalidArgumentError);
}

}  // namespace
}  // namespace genesis
