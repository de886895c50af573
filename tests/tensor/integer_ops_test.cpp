// Integer division by zero, fmod, div rounding modes, bitwise operations and
// shifts (tensor/ops.h; Note [Integer division by zero]).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/tensor/api.h"

namespace genesis {
namespace {

using D = DType;

template <typename Fn>
std::string division_error(Fn fn) {
  try {
    fn();
  } catch (const DivisionByZeroError& e) {
    return e.message();
  }
  return "<no DivisionByZeroError>";
}

TEST(IntegerDivision, ByZeroRaisesForEveryOperation) {
  const Tensor a = tensor({7, -7, 3});
  const Tensor zero_in_b = tensor({2, 0, 1});
  for (const Tensor& b : {zero_in_b, zeros({1}, TensorOptions(D::kInt64))}) {
    EXPECT_NE(division_error([&] { floor_divide(a, b); }).find("floor_divide: integer division by zero"),
              std::string::npos);
    EXPECT_NE(division_error([&] { remainder(a, b); }).find("remainder"), std::string::npos);
    EXPECT_NE(division_error([&] { fmod(a, b); }).find("fmod"), std::string::npos);
    EXPECT_NE(division_error([&] { div(a, b, RoundingMode::kTrunc); }).find("trunc"), std::string::npos);
    EXPECT_NE(division_error([&] { div(a, b, RoundingMode::kFloor); }).find("floor_divide"), std::string::npos);
  }
  EXPECT_NE(division_error([&] { floor_divide(a, 0); }).find("the divisor is 0"), std::string::npos);
  EXPECT_NE(division_error([&] { remainder(5, zero_in_b); }).find("the divisor has a 0"), std::string::npos);
  // A DivisionByZeroError is an InvalidArgumentError too.
  EXPECT_THROW(floor_divide(a, 0), InvalidArgumentError);
}

TEST(IntegerDivision, CheckedBeforeAnyWrite) {
  Tensor out = full({3}, 42, D::kInt64);
  EXPECT_THROW(binary_out(kernels::BinaryOp::kFloorDiv, out, tensor({1, 2, 3}), tensor({1, 0, 1})),
               DivisionByZeroError);
  EXPECT_EQ(out.tolist<std::int64_t>(), (std::vector<std::int64_t>{42, 42, 42}));
}

TEST(IntegerDivision, ScalarThatWrapsToZero) {
  // 256 in the compute dtype uint8 is 0.
  EXPECT_THROW(floor_divide(tensor({5}).to(D::kUInt8), 256), DivisionByZeroError);
}

TEST(IntegerDivision, EmptyAndFloating) {
  EXPECT_EQ(floor_divide(zeros({0}, TensorOptions(D::kInt32)), 0).numel(), 0);
  const auto q = floor_divide(tensor({1.0, -1.0}), 0).tolist<double>();
  EXPECT_EQ(q[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(q[1], -std::numeric_limits<double>::infinity());
}

TEST(IntegerDivision, TruncAndFmodSemantics) {
  const Tensor a = tensor({7, -7, 7, -7});
  const Tensor b = tensor({2, 2, -2, -2});
  EXPECT_EQ(div(a, b, RoundingMode::kTrunc).tolist<int>(), (std::vector<int>{3, -3, -3, 3}));
  EXPECT_EQ(div(a, b, RoundingMode::kFloor).tolist<int>(), (std::vector<int>{3, -4, -4, 3}));
  EXPECT_EQ(fmod(a, b).tolist<int>(), (std::vector<int>{1, -1, 1, -1}));
  EXPECT_EQ(div(a, b, RoundingMode::kTrunc).dtype(), D::kInt64);
  EXPECT_EQ(div(a, b, RoundingMode::kNone).dtype(), D::kFloat32);
  EXPECT_EQ(fmod(tensor({7.5, -7.5}), 2).tolist<double>(), (std::vector<double>{1.5, -1.5}));
  EXPECT_EQ(div(tensor({7.5, -7.5}), 2, RoundingMode::kTrunc).tolist<double>(), (std::vector<double>{3, -3}));
  // MIN / -1 wraps (no trap), as floor_divide does.
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(div(full({1}, min, D::kInt64), -1, RoundingMode::kTrunc).tolist<std::int64_t>()[0], min);
  EXPECT_EQ(fmod(full({1}, min, D::kInt64), -1).tolist<std::int64_t>()[0], 0);
}

TEST(Bitwise, IntegersAndBool) {
  const Tensor a = tensor({12, -1, 5});
  const Tensor b = tensor({10, 6, -8});
  EXPECT_EQ((a & b).tolist<std::int64_t>(), (std::vector<std::int64_t>{8, 6, 0}));
  EXPECT_EQ((a | b).tolist<std::int64_t>(), (std::vector<std::int64_t>{14, -1, -3}));
  EXPECT_EQ((a ^ b).tolist<std::int64_t>(), (std::vector<std::int64_t>{6, -7, -3}));
  EXPECT_EQ((~a).tolist<std::int64_t>(), (std::vector<std::int64_t>{-13, 0, -6}));
  const Tensor p = tensor({true, true, false}), q = tensor({true, false, false});
  EXPECT_EQ((p & q).dtype(), D::kBool);
  EXPECT_EQ((p & q).to(D::kInt64).tolist<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_EQ((p | q).to(D::kInt64).tolist<std::int64_t>(), (std::vector<std::int64_t>{1, 1, 0}));
  EXPECT_EQ((p ^ q).to(D::kInt64).tolist<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 0}));
  EXPECT_EQ((~p).to(D::kInt64).tolist<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ((~tensor({0, 255}).to(D::kUInt8)).tolist<int>(), (std::vector<int>{255, 0}));
}

TEST(Bitwise, FloatingOperandsAreTypeErrors) {
  const Tensor f = tensor({1.5, 2.0});
  try {
    bitwise_and(f, f);
    FAIL() << "no error";
  } catch (const TypeMismatchError& e) {
    EXPECT_EQ(e.message(), "bitwise_and is only defined for integer and bool operands, got float32 and float32 "
                           "(float32 together)");
  }
  EXPECT_THROW(f | f, TypeMismatchError);
  EXPECT_THROW(tensor({1, 2}) ^ 0.5, TypeMismatchError);
  EXPECT_THROW(~f, TypeMismatchError);
  EXPECT_THROW(f << 1, TypeMismatchError);
  EXPECT_THROW(tensor({true}) << tensor({true}), TypeMismatchError);
}

TEST(Bitwise, ShiftsFollowNumPy) {
  const Tensor v = tensor({-8, 5, 1}).to(D::kInt8);
  EXPECT_EQ((v << 3).tolist<int>(), (std::vector<int>{-64, 40, 8}));
  EXPECT_EQ((v << 7).tolist<int>(), (std::vector<int>{0, -128, -128}));  // wraps in 8 bits
  EXPECT_EQ((v << 8).tolist<int>(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ((v >> 3).tolist<int>(), (std::vector<int>{-1, 0, 0}));
  EXPECT_EQ((v >> 9).tolist<int>(), (std::vector<int>{-1, 0, 0}));
  EXPECT_EQ((v << -1).tolist<int>(), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ((v >> -1).tolist<int>(), (std::vector<int>{-1, 0, 0}));
  const Tensor u = tensor({200, 5}).to(D::kUInt8);
  EXPECT_EQ((u >> 3).tolist<int>(), (std::vector<int>{25, 0}));
  EXPECT_EQ((u << 3).tolist<int>(), (std::vector<int>{64, 40}));
  const Tensor big = full({1}, 1, D::kInt64);
  EXPECT_EQ((big << 63).tolist<std::int64_t>()[0], std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ((big << 64).tolist<std::int64_t>()[0], 0);
}

}  // namespace
}  // namespace genesis
