// GPU tests of the matmul entry of the CUDA kernel table (src/tensor/cuda/)
// against the CPU table, and a check that every entry of the table is
// installed. The comparison helpers are in tests/support/gpu_kernel_check.h.

#include "support/gpu_kernel_check.h"

#if GENESIS_WITH_CUDA

namespace genesis {
namespace {

using namespace gpu_test;  // NOLINT: the shared helpers of the GPU kernel tests

// --------------------------------------------------------------- matmul ---

TEST_F(GpuKernels, Matmul) {
  struct Case {
    std::int64_t B, M, N, K;
  };
  const Case cases[] = {{1, 1, 1, 1}, {1, 17, 33, 9}, {3, 64, 48, 80}, {2, 5, 7, 0}, {1, 130, 1, 257}, {4, 1, 70, 33}};
  for (DType t : kFloatDTypes) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (bool broadcast_b : {false, true}) {
            View a = make_view(t, {c.B, c.M, c.K}, ta ? Layout::kTransposed : Layout::kContiguous, true, true);
            View b = make_view(t, {c.B, c.K, c.N}, tb ? Layout::kTransposed : Layout::kContiguous, true, true);
            if (broadcast_b) b.cpu.strides[0] = b.gpu.strides[0] = 0;
            View out = make_view(t, {c.B, c.M, c.N}, Layout::kContiguous, false);
            for (bool tf32 : {false, true}) {
              if (tf32 && t != DType::kFloat32) continue;
              kernels::MatmulParams p;
              p.allow_tf32 = tf32;
              cpu_table().matmul(cpu_ctx(), out.cpu, a.cpu, b.cpu, p);
              gpu_table().matmul(gpu_ctx(), out.gpu, a.gpu, b.gpu, p);
              // Inputs in [0.05, 4): sums of K positive products; TF32 keeps
              // 10 mantissa bits of each input.
              const double scale = tf32 ? 2e4 : 1.0 + static_cast<double>(c.K) / 8;
              std::ostringstream what;
              what << "matmul dtype=" << dtype_name(t) << " B,M,N,K=" << c.B << "," << c.M << "," << c.N << "," << c.K
                   << " a" << (ta ? "^T" : "") << " b" << (tb ? "^T" : "") << (broadcast_b ? " b broadcast" : "")
                   << (tf32 ? " tf32" : "");
              EXPECT_SAME_RESULT(out, Tol::kMatmul, scale, what.str());
            }
          }
        }
      }
    }
  }
}

// Note [Matmul through cuBLASLt]: batched products whose later matrices are
// less aligned than the first (odd batch strides), sizes past one tile,
// and repeated calls that hit the plan cache, in every layout the contract
// allows (transposed a/b, broadcast a or b).
TEST_F(GpuKernels, MatmulLtLayouts) {
  struct Case {
    std::int64_t B, M, N, K;
  };
  const Case cases[] = {{3, 17, 33, 9}, {2, 257, 129, 300}, {5, 64, 64, 64}, {1, 256, 512, 128}};
  for (DType t : kFloatDTypes) {
    for (const Case& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          for (int broadcast : {0, 1, 2}) {  // none, a, b
            if (broadcast != 0 && c.B == 1) continue;
            View a = make_view(t, {c.B, c.M, c.K}, ta ? Layout::kTransposed : Layout::kContiguous, true, true);
            View b = make_view(t, {c.B, c.K, c.N}, tb ? Layout::kTransposed : Layout::kContiguous, true, true);
            if (broadcast == 1) a.cpu.strides[0] = a.gpu.strides[0] = 0;
            if (broadcast == 2) b.cpu.strides[0] = b.gpu.strides[0] = 0;
            View out = make_view(t, {c.B, c.M, c.N}, Layout::kContiguous, false);
            for (bool tf32 : {false, true}) {
              if (tf32 && t != DType::kFloat32) continue;
              kernels::MatmulParams p;
              p.allow_tf32 = tf32;
              cpu_table().matmul(cpu_ctx(), out.cpu, a.cpu, b.cpu, p);
              for (int rep = 0; rep < 2; ++rep) {  // the second call reuses the cached plan
                gpu_table().matmul(gpu_ctx(), out.gpu, a.gpu, b.gpu, p);
                const double scale = tf32 ? 2e4 : 1.0 + static_cast<double>(c.K) / 8;
                std::ostringstream what;
                what << "matmul(Lt) dtype=" << dtype_name(t) << " B,M,N,K=" << c.B << "," << c.M << "," << c.N << ","
                     << c.K << " a" << (ta ? "^T" : "") << " b" << (tb ? "^T" : "")
                     << (broadcast == 1 ? " a broadcast" : broadcast == 2 ? " b broadcast" : "") << (tf32 ? " tf32" : "")
                     << " call " << rep;
                EXPECT_SAME_RESULT(out, Tol::kMatmul, scale, what.str());
              }
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------- queued work ---

// Kernels go on the current stream and return without synchronising: a
// kernel queued behind a long one on a user stream is not done until the
// stream is.
TEST_F(GpuKernels, EveryEntryIsInstalled) {
  const KernelTable& g = gpu_table();
  EXPECT_NE(g.fill, nullptr);
  EXPECT_NE(g.copy, nullptr);
  EXPECT_NE(g.iota, nullptr);
  EXPECT_NE(g.random, nullptr);
  EXPECT_NE(g.unary, nullptr);
  EXPECT_NE(g.binary, nullptr);
  EXPECT_NE(g.where, nullptr);
  EXPECT_NE(g.reduce, nullptr);
  EXPECT_NE(g.arg_reduce, nullptr);
  EXPECT_NE(g.gather, nullptr);
  EXPECT_NE(g.scatter, nullptr);
  EXPECT_NE(g.nonzero, nullptr);
  EXPECT_NE(g.matmul, nullptr);
}

}  // namespace
}  // namespace genesis

#endif  // GENESIS_WITH_CUDA
