// GPU tests of the public Tensor API: the same calls on cuda and on cpu give
// the same results (creation, ops, indexing, fused mask selection, full
// reductions on several streams), and index errors found by a kernel are
// raised with the CPU's message, at the call or at the next synchronisation.

#include "support/gpu_kernel_check.h"

#include <functional>

#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/stream.h"

#if GENESIS_WITH_CUDA

namespace genesis {
namespace {

using namespace gpu_test;  // NOLINT: the shared helpers of the GPU kernel tests

// ------------------------------------------------------- Tensor API ---

class GpuTensorApi : public ::testing::Test {
 protected:
  void SetUp() override { GENESIS_SKIP_WITHOUT_GPU(); }
  static Device gpu() { return Device{DeviceType::kCUDA, 0}; }
};

void expect_close(const Tensor& cpu_result, const Tensor& gpu_result, const std::string& what, double rtol = 0,
                  double atol = 0) {
  ASSERT_EQ(gpu_result.device().type(), DeviceType::kCUDA) << what;
  const Tensor back = gpu_result.cpu();
  ASSERT_EQ(back.shape(), cpu_result.shape()) << what;
  ASSERT_EQ(back.dtype(), cpu_result.dtype()) << what;
  if (rtol == 0 && atol == 0) {
    EXPECT_TRUE(equal(back, cpu_result)) << what << "\ncpu:\n" << cpu_result << "\ncuda:\n" << back;
  } else {
    EXPECT_TRUE(allclose(back, cpu_result, rtol, atol)) << what << "\ncpu:\n" << cpu_result << "\ncuda:\n" << back;
  }
}

TEST_F(GpuTensorApi, CreationMatchesCpu) {
  expect_close(zeros({3, 4}), zeros({3, 4}, gpu()), "zeros");
  expect_close(ones({5}, DType::kInt8), ones({5}, TensorOptions(DType::kInt8, gpu())), "ones int8");
  expect_close(arange(0, 10, 3), arange(0, 10, 3, std::nullopt, gpu()), "arange int");
  expect_close(arange(0.5, 3.0, 0.25), arange(0.5, 3.0, 0.25, std::nullopt, gpu()), "arange float");
  manual_seed(7);
  const Tensor rc = rand({100, 3});
  const Tensor nc = randn({1000});
  const Tensor ic = randint(-5, 9, {50});
  manual_seed(7);
  const Tensor rg = rand({100, 3}, gpu());
  const Tensor ng = randn({1000}, gpu());
  const Tensor ig = randint(-5, 9, {50}, TensorOptions(DType::kInt64, gpu()));
  expect_close(rc, rg, "rand: same seed, same numbers");
  expect_close(nc, ng, "randn: same seed, same numbers", 1e-6, 1e-6);
  expect_close(ic, ig, "randint: same seed, same numbers");
  const Tensor t = tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}, std::nullopt, gpu());
  expect_close(tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}), t, "tensor(data)");
  expect_close(stack({tensor({1, 2}), tensor({3, 4})}, 1),
               stack({tensor({1, 2}, std::nullopt, gpu()), tensor({3, 4}, std::nullopt, gpu())}, 1), "stack");
}

TEST_F(GpuTensorApi, OpsMatchCpu) {
  manual_seed(3);
  const Tensor x = randn({64, 33});
  const Tensor y = randn({64, 33});
  const Tensor xg = x.to(gpu()), yg = y.to(gpu());
  expect_close(x + y, xg + yg, "add");
  expect_close(x - 2.5, xg - 2.5, "sub scalar");
  expect_close(x * y, xg * yg, "mul");
  expect_close(x / y, xg / yg, "div");
  expect_close(exp(x), exp(xg), "exp", 1e-6, 1e-6);
  expect_close(relu(x), relu(xg), "relu");
  expect_close(x > 0.5, xg > 0.5, "x > 0.5");
  expect_close(pow(x, 2), pow(xg, 2), "pow", 1e-6, 1e-6);
  expect_close(x.sum(), xg.sum(), "sum()", 1e-5, 1e-5);
  expect_close(x.sum(0), xg.sum(0), "sum(0)", 1e-5, 1e-5);
  expect_close(x.sum({0, 1}), xg.sum({0, 1}), "sum((0, 1))", 1e-5, 1e-5);
  expect_close(x.mean(), xg.mean(), "mean", 1e-5, 1e-6);
  auto [vc, ic] = x.max(1);
  auto [vg, ig] = xg.max(1);
  expect_close(vc, vg, "max(1) values");
  expect_close(ic, ig, "max(1) indices");
  expect_close(x.transpose(0, 1).contiguous(), xg.transpose(0, 1).contiguous(), "transpose().contiguous()");
  expect_close(matmul(x, y.transpose(0, 1)), matmul(xg, yg.transpose(0, 1)), "matmul", 1e-4, 1e-4);
  Tensor a = x.clone(), ag = xg.clone();
  a += y;
  ag += yg;
  a.mul_(2);
  ag.mul_(2);
  a.exp_();
  ag.exp_();
  expect_close(a, ag, "in place += mul_ exp_", 1e-6, 1e-6);
}

