// Tensors on a CUDA device before the CUDA kernels exist: transfers work
// (Note [Cross-device copies]), operations report that their kernel is
// missing (Note [Kernel tables]). Skips without a GPU.
#include <gtest/gtest.h>

#include "genesis/cuda/runtime.h"
#include "genesis/tensor/api.h"
#include "genesis/tensor/backend.h"

namespace genesis {
namespace {

class GpuTensor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA GPU available";
  }
  Device gpu{DeviceType::kCUDA, 0};
};

TEST_F(GpuTensor, TransfersNeedNoKernels) {
  Tensor h = tensor({{1.0, 2.0}, {3.0, 4.0}});
  Tensor d = h.to(gpu);
  EXPECT_TRUE(d.device().is_cuda());
  EXPECT_EQ(d.str(), "tensor([[1., 2.],\n        [3., 4.]], device='cuda:0')");
  EXPECT_TRUE(equal(d.cpu(), h));
  Tensor d16 = h.to(gpu, DType::kFloat16);  // cast on the host side
  EXPECT_EQ(d16.cpu().tolist<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(tensor({5, 6}, std::nullopt, gpu)[1].item<int>(), 6);
}

TEST_F(GpuTensor, MissingKernelsAreClearErrors) {
  if (kernels::kernels_for(DeviceType::kCUDA).binary != nullptr) GTEST_SKIP() << "CUDA kernels are registered";
  Tensor d = empty({4}, gpu);
  try {
    d + 1;
    FAIL() << "expected an error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(e.message().find("add is not available on cuda yet"), std::string::npos) << e.message();
  }
  EXPECT_THROW(zeros({2}, gpu), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis
