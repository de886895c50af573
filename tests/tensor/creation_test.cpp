// Tensor creation, metadata, conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "genesis/cuda/runtime.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/tensor/api.h"
#include "genesis/tensor/backend.h"
#include "../support/process_util.h"

namespace genesis {
namespace {

TEST(TensorCreation, FromNestedBraces) {
  Tensor t = tensor({{1.0, 2.0}, {3.0, 4.0}});
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.strides(), (Shape{2, 1}));
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_EQ(t.tolist<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(tensor({1, 2, 3}).dtype(), DType::kInt64);
  EXPECT_EQ(tensor({true, false}).dtype(), DType::kBool);
  EXPECT_EQ(tensor({1, 2}, DType::kFloat16).dtype(), DType::kFloat16);
  Tensor s = tensor(3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<double>(), 3.5);
  Tensor c = tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}});
  EXPECT_EQ(c.shape(), (Shape{2, 2, 2}));
  EXPECT_THROW(tensor({{1, 2}, {3}}), InvalidArgumentError);
  Tensor v = tensor(std::vector<int>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  EXPECT_THROW(tensor(std::vector<int>{1, 2, 3}, Shape{2, 2}), InvalidArgumentError);
}

TEST(TensorCreation, Factories) {
  EXPECT_EQ(zeros({2, 3}).tolist<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({4}, DType::kInt32).tolist<int>(), std::vector<int>(4, 1));
  EXPECT_EQ(full({2}, 7).dtype(), DType::kFloat32);
  EXPECT_EQ(full({2}, 7, std::nullopt, Device{}).dtype(), DType::kInt64);
  EXPECT_EQ(full({2}, 2.5, DType::kFloat64).tolist<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
  EXPECT_THROW(zeros({-1}), InvalidArgumentError);
  Tensor x = rand({3, 4}, DType::kFloat64);
  EXPECT_EQ(zeros_like(x).dtype(), DType::kFloat64);
  EXPECT_EQ(ones_like(x).shape(), (Shape{3, 4}));
  EXPECT_EQ(full_like(x, 2).sum().item<double>(), 24.0);
  EXPECT_EQ(empty_like(x).shape(), x.shape());
  EXPECT_EQ(rand_like(x).dtype(), DType::kFloat64);
  EXPECT_EQ(randn_like(x).shape(), x.shape());
}


TEST(TensorCreation, FillValuesMustFitTheDtype) {
  EXPECT_TRUE(fits_in(Scalar(std::int64_t{255}), DType::kUInt8));
  EXPECT_FALSE(fits_in(Scalar(std::int64_t{256}), DType::kUInt8));
  EXPECT_FALSE(fits_in(Scalar(std::int64_t{-1}), DType::kUInt8));
  EXPECT_TRUE(fits_in(Scalar(-128.9), DType::kInt8));  // truncates to -128
  EXPECT_FALSE(fits_in(Scalar(-129.0), DType::kInt8));
  EXPECT_FALSE(fits_in(Scalar(std::nan("")), DType::kInt32));
  EXPECT_TRUE(fits_in(Scalar(-9223372036854775808.0), DType::kInt64));
  EXPECT_FALSE(fits_in(Scalar(9223372036854775808.0), DType::kInt64));
  EXPECT_TRUE(fits_in(Scalar(1e300), DType::kFloat16));  // inf, as a cast gives
  EXPECT_TRUE(fits_in(Scalar(std::int64_t{1} << 40), DType::kBool));
  EXPECT_EQ(test::error_message([] { full({2}, Scalar(std::int64_t{1} << 40), DType::kInt32); }),
            "value 1099511627776 cannot be converted to int32 without overflow");
  EXPECT_EQ(test::error_message([] { full({2}, Scalar(1e10), DType::kInt32); }),
            "value 1e+10 cannot be converted to int32 without overflow");
  EXPECT_EQ(test::error_message([] { full({2}, Scalar(std::nan("")), DType::kInt64); }),
            "value nan cannot be converted to int64 (an integer dtype has no NaN)");
  Tensor x = zeros({2}, DType::kInt32);
  EXPECT_THROW(x.fill_(Scalar(std::int64_t{1} << 40)), InvalidArgumentError);
  EXPECT_THROW(x.index_put_({IndexItem(std::int64_t{0})}, Scalar(std::int64_t{1} << 40)), InvalidArgumentError);
  EXPECT_EQ(x.tolist<int>(), (std::vector<int>{0, 0}));  // nothing written
  EXPECT_EQ(full({2}, Scalar(2.9), DType::kInt32).tolist<int>(), (std::vector<int>{2, 2}));  // truncation
  EXPECT_EQ(full({1}, Scalar(std::int64_t{-5}), DType::kBool).tolist<bool>(), (std::vector<bool>{true}));
}

TEST(TensorCreation, RandintRangeMustFitTheDtype) {
  EXPECT_EQ(test::error_message([] { randint(0, 300, {4}, TensorOptions(DType::kUInt8)); }),
            "randint: high 300 is out of range for uint8 (at most 256)");
  EXPECT_EQ(test::error_message([] { randint(-1, 10, {4}, TensorOptions(DType::kUInt8)); }),
            "randint: low -1 is out of range for uint8 (at least 0)");
  EXPECT_THROW(randint(0, (std::int64_t{1} << 24) + 2, {4}, TensorOptions(DType::kFloat32)), InvalidArgumentError);
  const Tensor all = randint(0, 256, {4096}, TensorOptions(DType::kUInt8));
  EXPECT_EQ(all.max().item<int>(), 255);
  EXPECT_EQ(randint(-128, 128, {8}, TensorOptions(DType::kInt8)).dtype(), DType::kInt8);
}

TEST(TensorCreation, Arange) {
  EXPECT_EQ(arange(5).tolist<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), DType::kInt64);
  EXPECT_EQ(arange(0, 100).view({10, 10}).shape(), (Shape{10, 10}));
  EXPECT_EQ(arange(1, 10, 3).tolist<int>(), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(arange(10, 0, -3).tolist<int>(), (std::vector<int>{10, 7, 4, 1}));
  Tensor f = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(f.dtype(), DType::kFloat32);
  EXPECT_EQ(f.tolist<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(0, 1, 0.3).numel(), 4);  // ceil(1/0.3)
  EXPECT_EQ(arange(3, std::nullopt, Device{}).numel(), 3);
  EXPECT_EQ(arange(0, 4, 1, DType::kFloat16).dtype(), DType::kFloat16);
  EXPECT_EQ(arange(5, 5).numel(), 0);
  EXPECT_THROW(arange(0, 5, 0), InvalidArgumentError);
  EXPECT_THROW(arange(0, 5, -1), InvalidArgumentError);
}

TEST(TensorCreation, ToDtypeAndItem) {
  Tensor t = tensor({1.5, -2.7, 300.0});
  EXPECT_EQ(t.to(DType::kInt32).tolist<int>(), (std::vector<int>{1, -2, 300}));
  EXPECT_EQ(t.to(DType::kUInt8).tolist<int>(), (std::vector<int>{1, 254, 44}));
  EXPECT_EQ(t.to(DType::kBool).tolist<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(t.to(DType::kFloat32).is_same(t), true);
  EXPECT_EQ(t.cpu().is_same(t), true);
  EXPECT_EQ(tensor({7}, DType::kInt16)[0].item<int>(), 7);
  EXPECT_THROW(t.item(), InvalidArgumentError);
  EXPECT_TRUE(tensor(2.0).item().is_floating());
  EXPECT_TRUE(tensor(2).item().is_integral());
  EXPECT_TRUE(tensor(true).item().is_bool());
}

TEST(TensorCreation, ViewsShareStorageAndHandlesShareState) {
  Tensor a = zeros({4});
  Tensor b = a;  // same handle
  b.add_(1);
  EXPECT_EQ(a.tolist<float>(), std::vector<float>(4, 1.0f));
  Tensor v = a.view({2, 2});
  v.fill_(3);
  EXPECT_EQ(a.tolist<float>(), std::vector<float>(4, 3.0f));
  EXPECT_EQ(v.storage(), a.storage());
  Tensor c = a.clone();
  c.fill_(0);
  EXPECT_EQ(a.sum().item<float>(), 12.0f);
}

TEST(TensorCreation, ContiguityAndMetadata) {
  Tensor x = arange(24).view({2, 3, 4});
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_EQ(x.stride(0), 12);
  EXPECT_THROW(x.size(3), IndexError);
  Tensor t = x.transpose(0, 2);
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{6, 2, 1}));
  EXPECT_TRUE(equal(c, t));
  EXPECT_EQ(x.nbytes(), 24u * 8u);
  EXPECT_EQ(x.element_size(), 8u);
}