// x[mask] through the tensor API (Note [Fused mask selection]): cuda vs the
// cpu result, and both vs the general nonzero + gather path (x[mask, ...]).
TEST_F(GpuTensorApi, FusedMaskSelectMatchesCpu) {
  manual_seed(21);
  const std::vector<Shape> shapes = {{1}, {1000}, {33, 65}, {3, 5, 7}, {0, 4}, {4, 0}, {257, 129}};
  for (DType t : kAllDTypes) {
    for (const Shape& shape : shapes) {
      const Tensor x = (randn(shape) * 10).to(t);
      const Tensor xg = x.to(gpu());
      for (std::size_t k = 1; k <= shape.size(); ++k) {
        const Shape lead(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(k));
        for (int kind = 0; kind < 3; ++kind) {
          const Tensor mask = kind == 0 ? rand(lead) > 0.5 : kind == 1 ? zeros(lead, DType::kBool) : ones(lead, DType::kBool);
          std::ostringstream what;
          what << "x[mask] dtype " << dtype_name(t) << " x shape " << ::testing::PrintToString(shape) << " mask dims " << k
               << (kind == 0 ? " random" : kind == 1 ? " all-false" : " all-true");
          const Tensor cpu_result = x[mask];
          expect_close(cpu_result, xg[mask.to(gpu())], what.str());
          expect_close(cpu_result, xg[{mask.to(gpu()), Ellipsis}], what.str() + " (general path)");
        }
      }
    }
  }
  // Non-contiguous x and mask on the GPU.
  const Tensor x = randn({40, 30});
  const Tensor m = randn({30, 40}) > 0;
  expect_close(x.transpose(0, 1)[m], x.to(gpu()).transpose(0, 1)[m.to(gpu())], "transposed x[mask]");
  const Tensor mt = m.transpose(0, 1);
  expect_close(x[mt], x.to(gpu())[m.to(gpu()).transpose(0, 1)], "transposed mask");
}

// Note [One-pass full reductions]: the last block of a full reduction
// merges the partials, counted through a per-stream counter that it resets.
// Sums queued on several streams at once must neither mix their counts nor
// leave a counter dirty, and the merge order is fixed: every sum of the same
// input has the same bits.
TEST_F(GpuTensorApi, FullReductionsOnSeveralStreamsAtOnce) {
  manual_seed(5);
  const Tensor x = randn({std::int64_t{1} << 22});  // large enough to split over many blocks
  const Tensor xg = x.to(gpu());
  const double want = x.sum().item().to_double();
  cuda::synchronize_device(0);
  std::vector<cuda::Stream> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(cuda::Stream::create(0));
  std::vector<Tensor> sums;
  for (int rep = 0; rep < 8; ++rep) {
    for (const auto& s : streams) {
      const cuda::StreamGuard guard(s);
      sums.push_back(xg.sum());
      sums.push_back(xg.to(DType::kFloat64).sum());  // another accumulator type, same counters
    }
  }
  cuda::synchronize_device(0);
  const double first32 = sums[0].item().to_double(), first64 = sums[1].item().to_double();
  EXPECT_NEAR(first32, want, 1e-2);
  EXPECT_NEAR(first64, want, 1e-6 * (1.0 + std::abs(want)));
  for (std::size_t i = 0; i < sums.size(); i += 2) {
    EXPECT_EQ(sums[i].item().to_double(), first32) << "sum " << i;
    EXPECT_EQ(sums[i + 1].item().to_double(), first64) << "sum " << i + 1;
  }
  // The counters are clean afterwards: a sum on the default stream is right too.
  EXPECT_EQ(xg.sum().item().to_double(), first32);
}

