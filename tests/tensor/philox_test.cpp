// Philox 4x32-10 known answers and the random-tensor contract (Note [Random
// numbers]).
#include "genesis/tensor/philox.h"

#include <gtest/gtest.h>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

TEST(TensorPhilox, KnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32 with 10 rounds.
  const philox::Block zero = philox::philox4x32_10(philox::Block{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(zero.v[0], 0x6627e8d5u);
  EXPECT_EQ(zero.v[1], 0xe169c58du);
  EXPECT_EQ(zero.v[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.v[3], 0x9b00dbd8u);
  const philox::Block ones =
      philox::philox4x32_10(philox::Block{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(ones.v[0], 0x408f276du);
  EXPECT_EQ(ones.v[1], 0x41c83b0eu);
  EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
  EXPECT_EQ(ones.v[3], 0x6d5451fdu);
  const philox::Block pi = philox::philox4x32_10(philox::Block{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                                                 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(TensorPhilox, ConstexprUsable) {
  constexpr philox::Block b = philox::element_block(1, 2, 3);
  static_assert(b.v[0] != 0 || b.v[1] != 0);
  SUCCEED();
}

TEST(TensorRandom, ManualSeedReproduces) {
  manual_seed(42);
  const auto a = rand({1000}).tolist<float>();
  const auto b = rand({1000}).tolist<float>();
  manual_seed(42);
  EXPECT_EQ(rand({1000}).tolist<float>(), a);
  EXPECT_EQ(rand({1000}).tolist<float>(), b);
  EXPECT_NE(a, b);
}

TEST(TensorRandom, ElementIIsAFunctionOfSeedOffsetIndex) {
  // What any backend (CUDA included) must reproduce: element i of the first
  // draw after manual_seed(s) comes from element_block(s, 0, i).
  manual_seed(7);
  const auto u = rand({64}).tolist<float>();
  for (std::size_t i = 0; i < u.size(); ++i) {
    EXPECT_EQ(u[i], philox::uniform_float(philox::element_block(7, 0, i)));
  }
  // The second draw continues at offset 64.
  const auto v = rand({4}, DType::kFloat64).tolist<double>();
  EXPECT_EQ(v[0], philox::uniform_double(philox::element_block(7, 64, 0)));
  const auto z = randn({3}, DType::kFloat64).tolist<double>();
  EXPECT_EQ(z[2], philox::normal_double(philox::element_block(7, 68, 2)));
}

TEST(TensorRandom, Ranges) {
  manual_seed(1);
  Tensor u = rand({100000});
  EXPECT_GE(u.min().item<float>(), 0.0f);
  EXPECT_LT(u.max().item<float>(), 1.0f);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.01);
  Tensor n = randn({100000}, DType::kFloat64);
  EXPECT_NEAR(n.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR((n * n).mean().item<double>(), 1.0, 0.02);
  Tensor r = randint(-3, 5, {10000});
  EXPECT_EQ(r.dtype(), DType::kInt64);
  EXPECT_EQ(r.min().item<std::int64_t>(), -3);
  EXPECT_EQ(r.max().item<std::int64_t>(), 4);
  Tensor h = rand({10000}, DType::kFloat16);
  EXPECT_LT(h.max().item<float>(), 1.0f);
  Tensor i8 = randint(0, 10, {50, 50}, DType::kInt32);
  EXPECT_EQ(i8.dtype(), DType::kInt32);
  EXPECT_THROW(randint(3, 3, {2}), InvalidArgumentError);
  EXPECT_THROW(rand({2}, DType::kInt32), TypeMismatchError);
}

}  // namespace
}  // namespace genesis
