// GPU tests of the element-wise entries of the CUDA kernel table
// (src/tensor/cuda/): fill, copy (every dtype pair, the tiled-transpose and
// stepped paths), iota, random, unary, binary, where and the large dense
// path, each run against the CPU table on the same random inputs over every
// dtype the contract allows and these layouts: contiguous, strided, negative
// stride, broadcast (stride 0), is_scalar inputs, in place, empty, large
// (multi-block, odd sizes) and a misaligned offset. The comparison helpers
// are in tests/support/gpu_kernel_check.h.

#include "support/gpu_kernel_check.h"

#if GENESIS_WITH_CUDA

namespace genesis {
namespace {

using namespace gpu_test;  // NOLINT: the shared helpers of the GPU kernel tests

// ---------------------------------------------------------------- fill ---

TEST_F(GpuKernels, Fill) {
  for (DType t : kAllDTypes) {
    for (const auto& sz : shapes()) {
      if (skip_large(sz)) continue;
      for (Layout l : kOutLayouts) {
        for (Scalar value : {Scalar(true), Scalar(std::int64_t{-3}), Scalar(2.75), Scalar(1e10), Scalar(NAN)}) {
          View out = make_view(t, sz, l, false);
          cpu_table().fill(cpu_ctx(), out.cpu, value);
          gpu_table().fill(gpu_ctx(), out.gpu, value);
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("fill", t, l, sz) << " value=" << value.to_double());
        }
      }
    }
  }
}

// ---------------------------------------------------------------- copy ---

TEST_F(GpuKernels, CopyEveryDTypePair) {
  const std::vector<std::vector<std::int64_t>> sz_list = {{0}, {5}, {3, 5}, {33, 65}, {2, 3, 17}, {100003}};
  for (DType dt : kAllDTypes) {
    for (DType st : kAllDTypes) {
      for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
        for (Layout sl : kInLayouts) {
          for (Layout dl : {Layout::kContiguous, Layout::kNegative, Layout::kMisaligned}) {
            View src = make_view(st, sz, sl);
            View dst = make_view(dt, sz, dl, false);
            cpu_table().copy(cpu_ctx(), dst.cpu, src.cpu);
            gpu_table().copy(gpu_ctx(), dst.gpu, src.gpu);
            EXPECT_SAME_RESULT(dst, Tol::kExact, 1.0,
                               describe("copy", dt, dl, sz) << " from " << dtype_name(st) << " " << layout_name(sl));
          }
        }
      }
    }
  }
}

// The tiled transpose path (Note [CUDA copy paths]): transposed sources of
// every element size, odd and tile-multiple sizes, batched.
TEST_F(GpuKernels, CopyTransposePath) {
  const std::vector<std::vector<std::int64_t>> sz_list = {{64, 64}, {67, 45}, {1000, 33}, {3, 40, 50}, {2, 129, 257}, {16, 2048}};
  for (DType t : {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kInt64}) {
    for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
      for (Layout dl : {Layout::kContiguous, Layout::kMisaligned}) {
        View src = make_view(t, sz, Layout::kTransposed);
        View dst = make_view(t, sz, dl, false);
        cpu_table().copy(cpu_ctx(), dst.cpu, src.cpu);
        gpu_table().copy(gpu_ctx(), dst.gpu, src.gpu);
        EXPECT_SAME_RESULT(dst, Tol::kExact, 1.0, describe("copy(transpose)", t, dl, sz));
      }
    }
  }
}

// m[::2, ::3].contiguous(): a stepped source, as in the benchmark.
TEST_F(GpuKernels, CopySteppedSlice) {
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    View base = make_view(t, {130, 301}, Layout::kContiguous);
    View dst = make_view(t, {65, 101}, Layout::kContiguous, false);
    StridedOperand sc = base.cpu, sg = base.gpu;
    for (StridedOperand* s : {&sc, &sg}) {
      s->sizes[0] = 65;
      s->sizes[1] = 101;
      s->strides[0] = 2 * 301;
      s->strides[1] = 3;
    }
    cpu_table().copy(cpu_ctx(), dst.cpu, sc);
    gpu_table().copy(gpu_ctx(), dst.gpu, sg);
    EXPECT_SAME_RESULT(dst, Tol::kExact, 1.0, describe("copy(m[::2, ::3])", t, Layout::kContiguous, {65, 101}));
  }
}

// ---------------------------------------------------------- iota, random ---

