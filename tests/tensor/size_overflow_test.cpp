// Sizes that do not fit in int64 fail with a clear error instead of wrapping
// into a small, valid-looking size (Note [Size overflow]).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "genesis/core/checked_math.h"
#include "genesis/storage/storage_view.h"
#include "genesis/tensor/api.h"

namespace genesis {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t k2p32 = std::int64_t{1} << 32;
constexpr std::int64_t k2p62 = std::int64_t{1} << 62;

// Runs f, expects InvalidArgumentError, returns its message.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidArgumentError& e) {
    return e.message();
  }
  ADD_FAILURE() << "expected InvalidArgumentError";
  return {};
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(SizeOverflow, CheckedHelpers) {
  std::int64_t out = 0;
  EXPECT_TRUE(mul_fits(k2p32, k2p32 / 2 - 1, out));
  EXPECT_FALSE(mul_fits(k2p32, k2p32, out));
  EXPECT_FALSE(add_fits(kMax, 1, out));
  EXPECT_TRUE(add_fits(kMax, -1, out));
  EXPECT_EQ(out, kMax - 1);
  EXPECT_EQ(checked_mul(-3, 7, "x"), -21);
  EXPECT_HAS(error_of([] { checked_mul(k2p62, 4, "what"); }), "what: 4611686018427387904 * 4 overflows");
  EXPECT_HAS(error_of([] { checked_add(kMax, kMax, "sum"); }), "sum: ");
  EXPECT_EQ(checked_numel(Shape{}), 1);
  EXPECT_EQ(checked_numel(Shape{3, 0, 5}), 0);
  EXPECT_EQ(checked_numel(Shape{kMax}), kMax);
  EXPECT_HAS(error_of([] { checked_numel(Shape{k2p32, k2p32, k2p32}); }),
             "shape [4294967296, 4294967296, 4294967296] has more than 2^63-1 elements");
  // Zero elements, but contiguous strides (sizes 0 counted as 1) would wrap.
  EXPECT_HAS(error_of([] { checked_numel(Shape{0, k2p62, 4}); }), "nonzero sizes multiply to more than 2^63-1");
  EXPECT_HAS(error_of([] { checked_numel(Shape{2, -1}, "who"); }), "who: negative dimension -1 in shape [2, -1]");
  EXPECT_EQ(checked_nbytes(Shape{2, 3}, 8), 48);
  EXPECT_EQ(checked_nbytes(Shape{0, 3}, 8), 0);
  EXPECT_HAS(error_of([] { checked_nbytes(Shape{k2p62}, 2); }), "byte size overflows");
}

TEST(SizeOverflow, CreationOfTooManyElements) {
  EXPECT_HAS(error_of([] { zeros({k2p32, k2p32, k2p32}); }),
             "shape [4294967296, 4294967296, 4294967296] has more than 2^63-1 elements");
  EXPECT_HAS(error_of([] { empty({k2p32, k2p32}); }), "has more than 2^63-1 elements");
  EXPECT_HAS(error_of([] { ones({k2p62, 4}); }), "has more than 2^63-1 elements");
  EXPECT_HAS(error_of([] { rand({k2p32, k2p32, 2}); }), "has more than 2^63-1 elements");
  EXPECT_HAS(error_of([] { full({k2p32, k2p32, 2}, Scalar(1.0)); }), "has more than 2^63-1 elements");
  // A byte size beyond 2^63-1 with an element count that fits.
  EXPECT_HAS(error_of([] { empty({k2p62}, DType::kFloat64); }), "byte size overflows");
  // The shape asked for, not the flat storage behind it, and no function name.
  EXPECT_EQ(error_of([] { zeros({std::int64_t{1} << 31, std::int64_t{1} << 31}); }),
            "shape [2147483648, 2147483648] (4611686018427387904 elements of 4 bytes) is too large: its byte size "
            "overflows 2^63-1");
  EXPECT_HAS(error_of([] { Storage::empty({k2p32, k2p32}, DType::kUInt8, Device{}); }), "more than 2^63-1");
}