// GENESIS_SYNC_INDEX_CHECKS for one scope (Note [Asynchronous kernel errors]).
class SyncIndexChecks {
 public:
  explicit SyncIndexChecks(bool on) : saved_(cuda::sync_index_checks()) { cuda::set_sync_index_checks(on); }
  ~SyncIndexChecks() { cuda::set_sync_index_checks(saved_); }
  SyncIndexChecks(const SyncIndexChecks&) = delete;
  SyncIndexChecks& operator=(const SyncIndexChecks&) = delete;

 private:
  bool saved_;
};

std::string index_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const IndexError& e) {
    return e.message();
  }
  return "no IndexError";
}

// With synchronous checks the gather kernel's findings are raised at the
// call with the CPU's message: the first offending index tensor, its largest
// value checked before its smallest.
TEST_F(GpuTensorApi, IndexBoundsErrorsMatchCpu) {
  const SyncIndexChecks sync(true);
  const Tensor x = arange(24).view({2, 3, 4});
  const Tensor xg = x.to(gpu());
  const std::vector<std::vector<std::int64_t>> a = {{0, 7}, {-3, 1}, {1, 0}, {0, 1}, {5, -9}, {0, 0}};
  const std::vector<std::vector<std::int64_t>> b = {{9, 0}, {0, 0}, {0, -4}, {2, 2}, {3, -7}, {-4, 3}};
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor ia = tensor(a[i], Shape{2}), ib = tensor(b[i], Shape{2});
    const std::string want = index_error_message([&] { (void)x[{ia, ib}]; });
    const std::string got = index_error_message([&] { (void)xg[{ia.to(gpu()), ib.to(gpu())}]; });
    EXPECT_EQ(got, want) << "case " << i;
    // A row gather (whole trailing rows) takes the other kernel.
    const std::string want_rows = index_error_message([&] { (void)x[{Slice(), ib}]; });
    const std::string got_rows = index_error_message([&] { (void)xg[{Slice(), ib.to(gpu())}]; });
    EXPECT_EQ(got_rows, want_rows) << "case " << i << " (x[:, ib])";
  }
  expect_close(x[{tensor(a[3], Shape{2}), tensor(b[3], Shape{2})}], xg[{tensor(a[3], Shape{2}).to(gpu()), tensor(b[3], Shape{2}).to(gpu())}], "in range");
  EXPECT_NO_THROW(cuda::synchronize_device(0));  // nothing left pending
}

// Asynchronous checks (the default): the gather is queued without a wait;
// its kernel never reads through the bad index, and the IndexError comes at
// the next synchronisation point, after which everything works again.
TEST_F(GpuTensorApi, IndexErrorsAreRaisedAtTheNextSynchronization) {
  const SyncIndexChecks async(false);
  const Tensor x = arange(40 * 30, DType::kFloat32).view({40, 30});
  const Tensor xg = x.to(gpu());
  const Tensor bad = tensor({0, 40, 3}).to(gpu());
  const std::string want = index_error_message([&] { (void)x[{tensor({0, 40, 3})}]; });
  ASSERT_EQ(want, "index 40 is out of bounds for dimension 0 with size 40");

  // Stream synchronize.
  Tensor r;
  ASSERT_NO_THROW(r = xg[{bad}]);  // row gather kernel
  std::string got = index_error_message([&] { cuda::current_stream(0).synchronize(); });
  EXPECT_NE(got.find(want), std::string::npos) << got;
  EXPECT_NE(got.find("cuda:0"), std::string::npos) << got;
  EXPECT_NO_THROW(cuda::current_stream(0).synchronize());  // reported once

  // A blocking copy to the host (.cpu(), .item()).
  got = index_error_message([&] { (void)xg[{bad}].cpu(); });
  EXPECT_NE(got.find(want), std::string::npos) << got;
  got = index_error_message([&] { (void)xg[{bad}].sum().item(); });
  EXPECT_NE(got.find(want), std::string::npos) << got;

  // Device synchronize; the general gather kernel (two index tensors, one
  // element each), a negative index out of range.
  ASSERT_NO_THROW((r = xg[{tensor({1, 2}).to(gpu()), tensor({-31, 4}).to(gpu())}]));
  got = index_error_message([&] { cuda::synchronize_device(0); });
  EXPECT_NE(got.find("index -31 is out of bounds for dimension 1 with size 30"), std::string::npos) << got;

  // Events.
  ASSERT_NO_THROW((r = xg[{Slice(), tensor({29, 30}).to(gpu())}]));
  cuda::Event e;
  e.record();
  got = index_error_message([&] { e.synchronize(); });
  EXPECT_NE(got.find("index 30 is out of bounds for dimension 1 with size 30"), std::string::npos) << got;

  // The context and other tensors are intact; in-range gathers are right.
  const Tensor good = tensor({39, -40, 7});
  expect_close(x[{good}], xg[{good.to(gpu())}], "x[good] after errors");
  expect_close(x, xg, "x after errors");
  EXPECT_NO_THROW(cuda::synchronize_device(0));
}