TEST(TensorCreation, MemoryIsPooled) {
  auto& alloc = memory::allocator_for(Device{});
  const auto before = alloc.stats().allocated_bytes[0].current;
  {
    Tensor big = zeros({1024, 1024});
    EXPECT_GE(alloc.stats().allocated_bytes[0].current, before + 4 * 1024 * 1024);
  }
  EXPECT_EQ(alloc.stats().allocated_bytes[0].current, before);
}

TEST(TensorCreation, FromStorageViewSharesMemory) {
  Storage s = create_storage(std::vector<float>{0, 1, 2, 3, 4, 5}, Device{});
  StorageView v(s, 1, {2, 2}, {2, 1});
  Tensor t = from_storage_view(v);
  EXPECT_EQ(t.tolist<float>(), (std::vector<float>{1, 2, 3, 4}));
  t.fill_(9);
  EXPECT_EQ(s.data<float>()[1], 9.0f);
  EXPECT_EQ(t.data_ptr(), v.data_ptr());
}

TEST(TensorBackend, CpuTableCompleteCudaTableWithCuda) {
  const auto& cpu = kernels::kernels_for(DeviceType::kCPU);
  EXPECT_NE(cpu.fill, nullptr);
  EXPECT_NE(cpu.copy, nullptr);
  EXPECT_NE(cpu.matmul, nullptr);
  EXPECT_NE(cpu.nonzero, nullptr);
  EXPECT_NE(cpu.scatter, nullptr);
  // The CUDA table is filled exactly when Genesis is built with CUDA
  // (src/tensor/cuda/cuda_backend.cpp).
  const auto& cuda = kernels::kernels_for(DeviceType::kCUDA);
  EXPECT_EQ(cuda.binary != nullptr, cuda::compiled_with_cuda());
}

}  // namespace
}  // namespace genesis