TEST(SizeOverflow, ExpandBeyondInt64) {
  const Tensor x = ones({2});
  EXPECT_HAS(error_of([&] { x.expand({k2p62, 2}); }), "[4611686018427387904, 2] has more than 2^63-1 elements");
  EXPECT_HAS(error_of([&] { x.expand({k2p32, k2p32, 2}); }), "has more than 2^63-1 elements");
  // nbytes() must fit too: 2^61 x 2 float32 elements are 2^64 bytes.
  EXPECT_HAS(error_of([&] { x.expand({std::int64_t{1} << 61, 2}); }), "byte size overflows");
  // Large but representable expansions still work, and their sizes are right.
  const Tensor big = x.expand({std::int64_t{1} << 40, 2});
  EXPECT_EQ(big.numel(), std::int64_t{1} << 41);
  EXPECT_EQ(big.nbytes(), std::size_t{1} << 43);
  EXPECT_EQ(ones({1}).expand({3}).sum().item<double>(), 3.0);
}

TEST(SizeOverflow, NarrowPastInt64) {
  const Tensor x = arange(10);
  // start + length wraps to a negative number, which is <= 10.
  EXPECT_HAS(error_of([&] { x.narrow(0, 5, kMax - 3); }), "exceeds dimension size (10)");
  EXPECT_HAS(error_of([&] { x.narrow(0, kMax, 1); }), "exceeds dimension size");
  EXPECT_HAS(error_of([&] { x.narrow(0, 1, kMax); }), "exceeds dimension size");
  EXPECT_EQ(x.narrow(0, 7, 3).tolist<std::int64_t>(), (std::vector<std::int64_t>{7, 8, 9}));
  EXPECT_EQ(x.narrow(0, 10, 0).numel(), 0);
}

TEST(SizeOverflow, SlicesWithHugeSteps) {
  const Tensor x = arange(10).view({5, 2});  // strides [2, 1]
  // stride 2 x step 2^62 does not fit; one element is selected, as in NumPy.
  const Tensor s = x.slice(0, 1, std::nullopt, k2p62);
  EXPECT_EQ(s.shape(), (Shape{1, 2}));
  EXPECT_EQ(s.tolist<std::int64_t>(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1, 1, 2}));
  const Tensor r = x.slice(0, std::nullopt, std::nullopt, -k2p62);
  EXPECT_EQ(r.tolist<std::int64_t>(), (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(x.slice(0, kMax, std::nullopt, 1).numel(), 0);
  EXPECT_EQ(x.slice(0, -kMax, kMax, 1).numel(), 10);
}

TEST(SizeOverflow, ViewAndReshape) {
  const Tensor x = arange(12);
  EXPECT_HAS(error_of([&] { x.view({k2p32, k2p32, -1}); }), "is invalid for input of size 12");
  EXPECT_HAS(error_of([&] { x.reshape({k2p32, k2p32, k2p32}); }), "is invalid for input of size 12");
  EXPECT_EQ(x.view({3, -1}).shape(), (Shape{3, 4}));
  const Tensor e = zeros({0});
  EXPECT_HAS(error_of([&] { e.view({0, k2p62, 4}); }), "nonzero sizes multiply to more than 2^63-1");
}

TEST(SizeOverflow, SplitAndChunkWithHugeSizes) {
  const Tensor x = arange(5);
  auto parts = x.split(kMax);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].numel(), 5);
  parts = x.chunk(kMax);  // len + chunks - 1 would wrap
  ASSERT_EQ(parts.size(), 5u);
  // A long expanded dimension split into huge pieces: s + split_size would wrap.
  const Tensor long_dim = ones({1}, DType::kUInt8).expand({k2p62 + 5});
  parts = long_dim.split(k2p62);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].numel(), k2p62);
  EXPECT_EQ(parts[1].numel(), 5);
  EXPECT_HAS(error_of([&] { long_dim.split(std::vector<std::int64_t>{kMax, kMax}); }), "sum to more than 2^63-1");
}

