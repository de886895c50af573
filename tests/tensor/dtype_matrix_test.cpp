// Every dtype through the element-wise kernels, reductions and casts,
// against the same computation done wide (float64 / int64) and cast back:
// catches dispatch and cast slips. Inputs are reversed views, so the strided
// kernel paths run too.
#include <gtest/gtest.h>

#include <cmath>

#include "genesis/tensor/api.h"

namespace genesis {
namespace {

const DType kEveryDType[] = {DType::kBool,   DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,
                      DType::kInt64,  DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

Tensor sample(DType dt) {
  if (dt == DType::kBool) return tensor({true, false, true, true, false, true});
  if (dt == DType::kUInt8) return tensor({1, 2, 3, 7, 9, 12}, dt);
  return tensor({-3, -1, 2, 5, 7, 12}, dt);
}

Tensor reversed(const Tensor& t) { return t[{Slice(None, None, -1)}]; }

DType wide(DType dt) { return is_floating(dt) ? DType::kFloat64 : DType::kInt64; }

TEST(TensorDtypeMatrix, BinaryOpsMatchWideReference) {
  for (DType dt : kEveryDType) {
    if (dt == DType::kBool) continue;
    SCOPED_TRACE(testing::Message() << dt);
    const Tensor a = sample(dt), b = reversed(sample(dt));
    const Tensor wa = a.to(wide(dt)), wb = b.to(wide(dt));
    EXPECT_TRUE(equal(add(a, b), add(wa, wb).to(dt)));
    EXPECT_TRUE(equal(sub(a, b), sub(wa, wb).to(dt)));
    EXPECT_TRUE(equal(mul(a, b), mul(wa, wb).to(dt)));
    EXPECT_TRUE(equal(maximum(a, b), maximum(wa, wb).to(dt)));
    EXPECT_TRUE(equal(minimum(a, b), minimum(wa, wb).to(dt)));
    EXPECT_TRUE(equal(a > b, wa > wb));
    EXPECT_TRUE(equal(a <= b, wa <= wb));
    EXPECT_TRUE(equal(a == b, wa == wb));
    EXPECT_TRUE(equal(remainder(a, b), remainder(wa, wb).to(dt)));
    EXPECT_TRUE(equal(floor_divide(a, b), floor_divide(wa, wb).to(dt)));
    EXPECT_TRUE(allclose(div(a, b), div(wa, wb).to(div(a, b).dtype()), 1e-2, 1e-3));
    EXPECT_TRUE(equal(a + 3, (wa + 3).to(dt)));
    EXPECT_TRUE(equal(where(a > 2, a, b), where(wa > 2, wa, wb).to(dt)));
  }
}

TEST(TensorDtypeMatrix, UnaryOpsAndReductionsMatchWideReference) {
  for (DType dt : kEveryDType) {
    SCOPED_TRACE(testing::Message() << dt);
    const Tensor a = reversed(sample(dt));
    const Tensor wa = a.to(wide(dt));
    if (dt != DType::kBool) {
      EXPECT_TRUE(equal(neg(a), neg(wa).to(dt)));
      EXPECT_TRUE(equal(abs(a), abs(wa).to(dt)));
      EXPECT_TRUE(equal(relu(a), relu(wa).to(dt)));
    }
    if (is_floating(dt)) {
      const double tol = dtype_size(dt) == 2 ? 1e-2 : 1e-6;
      EXPECT_TRUE(allclose(exp(a / 4), exp(wa / 4).to(dt), tol, tol));
      EXPECT_TRUE(allclose(sqrt(abs(a)), sqrt(abs(wa)).to(dt), tol, tol));
      EXPECT_TRUE(allclose(log(abs(a)), log(abs(wa)).to(dt), tol, tol));
      EXPECT_TRUE(allclose(a.mean(), wa.mean().to(dt), tol, tol));
    }
    EXPECT_TRUE(equal(logical_not(a), logical_not(wa)));
    // Floating sums keep the dtype (bfloat16 rounds 2520 to 2528); integer
    // sums are int64 like the reference.
    const DType acc = is_floating(dt) ? dt : DType::kInt64;
    EXPECT_EQ(a.sum().item().to_double(), wa.sum().to(acc).item().to_double());
    EXPECT_EQ(a.prod().item().to_double(), wa.prod().to(acc).item().to_double());
    EXPECT_EQ(a.max().item().to_double(), wa.max().item().to_double());
    EXPECT_EQ(a.min().item().to_double(), wa.min().item().to_double());
    EXPECT_EQ(a.argmax().item<std::int64_t>(), wa.argmax().item<std::int64_t>());
    EXPECT_EQ(a.argmin().item<std::int64_t>(), wa.argmin().item<std::int64_t>());
  }
}

TEST(TensorDtypeMatrix, StridedCastsAgreeWithStorageConversion) {
  // The kernel's strided cast (core/cast.h) against convert_dtype of the
  // storage layer (contiguous path), for all 100 pairs, with values that
  // overflow the narrow types.
  const Tensor src = tensor({-3.7, -1.0, 2.5, 300.0, 70000.0, -1e10, 0.0, 1e-30});
  for (DType from : kEveryDType) {
    const Tensor x = src.to(from);
    for (DType to : kEveryDType) {
      SCOPED_TRACE(testing::Message() << from << " -> " << to);
      const Tensor strided = reversed(x).to(to);         // copy kernel, strided
      const Tensor packed = reversed(x.to(to));          // convert_dtype, then a view
      const auto s = strided.tolist<double>(), p = packed.tolist<double>();
      ASSERT_EQ(s.size(), p.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (std::isnan(p[i])) EXPECT_TRUE(std::isnan(s[i]));
        else EXPECT_EQ(s[i], p[i]) << "element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace genesis