TEST_F(GpuKernels, Iota) {
  for (DType t : kAllDTypes) {
    if (t == DType::kBool) continue;
    for (std::int64_t n : {0, 1, 17, 100001}) {
      if (skip_large({n})) continue;
      for (auto [start, step] : {std::pair<Scalar, Scalar>{Scalar(std::int64_t{-5}), Scalar(std::int64_t{3})},
                                 std::pair<Scalar, Scalar>{Scalar(0.5), Scalar(0.1)},
                                 std::pair<Scalar, Scalar>{Scalar(1e6), Scalar(-0.37)}}) {
        if (!is_floating(t) && start.is_floating()) continue;
        View out = make_view(t, {n}, Layout::kContiguous, false);
        cpu_table().iota(cpu_ctx(), out.cpu, start, step);
        gpu_table().iota(gpu_ctx(), out.gpu, start, step);
        EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("iota", t, Layout::kContiguous, {n}) << " start=" << start.to_double() << " step=" << step.to_double());
      }
    }
  }
}

TEST_F(GpuKernels, RandomSameSeedSameNumbers) {
  for (DType t : kAllDTypes) {
    if (t == DType::kBool) continue;
    for (kernels::RandomKind kind : {kernels::RandomKind::kUniform, kernels::RandomKind::kNormal, kernels::RandomKind::kInteger}) {
      if (kind != kernels::RandomKind::kInteger && !is_floating(t)) continue;
      for (std::int64_t n : {0, 1, 1000, 300007}) {
        if (skip_large({n})) continue;
        kernels::RandomParams p;
        p.kind = kind;
        p.seed = 0x1234567890abcdefull;
        p.offset = 977;
        p.low = kind == kernels::RandomKind::kNormal ? 1.5 : -2.0;
        p.high = kind == kernels::RandomKind::kNormal ? 0.75 : 3.0;
        p.int_low = -7;
        p.int_high = 100;
        if (t == DType::kUInt8) p.int_low = 0;
        View out = make_view(t, {n}, Layout::kContiguous, false);
        cpu_table().random(cpu_ctx(), out.cpu, p);
        gpu_table().random(gpu_ctx(), out.gpu, p);
        // Normal draws go through log/cos: equal up to the libm's last ulp.
        const Tol tol = kind == kernels::RandomKind::kNormal ? Tol::kLibm : Tol::kExact;
        EXPECT_SAME_RESULT(out, tol, 1.0, describe("random", t, Layout::kContiguous, {n}) << " kind=" << static_cast<int>(kind));
      }
    }
  }
}

// ---------------------------------------------------------------- unary ---

bool unary_allowed(UnaryOp op, DType t) {
  switch (op) {
    case UnaryOp::kLogicalNot: return true;
    case UnaryOp::kNeg: case UnaryOp::kAbs: case UnaryOp::kRelu: return t != DType::kBool;
    case UnaryOp::kBitwiseNot: return !is_floating(t);
    default: return is_floating(t);
  }
}

TEST_F(GpuKernels, Unary) {
  const UnaryOp ops[] = {UnaryOp::kNeg, UnaryOp::kAbs, UnaryOp::kRelu, UnaryOp::kExp, UnaryOp::kLog, UnaryOp::kSqrt,
                         UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kSin, UnaryOp::kCos, UnaryOp::kLogicalNot,
                         UnaryOp::kBitwiseNot};
  const std::vector<std::vector<std::int64_t>> sz_list = {{0}, {7}, {33, 65}, {2, 3, 17}, {100003}};
  for (UnaryOp op : ops) {
    for (DType t : kAllDTypes) {
      if (!unary_allowed(op, t)) continue;
      const DType ot = op == UnaryOp::kLogicalNot ? DType::kBool : t;
      const bool exact = op == UnaryOp::kNeg || op == UnaryOp::kAbs || op == UnaryOp::kRelu ||
                         op == UnaryOp::kLogicalNot || op == UnaryOp::kSqrt || op == UnaryOp::kBitwiseNot;
      for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
        for (Layout il : kInLayouts) {
          View in = make_view(t, sz, il);
          View out = make_view(ot, sz, Layout::kContiguous, false);
          cpu_table().unary(cpu_ctx(), op, out.cpu, in.cpu);
          gpu_table().unary(gpu_ctx(), op, out.gpu, in.gpu);
          EXPECT_SAME_RESULT(out, exact ? Tol::kExact : Tol::kLibm, 1.0,
                             describe(kernels::op_name(op), t, il, sz));
        }
        // In place: out is the input itself.
        if (ot == t) {
          View io = make_view(t, sz, Layout::kStrided);
          cpu_table().unary(cpu_ctx(), op, io.cpu, io.cpu);
          gpu_table().unary(gpu_ctx(), op, io.gpu, io.gpu);
          EXPECT_SAME_RESULT(io, exact ? Tol::kExact : Tol::kLibm, 1.0,
                             describe(kernels::op_name(op), t, Layout::kStrided, sz) << " in place");
        }
      }
    }
  }
}