// An empty result runs no kernel to see its indices: checked at the call.
TEST_F(GpuTensorApi, IndexErrorsWithEmptyResultsAreImmediate) {
  const SyncIndexChecks async(false);
  const Tensor e = zeros({3, 0}, gpu());
  EXPECT_EQ(index_error_message([&] { (void)e[{tensor({5}).to(gpu())}]; }),
            index_error_message([&] { (void)zeros({3, 0})[{tensor({5})}]; }));
  EXPECT_NO_THROW(cuda::synchronize_device(0));
}

// A failed assignment writes nothing: the scatter's checking pass sets a
// flag that the scatter kernel reads before any write (no host wait).
TEST_F(GpuTensorApi, FailedIndexAssignmentsWriteNothing) {
  Tensor y = arange(12, DType::kFloat32).view({4, 3}).to(gpu());
  const Tensor before = y.cpu();
  const Tensor bad_rows = tensor({0, 2, 4, 1}).to(gpu());
  {
    const SyncIndexChecks async(false);
    EXPECT_NO_THROW(index_put(y, {bad_rows}, Scalar(7.0)));
    std::string got = index_error_message([&] { cuda::synchronize_device(0); });
    EXPECT_NE(got.find("index 4 is out of bounds for dimension 0 with size 4"), std::string::npos) << got;
    expect_close(before, y, "y after x[bad] = 7");
    EXPECT_NO_THROW(index_put(y, {tensor({0, -5}).to(gpu()), tensor({1, 1}).to(gpu())}, ones({2}, gpu()), true));
    got = index_error_message([&] { (void)y.cpu(); });
    EXPECT_NE(got.find("index -5 is out of bounds for dimension 0 with size 4"), std::string::npos) << got;
    expect_close(before, y, "y after x[bad, i] += 1");
  }
  {
    const SyncIndexChecks sync(true);
    EXPECT_EQ(index_error_message([&] { index_put(y, {Slice(), tensor({3, 0}).to(gpu())}, ones({4, 2}, gpu())); }),
              index_error_message([&] {
                Tensor c = before.clone();
                index_put(c, {Slice(), tensor({3, 0})}, ones({4, 2}));
              }));
    expect_close(before, y, "y after x[:, bad] = ones");
  }
  // In-range assignments still work.
  Tensor c = before.clone();
  index_put(c, {tensor({3, -4})}, Scalar(2.5));
  index_put(y, {tensor({3, -4}).to(gpu())}, Scalar(2.5));
  expect_close(c, y, "x[[3, -4]] = 2.5");
  EXPECT_NO_THROW(cuda::synchronize_device(0));
}

TEST_F(GpuTensorApi, IndexingMatchesCpu) {
  manual_seed(11);
  const Tensor x = randn({40, 30});
  const Tensor xg = x.to(gpu());
  const Tensor rows = tensor({3, -1, 0, 7, 7});
  const Tensor rows_g = rows.to(gpu());
  expect_close(index(x, {rows}), index(xg, {rows_g}), "x[rows]");
  expect_close(index(x, {rows, Slice(2, 8)}), index(xg, {rows_g, Slice(2, 8)}), "x[rows, 2:8]");
  expect_close(index(x, {Slice(std::nullopt, std::nullopt, 2), Slice(std::nullopt, std::nullopt, 3)}),
               index(xg, {Slice(std::nullopt, std::nullopt, 2), Slice(std::nullopt, std::nullopt, 3)}),
               "x[::2, ::3]");
  expect_close(index(x, {x > 0.5}), index(xg, {xg > 0.5}), "x[x > 0.5]");
  Tensor c = x.clone(), cg = xg.clone();
  index_put(c, {rows}, Scalar(1.5));
  index_put(cg, {rows_g}, Scalar(1.5));
  expect_close(c, cg, "x[rows] = 1.5");
  index_put(c, {c > 1.0}, Scalar(0.0));
  index_put(cg, {cg > 1.0}, Scalar(0.0));
  expect_close(c, cg, "x[x > 1] = 0");
  // Out of range: IndexError on cuda as on cpu (at the call with synchronous
  // checks; asynchronous ones: IndexErrorsAreRaisedAtTheNextSynchronization).
  const SyncIndexChecks sync(true);
  const Tensor bad = tensor({0, 40}).to(gpu());
  EXPECT_THROW(index(xg, {bad}), IndexError);
  EXPECT_THROW(index(x, {tensor({0, 40})}), IndexError);
}

