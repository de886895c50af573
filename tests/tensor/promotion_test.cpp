// Type promotion (Note [Type promotion]) and broadcasting.
#include <gtest/gtest.h>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

using D = DType;

TEST(TensorPromotion, PromoteTypesTable) {
  EXPECT_EQ(promote_types(D::kBool, D::kInt8), D::kInt8);
  EXPECT_EQ(promote_types(D::kUInt8, D::kInt8), D::kInt16);
  EXPECT_EQ(promote_types(D::kUInt8, D::kInt16), D::kInt16);
  EXPECT_EQ(promote_types(D::kUInt8, D::kInt64), D::kInt64);
  EXPECT_EQ(promote_types(D::kInt32, D::kInt64), D::kInt64);
  EXPECT_EQ(promote_types(D::kInt64, D::kFloat16), D::kFloat16);
  EXPECT_EQ(promote_types(D::kFloat16, D::kBFloat16), D::kFloat32);
  EXPECT_EQ(promote_types(D::kBFloat16, D::kFloat32), D::kFloat32);
  EXPECT_EQ(promote_types(D::kFloat32, D::kFloat64), D::kFloat64);
  EXPECT_EQ(promote_types(D::kBool, D::kBool), D::kBool);
  // Symmetric over all pairs.
  for (int i = 0; i < kNumDTypes; ++i)
    for (int j = 0; j < kNumDTypes; ++j)
      EXPECT_EQ(promote_types(static_cast<D>(i), static_cast<D>(j)), promote_types(static_cast<D>(j), static_cast<D>(i)));
}

TEST(TensorPromotion, WeakScalarsAndZeroDim) {
  Tensor i8 = ones({2}, D::kInt8);
  Tensor f16 = ones({2}, D::kFloat16);
  Tensor b = ones({2}, D::kBool);
  EXPECT_EQ((i8 + 1).dtype(), D::kInt8);
  EXPECT_EQ((i8 + 2.5).dtype(), D::kFloat32);
  EXPECT_EQ((f16 + 2.5).dtype(), D::kFloat16);
  EXPECT_EQ((b + 1).dtype(), D::kInt64);
  EXPECT_EQ((b + true).dtype(), D::kBool);
  EXPECT_EQ((b * 1.5).dtype(), D::kFloat32);
  // 0-d tensors count only when their category is higher.
  EXPECT_EQ((i8 + tensor(5)).dtype(), D::kInt8);
  EXPECT_EQ((i8 + tensor(5.0, D::kFloat64)).dtype(), D::kFloat64);
  EXPECT_EQ((f16 + tensor(5.0, D::kFloat64)).dtype(), D::kFloat16);
  EXPECT_EQ((tensor(1, D::kInt32) + tensor(1, D::kInt64)).dtype(), D::kInt64);
  EXPECT_EQ((tensor(1, D::kInt32) + 1.0).dtype(), D::kFloat32);
  EXPECT_EQ((ones({2}, D::kUInt8) + ones({2}, D::kInt8)).dtype(), D::kInt16);
  EXPECT_EQ((f16 + ones({2}, D::kBFloat16)).dtype(), D::kFloat32);
  EXPECT_EQ((ones({2}, D::kInt32) / ones({2}, D::kInt32)).dtype(), D::kFloat32);
  EXPECT_EQ((ones({2}, D::kInt32) > 0.5).dtype(), D::kBool);
  EXPECT_EQ(result_type({i8, f16, 3}), D::kFloat16);
}

TEST(TensorPromotion, CanCast) {
  EXPECT_TRUE(can_cast(D::kInt64, D::kFloat16));
  EXPECT_FALSE(can_cast(D::kFloat32, D::kInt64));
  EXPECT_FALSE(can_cast(D::kInt8, D::kBool));
  EXPECT_TRUE(can_cast(D::kBool, D::kUInt8));
  EXPECT_TRUE(can_cast(D::kInt64, D::kInt8));
}

TEST(TensorBroadcast, Shapes) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({5, 3, 1}, {4}), (Shape{5, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}), (Shape{2, 2}));
  EXPECT_EQ(broadcast_shapes({0}, {1}), (Shape{0}));
  EXPECT_THROW(broadcast_shapes({3}, {4}), InvalidArgumentError);
  Tensor a = arange(3).view({3, 1});
  Tensor b = arange(4).view({1, 4});
  Tensor c = a * 10 + b;
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.tolist<int>(), (std::vector<int>{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}));
  EXPECT_THROW(arange(3) + arange(4), InvalidArgumentError);
  auto bt = broadcast_tensors({a, b});
  EXPECT_EQ(bt[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(bt[1].strides(), (Shape{0, 1}));
}

}  // namespace
}  // namespace genesis