// --------------------------------------------------------------- binary ---

bool binary_allowed(BinaryOp op, DType t) {
  const bool bitwise = op == BinaryOp::kBitwiseAnd || op == BinaryOp::kBitwiseOr || op == BinaryOp::kBitwiseXor;
  const bool shift = op == BinaryOp::kLeftShift || op == BinaryOp::kRightShift;
  if (t == DType::kBool) {
    return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul || op == BinaryOp::kMaximum ||
           op == BinaryOp::kMinimum || bitwise || kernels::is_comparison(op);
  }
  if (op == BinaryOp::kDiv) return is_floating(t);
  if (bitwise || shift) return !is_floating(t);
  return true;
}

TEST_F(GpuKernels, Binary) {
  const BinaryOp ops[] = {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kFloorDiv,
                          BinaryOp::kRemainder, BinaryOp::kPow, BinaryOp::kMaximum, BinaryOp::kMinimum,
                          BinaryOp::kTruncDiv, BinaryOp::kFmod, BinaryOp::kBitwiseAnd, BinaryOp::kBitwiseOr,
                          BinaryOp::kBitwiseXor, BinaryOp::kLeftShift, BinaryOp::kRightShift, BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt, BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe,
                          BinaryOp::kLogicalAnd, BinaryOp::kLogicalOr};
  const std::vector<std::vector<std::int64_t>> sz_list = {{0}, {7}, {33, 65}, {2, 3, 17}, {100003}};
  const std::pair<Layout, Layout> pairs[] = {
      {Layout::kContiguous, Layout::kContiguous}, {Layout::kStrided, Layout::kNegative},
      {Layout::kContiguous, Layout::kBroadcast},  {Layout::kTransposed, Layout::kContiguous},
      {Layout::kMisaligned, Layout::kContiguous}, {Layout::kContiguous, Layout::kScalar},
      {Layout::kScalar, Layout::kStrided},
  };
  for (BinaryOp op : ops) {
    for (DType t : kAllDTypes) {
      if (!binary_allowed(op, t)) continue;
      const DType ot = kernels::is_comparison(op) ? DType::kBool : t;
      const Tol tol = (op == BinaryOp::kPow && is_floating(t)) ? Tol::kLibm : Tol::kExact;
      for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
        for (auto [la, lb] : pairs) {
          // pow with integers: small non-negative exponents keep it meaningful.
          const bool positive_b = op == BinaryOp::kPow && !is_floating(t);
          View a = make_view(t, sz, la);
          View b = make_view(t, sz, lb, true, false, positive_b);
          View out = make_view(ot, sz, Layout::kContiguous, false);
          cpu_table().binary(cpu_ctx(), op, out.cpu, a.cpu, b.cpu);
          gpu_table().binary(gpu_ctx(), op, out.gpu, a.gpu, b.gpu);
          EXPECT_SAME_RESULT(out, tol, 1.0,
                             describe(kernels::op_name(op), t, la, sz) << " b=" << layout_name(lb));
        }
        // In place: a += b with out == a.
        if (ot == t) {
          View a = make_view(t, sz, Layout::kStrided);
          View b = make_view(t, sz, Layout::kContiguous, true, false, op == BinaryOp::kPow && !is_floating(t));
          cpu_table().binary(cpu_ctx(), op, a.cpu, a.cpu, b.cpu);
          gpu_table().binary(gpu_ctx(), op, a.gpu, a.gpu, b.gpu);
          EXPECT_SAME_RESULT(a, tol, 1.0, describe(kernels::op_name(op), t, Layout::kStrided, sz) << " in place");
        }
      }
    }
  }
}