TEST(SizeOverflow, CatAndStackTotals) {
  const Tensor a = ones({1, 1}, DType::kUInt8).expand({k2p62, 1});
  EXPECT_HAS(error_of([&] { cat({a, a}, 0); }), "add up to more than 2^63-1");
  EXPECT_HAS(error_of([&] { stack({a, a}, 1); }), "[4611686018427387904, 2, 1] has more than 2^63-1 elements");
  EXPECT_EQ(cat({ones({2}), zeros({3})}).tolist<float>(), (std::vector<float>{1, 1, 0, 0, 0}));
}

TEST(SizeOverflow, ArangeLengths) {
  EXPECT_HAS(error_of([] { arange(Scalar(std::numeric_limits<std::int64_t>::min()), Scalar(kMax), Scalar(1)); }),
             "has more than 2^63-1 elements");
  EXPECT_HAS(error_of([] { arange(Scalar(-1e300), Scalar(1e300), Scalar(1.0)); }), "has more than 2^63-1 elements");
  // The largest spans that fit are computed exactly (no wrap in b - a).
  const Tensor t = arange(Scalar(std::numeric_limits<std::int64_t>::min()), Scalar(kMax), Scalar(k2p62));
  EXPECT_EQ(t.tolist<std::int64_t>(), (std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), -k2p62,
                                                                  0, k2p62}));
  EXPECT_EQ(arange(Scalar(kMax), Scalar(std::numeric_limits<std::int64_t>::min()), Scalar(-kMax)).numel(), 3);
}

TEST(SizeOverflow, LayoutsThatWouldWrapIntoTheStorage) {
  const Storage s = Storage::empty({4}, DType::kFloat32, Device{});
  // (2 - 1) * 2^62 * 4 wraps; lo/hi sums wrap.
  EXPECT_HAS(error_of([&] { Tensor(s, {2, 2}, {k2p62, k2p62}, 0); }), "beyond +-(2^63-1)");
  EXPECT_HAS(error_of([&] { Tensor(s, {3}, {kMax}, 0); }), "beyond +-(2^63-1)");
  EXPECT_HAS(error_of([&] { Tensor(s, {2}, {kMax}, 1); }), "beyond +-(2^63-1)");
  EXPECT_NO_THROW(Tensor(s, {2, 2}, {2, 1}, 0));
}

TEST(SizeOverflow, MatmulBatchAndIndexPlans) {
  const Tensor a = ones({1, 1, 1, 1}).expand({k2p32, 1, 1, 1});
  const Tensor b = ones({1, 1, 1, 1}).expand({1, k2p32, 1, 1});
  EXPECT_HAS(error_of([&] { matmul(a, b); }), "has more than 2^63-1 elements");
  const Tensor x = ones({1, 1}, DType::kUInt8).expand({k2p32, k2p32 / 4});
  const Tensor idx = zeros({4}, DType::kInt64);
  // x[:, idx] fits ([2^32, 4]); a result of 2^32 x 2^29 x 16 elements does not.
  EXPECT_EQ(plan_index(x, {Slice(), IndexItem(idx)}).result_shape, (Shape{k2p32, 4}));
  const Tensor y = ones({1, 1, 1}, DType::kUInt8).expand({k2p32, k2p32 / 8, 2});
  EXPECT_HAS(error_of([&] { plan_index(y, {Slice(), Slice(), IndexItem(zeros({16}, DType::kInt64))}); }),
             "more than 2^63-1");
}

TEST(SizeOverflow, ContiguousStrides) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({0, 3}), (std::vector<std::int64_t>{3, 1}));
  EXPECT_HAS(error_of([] { contiguous_strides({2, k2p62, 4}); }), "overflows");
}

}  // namespace
}  // namespace genesis