// Row gathers of one index (Note [Row gather of one index] in
// cuda_index.cu): more rows than one grid dimension holds (the kernel loops
// over them), 16-byte and element-sized rows, several dtypes, negative
// indices, and an index out of range far down the rows.
TEST_F(GpuTensorApi, RowGathersOfOneIndexMatchCpu) {
  manual_seed(12);
  const std::int64_t rows = 70001;
  for (const auto& [dtype, width] : std::vector<std::pair<DType, std::int64_t>>{
           {DType::kFloat32, 20}, {DType::kFloat32, 2051}, {DType::kInt8, 100}, {DType::kFloat16, 40}, {DType::kInt64, 9}}) {
    const Tensor x = randint(-100, 100, {300, width}).to(dtype);
    const Tensor xg = x.to(gpu());
    const Tensor idx = randint(-300, 300, {rows});
    expect_close(index(x, {idx}), index(xg, {idx.to(gpu())}), "x[idx] " + std::string(dtype_name(dtype)) + " width " +
                                                                    std::to_string(width));
  }
  // Rows of a 3-D tensor (the index over dim 0, rows of [4, 33]).
  const Tensor y = randn({50, 4, 33});
  const Tensor iy = randint(0, 50, {7, 9});
  expect_close(index(y, {iy}), index(y.to(gpu()), {iy.to(gpu())}), "y[idx 2-D]");

  const SyncIndexChecks async(false);
  const Tensor x = arange(300 * 20, DType::kFloat32).view({300, 20});
  Tensor bad = zeros({rows}, DType::kInt64);
  index_put(bad, {Slice(rows - 3, rows - 2)}, Scalar(300));
  const Tensor r = index(x.to(gpu()), {bad.to(gpu())});
  const std::string got = index_error_message([&] { cuda::current_stream(0).synchronize(); });
  EXPECT_NE(got.find("index 300 is out of bounds for dimension 0 with size 300"), std::string::npos) << got;
  // Every other row is row 0; the bad one reads as zeros.
  expect_close(index(x, {zeros({rows - 3}, DType::kInt64)}), index(r, {Slice(0, rows - 3)}), "rows before the bad one");
  expect_close(zeros({1, 20}), index(r, {Slice(rows - 3, rows - 2)}), "the bad row reads as zeros");
  EXPECT_NO_THROW(cuda::synchronize_device(0));
}

// The grid limits of the two row kernels: more than 65535 rows for the
// element-wise row path (rows in gridDim.y, looped), and one row of more than
// 65535 segments of 2 KiB for the one-index row gather (segments in
// gridDim.y, looped).
TEST_F(GpuTensorApi, RowKernelsBeyondTheGridLimits) {
  manual_seed(21);
  // Outer dims (3, 21999) do not merge: 65997 rows of 260 elements.
  const Tensor a = randn({3, 22000, 520});
  const Tensor ag = a.to(gpu());
  const std::vector<IndexItem> sel = {Slice(), Slice(1, std::nullopt), Slice(std::nullopt, std::nullopt, 2)};
  expect_close(index(a, sel).contiguous(), index(ag, sel).contiguous(), "a[:, 1:, ::2].contiguous()");
  const Tensor b = randn({260});
  expect_close(index(a, sel) + b, index(ag, sel) + b.to(gpu()), "a[:, 1:, ::2] + b");
  // Rows of 2^27 + 48 bytes: 65537 segments each.
  const std::int64_t width = (std::int64_t{1} << 27) + 48;
  const Tensor w = randint(-100, 100, {2, width}, TensorOptions(DType::kInt8));
  const Tensor idx = tensor({1, 0, 1});
  expect_close(index(w, {idx}), index(w.to(gpu()), {idx.to(gpu())}), "w[[1, 0, 1]], rows of 2^27 + 48 bytes");
}

}  // namespace
}  // namespace genesis

#endif  // GENESIS_WITH_CUDA