TEST_F(GpuKernels, Where) {
  const std::vector<std::vector<std::int64_t>> sz_list = {{0}, {7}, {33, 65}, {100003}};
  for (DType t : kAllDTypes) {
    for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
      for (auto [la, lb] : {std::pair{Layout::kContiguous, Layout::kContiguous}, std::pair{Layout::kScalar, Layout::kNegative},
                            std::pair{Layout::kBroadcast, Layout::kScalar}, std::pair{Layout::kTransposed, Layout::kMisaligned}}) {
        View c = make_view(DType::kBool, sz, la == Layout::kScalar ? Layout::kStrided : la);
        View a = make_view(t, sz, la);
        View b = make_view(t, sz, lb);
        View out = make_view(t, sz, Layout::kContiguous, false);
        cpu_table().where(cpu_ctx(), out.cpu, c.cpu, a.cpu, b.cpu);
        gpu_table().where(gpu_ctx(), out.gpu, c.gpu, a.gpu, b.gpu);
        EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("where", t, la, sz) << " b=" << layout_name(lb));
      }
    }
  }
}

// Large dense operands take the engine's non-grid-stride kernel (Note [CUDA
// element-wise dense path], from 2^18 packs of 16 bytes); the other tests'
// sizes stay below that. Sizes leave a tail of n % 16 elements for every
// pack width.
TEST_F(GpuKernels, DenseFlatLarge) {
  const std::vector<std::vector<std::int64_t>> sz_list = {{(std::int64_t{1} << 20) + 3}, {(std::int64_t{1} << 22) + 13}};
  for (DType t : kAllDTypes) {
    for (const auto& sz : sz_list) {
      if (skip_large(sz)) continue;
      {
        View out = make_view(t, sz, Layout::kContiguous, false);
        cpu_table().fill(cpu_ctx(), out.cpu, Scalar(std::int64_t{1}));
        gpu_table().fill(gpu_ctx(), out.gpu, Scalar(std::int64_t{1}));
        EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("fill", t, Layout::kContiguous, sz));
      }
      if (unary_allowed(UnaryOp::kAbs, t)) {
        View in = make_view(t, sz, Layout::kContiguous);
        View out = make_view(t, sz, Layout::kContiguous, false);
        cpu_table().unary(cpu_ctx(), UnaryOp::kAbs, out.cpu, in.cpu);
        gpu_table().unary(gpu_ctx(), UnaryOp::kAbs, out.gpu, in.gpu);
        EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("abs", t, Layout::kContiguous, sz));
      }
      for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kLt}) {
        if (!binary_allowed(op, t)) continue;
        const DType ot = kernels::is_comparison(op) ? DType::kBool : t;
        for (Layout lb : {Layout::kContiguous, Layout::kScalar}) {
          View a = make_view(t, sz, Layout::kContiguous);
          View b = make_view(t, sz, lb);
          View out = make_view(ot, sz, Layout::kContiguous, false);
          cpu_table().binary(cpu_ctx(), op, out.cpu, a.cpu, b.cpu);
          gpu_table().binary(gpu_ctx(), op, out.gpu, a.gpu, b.gpu);
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0,
                             describe(kernels::op_name(op), t, Layout::kContiguous, sz) << " b=" << layout_name(lb));
        }
        if (ot == t) {  // in place: out == a (each thread loads its chunk before storing it)
          View a = make_view(t, sz, Layout::kContiguous);
          View b = make_view(t, sz, Layout::kContiguous);
          cpu_table().binary(cpu_ctx(), op, a.cpu, a.cpu, b.cpu);
          gpu_table().binary(gpu_ctx(), op, a.gpu, a.gpu, b.gpu);
          EXPECT_SAME_RESULT(a, Tol::kExact, 1.0, describe(kernels::op_name(op), t, Layout::kContiguous, sz) << " in place");
        }
      }
      {
        View c = make_view(DType::kBool, sz, Layout::kContiguous);
        View a = make_view(t, sz, Layout::kContiguous);
        View b = make_view(t, sz, Layout::kContiguous);
        View out = make_view(t, sz, Layout::kContiguous, false);
        cpu_table().where(cpu_ctx(), out.cpu, c.cpu, a.cpu, b.cpu);
        gpu_table().where(gpu_ctx(), out.gpu, c.gpu, a.gpu, b.gpu);
        EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("where", t, Layout::kContiguous, sz));
      }
    }
  }
}

}  // namespace
}  // namespace genesis

#else  // !GENESIS_WITH_CUDA

TEST(GpuKernels, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }

#endif
