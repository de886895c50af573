// Read-only memory (Note [Read-only memory] in storage/storage.h): tensors
// and storages over it read normally and refuse every write with a clear
// error. The memory here is a PROT_READ page, so a write that slipped
// through would kill the test with SIGSEGV rather than pass.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <string>

#include "genesis/storage/batch_storage.h"
#include "genesis/storage/copy.h"
#include "genesis/tensor/api.h"

namespace genesis {
namespace {

constexpr std::size_t kPage = 4096;

// 1024 float32 values 0, 1, 2, ... on a page that is then made PROT_READ.
class ReadOnlyMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    page_ = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page_, MAP_FAILED);
    auto* f = static_cast<float*>(page_);
    for (int i = 0; i < 1024; ++i) f[i] = static_cast<float>(i);
    ASSERT_EQ(::mprotect(page_, kPage, PROT_READ), 0);
    storage_ = Storage::borrow(page_, {1024}, DType::kFloat32, Device{});
    storage_.set_read_only("test page");
    t_ = Tensor(storage_, {32, 32}, {32, 1}, 0);
  }
  void TearDown() override {
    t_ = Tensor();
    storage_ = Storage();
    ::munmap(page_, kPage);
  }
  void* page_ = nullptr;
  Storage storage_;
  Tensor t_;
};

template <typename F>
std::string write_error(F&& f) {
  try {
    f();
  } catch (const InvalidArgumentError& e) {
    return e.message();
  }
  ADD_FAILURE() << "expected the write to be refused";
  return {};
}

void expect_refused(const std::string& message, const char* what) {
  EXPECT_NE(message.find(what), std::string::npos) << message;
  EXPECT_NE(message.find("the source test page is read-only"), std::string::npos) << message;
  EXPECT_NE(message.find("writable copy"), std::string::npos) << message;
}

TEST_F(ReadOnlyMemory, ReadsWork) {
  EXPECT_TRUE(t_.is_read_only());
  EXPECT_TRUE(storage_.is_read_only());
  EXPECT_DOUBLE_EQ(t_.sum().item<double>(), 1023.0 * 1024.0 / 2.0);
  EXPECT_EQ(t_[1][2].item<float>(), 34.0f);
  EXPECT_EQ((t_ + 1)[0][0].item<float>(), 1.0f);
  EXPECT_EQ(matmul(t_, ones({32, 1})).sum().item<double>(), t_.sum().item<double>());
  // Copies are ordinary writable tensors.
  Tensor c = t_.clone();
  EXPECT_FALSE(c.is_read_only());
  c.add_(1);
  EXPECT_EQ(c[0][0].item<float>(), 1.0f);
  EXPECT_FALSE(t_.to(DType::kFloat64).is_read_only());
  EXPECT_TRUE(t_.contiguous().is_read_only());  // the same tensor: already contiguous
}

TEST_F(ReadOnlyMemory, EveryTensorWriteIsRefused) {
  Tensor t = t_;
  const Tensor src = ones({32, 32});
  expect_refused(write_error([&] { t.copy_(src); }), "copy_");
  expect_refused(write_error([&] { t.fill_(Scalar(0)); }), "fill_");
  expect_refused(write_error([&] { t.zero_(); }), "fill_");
  expect_refused(write_error([&] { t.add_(1); }), "add");
  expect_refused(write_error([&] { t.sub_(src); }), "sub");
  expect_refused(write_error([&] { t.mul_(2); }), "mul");
  expect_refused(write_error([&] { t.div_(2); }), "div");
  expect_refused(write_error([&] { t.pow_(2); }), "pow");
  expect_refused(write_error([&] { t.neg_(); }), "neg");
  expect_refused(write_error([&] { t.abs_(); }), "abs");
  expect_refused(write_error([&] { t.exp_(); }), "exp");
  expect_refused(write_error([&] { t.log_(); }), "log");
  expect_refused(write_error([&] { t.sqrt_(); }), "sqrt");
  expect_refused(write_error([&] { t.relu_(); }), "relu");
  expect_refused(write_error([&] { t += 1; }), "add");
  expect_refused(write_error([&] { add_out(t, src, src); }), "add");
  expect_refused(write_error([&] { exp_out(t, src); }), "exp");
  expect_refused(write_error([&] { matmul_out(t, src, src); }), "matmul_out");
  expect_refused(write_error([&] { t.index_put_({0}, Scalar(1)); }), "index_put");
  expect_refused(write_error([&] { t.index_put_({0}, ones({32})); }), "index_put");
  expect_refused(write_error([&] { t.index_put_({IndexItem(zeros({2}, DType::kInt64))}, Scalar(1)); }), "index_put");
  expect_refused(write_error([&] { t.index_put_({IndexItem(t > 5.0)}, Scalar(1), true); }), "index_put");
  // Even zero elements: the refusal does not depend on the data.
  Tensor none = t.narrow(0, 0, 0);
  expect_refused(write_error([&] { none.fill_(Scalar(1)); }), "fill_");
}

TEST_F(ReadOnlyMemory, ViewsAreReadOnlyToo) {
  for (Tensor v : {t_.view({1024}), t_.T(), t_.narrow(1, 3, 4), t_.select(0, 5), t_[{Slice(1, std::nullopt, 2)}],
                   t_.unsqueeze(0), t_.reshape({2, 512}), t_.expand({2, 32, 32})[0]}) {
    EXPECT_TRUE(v.is_read_only());
    expect_refused(write_error([&] { v.fill_(Scalar(7)); }), "fill_");
    expect_refused(write_error([&] { v.mul_(0); }), "mul");
  }
  // The data is untouched.
  EXPECT_EQ(static_cast<const float*>(page_)[1023], 1023.0f);
}

TEST_F(ReadOnlyMemory, StorageWritesAreRefused) {
  Storage s = storage_;
  Storage other = Storage::zeros({1024}, DType::kFloat32, Device{});
  expect_refused(write_error([&] { s.copy_(other); }), "Storage::copy_");
  expect_refused(write_error([&] { copy_storage_bytes(other, s, false); }), "copy_storage");
  // Reading from it into writable memory works.
  other.copy_(s);
  EXPECT_EQ(other.data<float>()[7], 7.0f);
  BatchStorage batch({other});
  std::vector<Storage> targets{s};
  expect_refused(write_error([&] { batch.batch_copy(targets); }), "BatchStorage::batch_copy");
}

TEST(ReadOnlyStorage, FlagIsOptIn) {
  Storage s = Storage::zeros({4}, DType::kInt32, Device{});
  EXPECT_FALSE(s.is_read_only());
  EXPECT_EQ(s.impl()->read_only_source(), nullptr);
  EXPECT_THROW(s.set_read_only(""), InvalidArgumentError);
  s.set_read_only("NumPy array");
  EXPECT_STREQ(s.impl()->read_only_source(), "NumPy array");
  EXPECT_THROW(Storage().set_read_only("x"), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis
