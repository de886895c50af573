// GPU tests of the reduction and indexing entries of the CUDA kernel table
// (src/tensor/cuda/): reduce and arg-reduce (column/row reduction and split
// paths), gather (row and element), scatter, nonzero and the fused
// masked_select, each run against the CPU table on the same random inputs.
// The comparison helpers are in tests/support/gpu_kernel_check.h.

#include "support/gpu_kernel_check.h"

#if GENESIS_WITH_CUDA

namespace genesis {
namespace {

using namespace gpu_test;  // NOLINT: the shared helpers of the GPU kernel tests

// ------------------------------------------------------------ reductions ---

// out in keepdim layout for reducing the dims in `reduced` of `sizes`.
std::vector<std::int64_t> keepdim_sizes(std::vector<std::int64_t> sizes, const std::vector<int>& reduced) {
  for (int d : reduced) sizes[static_cast<std::size_t>(d)] = 1;
  return sizes;
}

DType reduce_out_dtype(ReduceOp op, DType t) {
  if (op == ReduceOp::kAny || op == ReduceOp::kAll) return DType::kBool;
  if ((op == ReduceOp::kSum || op == ReduceOp::kProd) && !is_floating(t)) return DType::kInt64;
  return t;
}

TEST_F(GpuKernels, Reduce) {
  struct Case {
    std::vector<std::int64_t> sizes;
    std::vector<int> reduced;
  };
  const std::vector<Case> cases = {
      {{1000}, {0}},                 // full, small
      {{3000017}, {0}},              // full, split over many blocks
      {{257, 1031}, {1}},            // rows (innermost)
      {{257, 1031}, {0}},            // columns (outer)
      {{4096, 8}, {0}},              // few columns, long reduction: split column kernel
      {{8, 70000}, {1}},             // few rows, long rows: split row kernel
      {{6, 7, 9}, {0, 2}},           // mixed
      {{6, 7, 9}, {1}},              // middle
      {{5, 6}, {}},                  // nothing reduced
      {{4, 0, 3}, {1}},              // empty reduction
      {{64, 33, 40}, {0, 1, 2}},     // all dims
  };
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMean, ReduceOp::kMax,
                          ReduceOp::kMin, ReduceOp::kAny,  ReduceOp::kAll};
  for (ReduceOp op : ops) {
    for (DType t : kAllDTypes) {
      if (op == ReduceOp::kMean && !is_floating(t)) continue;
      const DType ot = reduce_out_dtype(op, t);
      for (const Case& c : cases) {
        if (skip_large(c.sizes)) continue;
        bool empty = false;
        for (int d : c.reduced) empty |= c.sizes[static_cast<std::size_t>(d)] == 0;
        if (empty && (op == ReduceOp::kMax || op == ReduceOp::kMin)) continue;
        for (Layout il : {Layout::kContiguous, Layout::kTransposed, Layout::kNegative, Layout::kMisaligned}) {
          // Products of many floats overflow: keep the values near 1 there.
          const bool prod = op == ReduceOp::kProd;
          View in = make_view(t, c.sizes, il, true, true, prod);
          if (prod && is_floating(t)) {
            for (std::size_t i = 0; i < in.buf->host.size() / dtype_size(t); ++i) {
              unsigned char* e = in.buf->host.data() + i * dtype_size(t);
              write_double(t, e, 1.0 + (element_as_double(t, e) - 2.0) * 1e-4);
            }
            in.buf->upload();
          }
          View out = make_view(ot, keepdim_sizes(c.sizes, c.reduced), Layout::kContiguous, false);
          cpu_table().reduce(cpu_ctx(), op, out.cpu, in.cpu);
          gpu_table().reduce(gpu_ctx(), op, out.gpu, in.gpu);
          std::int64_t n = 1;
          for (int d : c.reduced) n *= c.sizes[static_cast<std::size_t>(d)];
          // Sums of n terms of size <= 4: error grows with sqrt(n) at worst
          // per term magnitude; scale the tolerance by the term count's log.
          const double scale = 1.0 + std::log2(static_cast<double>(std::max<std::int64_t>(n, 2)));
          const bool floating_sum = is_floating(t) && (op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kProd);
          std::ostringstream what;
          what << describe(kernels::op_name(op), t, il, c.sizes) << " reduced dims {";
          for (int d : c.reduced) what << d << " ";
          what << "}";
          EXPECT_SAME_RESULT(out, floating_sum ? Tol::kSum : Tol::kExact, floating_sum ? scale * 16 : 1.0, what.str());
        }
      }
    }
  }
}

TEST_F(GpuKernels, ArgReduce) {
  const std::vector<std::pair<std::vector<std::int64_t>, int>> cases = {
      {{1000}, 0}, {{33, 65}, 1}, {{33, 65}, 0}, {{4, 5, 6}, 1}, {{3, 100003}, 1}};
  for (ArgReduceOp op : {ArgReduceOp::kMax, ArgReduceOp::kMin}) {
    for (DType t : kAllDTypes) {
      for (const auto& [sz, dim] : cases) {
        if (skip_large(sz)) continue;
        for (Layout il : {Layout::kContiguous, Layout::kTransposed, Layout::kNegative}) {
          for (bool with_values : {true, false}) {
            View in = make_view(t, sz, il);
            std::vector<std::int64_t> osz = sz;
            osz[static_cast<std::size_t>(dim)] = 1;
            View idx = make_view(DType::kInt64, osz, Layout::kContiguous, false);
            View val = make_view(t, osz, Layout::kStrided, false);
            StridedOperand vc = val.cpu, vg = val.gpu;
            if (!with_values) vc.data = vg.data = nullptr;
            cpu_table().arg_reduce(cpu_ctx(), op, vc, idx.cpu, in.cpu, dim);
            gpu_table().arg_reduce(gpu_ctx(), op, vg, idx.gpu, in.gpu, dim);
            const std::string what = describe(op == ArgReduceOp::kMax ? "argmax" : "argmin", t, il, sz) + " dim=" + std::to_string(dim);
            EXPECT_SAME_RESULT(idx, Tol::kExact, 1.0, what << " (indices)");
            EXPECT_SAME_RESULT(val, Tol::kExact, 1.0, what << " (values)");
          }
        }
      }
    }
  }
}

// ------------------------------------------------------ gather / scatter ---

// One int64 index operand of `iter_sizes` (broadcast along the dims not in `varying`)
// with values in [-size, size).
View make_index(const std::vector<std::int64_t>& iter_sizes, const std::vector<int>& varying, std::int64_t size,
                bool unique = false) {
  View v = make_view(DType::kInt64, iter_sizes, Layout::kContiguous, false);
  for (int d = 0; d < static_cast<int>(iter_sizes.size()); ++d) {
    if (std::find(varying.begin(), varying.end(), d) == varying.end()) v.cpu.strides[d] = v.gpu.strides[d] = 0;
  }
  const std::size_t n = v.buf->host.size() / 8;
  std::vector<std::int64_t> vals(n);
  std::uniform_int_distribution<std::int64_t> dist(-size, size - 1);
  for (std::size_t i = 0; i < n; ++i) vals[i] = dist(rng());
  if (unique) {
    // Distinct rows (mod size) at every buffer element the view reaches,
    // half of them written as negative indices.
    std::vector<std::int64_t> perm(static_cast<std::size_t>(size));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng());
    std::vector<std::int64_t> coord(iter_sizes.size(), 0);
    std::vector<bool> assigned(n, false);
    std::size_t next = 0;
    const std::int64_t total = std::accumulate(iter_sizes.begin(), iter_sizes.end(), std::int64_t{1}, std::multiplies<>());
    for (std::int64_t lin = 0; lin < total; ++lin) {
      std::int64_t rest = lin, off = 0;
      for (int d = static_cast<int>(iter_sizes.size()) - 1; d >= 0; --d) {
        off += (rest % iter_sizes[static_cast<std::size_t>(d)]) * v.cpu.strides[d];
        rest /= iter_sizes[static_cast<std::size_t>(d)];
      }
      if (assigned[static_cast<std::size_t>(off)]) continue;
      assigned[static_cast<std::size_t>(off)] = true;
      const std::int64_t row = perm[next % perm.size()];
      vals[static_cast<std::size_t>(off)] = (next & 1) ? row - size : row;
      ++next;
    }
    EXPECT_LE(next, perm.size()) << "make_index: more positions than distinct rows";
  }
  std::memcpy(v.buf->host.data(), vals.data(), n * 8);
  v.buf->upload();
  return v;
}

TEST_F(GpuKernels, GatherRowsAndElements) {
  for (DType t : kAllDTypes) {
    // x[idx] on [R, C]: rows gathered (row fast path), then x[idx1, idx2]
    // (element path), then x[:, idx] (index varies along the inner dim).
    for (auto [R, C] : {std::pair<std::int64_t, std::int64_t>{50, 7}, {300, 1030}, {64, 256}}) {
      for (Layout sl : {Layout::kContiguous, Layout::kMisaligned, Layout::kTransposed}) {
        const std::int64_t n = 97;
        View base = make_view(t, {R, C}, sl);
        // Case 1: rows.
        {
          View idx = make_index({n, C}, {0}, R);
          View out = make_view(t, {n, C}, Layout::kContiguous, false);
          StridedOperand sc = base.cpu, sg = base.gpu;
          const std::int64_t row_stride = base.cpu.strides[0];
          sc.sizes[0] = sg.sizes[0] = n;
          sc.strides[0] = sg.strides[0] = 0;
          const std::int64_t isz[] = {R};
          const std::int64_t ist[] = {row_stride};
          IndexArgs ic{1, &idx.cpu, isz, ist}, ig{1, &idx.gpu, isz, ist};
          cpu_table().gather(cpu_ctx(), out.cpu, sc, ic);
          gpu_table().gather(gpu_ctx(), out.gpu, sg, ig);
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("gather rows", t, sl, {R, C}));
        }
        // Case 2: two indices, one element each.
        {
          View i0 = make_index({n}, {0}, R), i1 = make_index({n}, {0}, C);
          View out = make_view(t, {n}, Layout::kNegative, false);
          StridedOperand sc = base.cpu, sg = base.gpu;
          sc.ndim = sg.ndim = 1;
          sc.sizes[0] = sg.sizes[0] = n;
          sc.strides[0] = sg.strides[0] = 0;
          const StridedOperand ic_ops[] = {i0.cpu, i1.cpu}, ig_ops[] = {i0.gpu, i1.gpu};
          const std::int64_t isz[] = {R, C};
          const std::int64_t ist[] = {base.cpu.strides[0], base.cpu.strides[1]};
          IndexArgs ic{2, ic_ops, isz, ist}, ig{2, ig_ops, isz, ist};
          cpu_table().gather(cpu_ctx(), out.cpu, sc, ic);
          gpu_table().gather(gpu_ctx(), out.gpu, sg, ig);
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("gather 2 indices", t, sl, {R, C}));
        }
        // Case 3: x[:, idx] -> [R, n].
        {
          View idx = make_index({R, n}, {1}, C);
          View out = make_view(t, {R, n}, Layout::kContiguous, false);
          StridedOperand sc = base.cpu, sg = base.gpu;
          const std::int64_t col_stride = base.cpu.strides[1];
          sc.sizes[1] = sg.sizes[1] = n;
          sc.strides[1] = sg.strides[1] = 0;
          const std::int64_t isz[] = {C};
          const std::int64_t ist[] = {col_stride};
          IndexArgs ic{1, &idx.cpu, isz, ist}, ig{1, &idx.gpu, isz, ist};
          cpu_table().gather(cpu_ctx(), out.cpu, sc, ic);
          gpu_table().gather(gpu_ctx(), out.gpu, sg, ig);
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("gather columns", t, sl, {R, C}));
        }
      }
    }
  }
}

TEST_F(GpuKernels, Scatter) {
  for (DType t : kAllDTypes) {
    for (bool accumulate : {false, true}) {
      for (Layout vl : {Layout::kContiguous, Layout::kBroadcast, Layout::kScalar, Layout::kNegative}) {
        const std::int64_t R = 300, C = 33, n = 150;
        View dst = make_view(t, {R, C}, Layout::kContiguous, true, true);
        // Plain writes: distinct rows (who wins among duplicates is
        // unspecified). Accumulate: duplicates on purpose, except for
        // floats, whose sums would then depend on the order of atomics.
        const bool unique = !accumulate || is_floating(t);
        View idx = make_index({n, C}, {0}, R, unique);
        View values = make_view(t, {n, C}, vl, true, true);
        StridedOperand dc = dst.cpu, dg = dst.gpu;
        dc.sizes[0] = dg.sizes[0] = n;
        dc.strides[0] = dg.strides[0] = 0;
        const std::int64_t isz[] = {R};
        const std::int64_t ist[] = {dst.cpu.strides[0]};
        IndexArgs ic{1, &idx.cpu, isz, ist}, ig{1, &idx.gpu, isz, ist};
        cpu_table().scatter(cpu_ctx(), dc, values.cpu, ic, accumulate);
        gpu_table().scatter(gpu_ctx(), dg, values.gpu, ig, accumulate);
        EXPECT_SAME_RESULT(dst, Tol::kExact, 1.0,
                           describe(accumulate ? "scatter(accumulate)" : "scatter", t, vl, {n, C}));
      }
    }
  }
  // Accumulating duplicates in floating dtypes: equal up to addition order.
  for (DType t : kFloatDTypes) {
    View dst = make_view(t, {10, 5}, Layout::kContiguous, true, true);
    View idx = make_index({4000, 5}, {0}, 10);
    View values = make_view(t, {4000, 5}, Layout::kContiguous, true, true);
    StridedOperand dc = dst.cpu, dg = dst.gpu;
    dc.sizes[0] = dg.sizes[0] = 4000;
    dc.strides[0] = dg.strides[0] = 0;
    const std::int64_t isz[] = {10};
    const std::int64_t ist[] = {5};
    IndexArgs ic{1, &idx.cpu, isz, ist}, ig{1, &idx.gpu, isz, ist};
    cpu_table().scatter(cpu_ctx(), dc, values.cpu, ic, true);
    gpu_table().scatter(gpu_ctx(), dg, values.gpu, ig, true);
    EXPECT_SAME_RESULT(dst, Tol::kSum, 400.0, describe("scatter(accumulate, duplicates)", t, Layout::kContiguous, {4000, 5}));
  }
}

TEST_F(GpuKernels, Nonzero) {
  const std::vector<std::vector<std::int64_t>> sz_list = {{0}, {1}, {1000}, {33, 65}, {2, 3, 17}, {1000, 1003}};
  for (const auto& sz : sz_list) {
        if (skip_large(sz)) continue;
    for (Layout ml : {Layout::kContiguous, Layout::kTransposed, Layout::kNegative, Layout::kStrided}) {
      View mask = make_view(DType::kBool, sz, ml);
      // The count, as the tensor layer computes it (kSum on the CPU copy).
      View count = make_view(DType::kInt64, keepdim_sizes(sz, [&] {
                               std::vector<int> all(sz.size());
                               std::iota(all.begin(), all.end(), 0);
                               return all;
                             }()),
                             Layout::kContiguous, false);
      cpu_table().reduce(cpu_ctx(), ReduceOp::kSum, count.cpu, mask.cpu);
      std::int64_t n = 0;
      std::memcpy(&n, count.cpu.data, 8);
      View out = make_view(DType::kInt64, {n, static_cast<std::int64_t>(sz.size())}, Layout::kContiguous, false);
      cpu_table().nonzero(cpu_ctx(), out.cpu, mask.cpu);
      gpu_table().nonzero(gpu_ctx(), out.gpu, mask.gpu);
      EXPECT_SAME_RESULT(out, Tol::kExact, 1.0, describe("nonzero", DType::kBool, ml, sz) << " count=" << n);
    }
  }
}

// -------------------------------------------------------- masked_select ---

// The fused mask-selection entry: CUDA vs CPU over every dtype, full masks
// (row 1: CUB DeviceSelect), leading-dim masks (row > 1: scan + row copy,
// 16-byte and element paths), empty / all-false / all-true masks and odd
// sizes. The output buffer starts with sentinel bytes on both sides, so a
// write past row `count` is caught.
TEST_F(GpuKernels, MaskedSelect) {
  struct Case {
    std::int64_t n, row;
  };
  const Case cases[] = {{1, 1}, {1000, 1}, {100003, 1}, {7, 3}, {257, 4}, {33, 65}, {129, 1024}, {5, 8191}, {3000, 17}};
  for (DType t : kAllDTypes) {
    for (const Case& c : cases) {
      if (skip_large({c.n, c.row})) continue;
      for (int kind = 0; kind < 3; ++kind) {  // random, all false, all true
        for (Layout sl : {Layout::kContiguous, Layout::kMisaligned}) {
          const char* kind_name = kind == 0 ? "random mask" : kind == 1 ? "all-false mask" : "all-true mask";
          View mask = make_view(DType::kBool, {c.n}, Layout::kContiguous, kind == 0);
          if (kind == 2) {
            std::fill(mask.buf->host.begin(), mask.buf->host.end(), 1);
            mask.buf->upload();
          }
          std::int64_t count = 0;
          for (std::int64_t i = 0; i < c.n; ++i) count += static_cast<const bool*>(mask.cpu.data)[i] ? 1 : 0;
          View src = make_view(t, {c.n, c.row}, sl);
          View out = make_view(t, {count, c.row}, Layout::kContiguous, false);
          // Contract: count > 0 when called (the tensor layer skips empty results).
          if (count > 0) {
            cpu_table().masked_select(cpu_ctx(), out.cpu, src.cpu, mask.cpu);
            gpu_table().masked_select(gpu_ctx(), out.gpu, src.gpu, mask.gpu);
          }
          EXPECT_SAME_RESULT(out, Tol::kExact, 1.0,
                             "masked_select " << dtype_name(t) << " n=" << c.n << " row=" << c.row << " " << kind_name
                                              << " count=" << count << " src " << layout_name(sl));
        }
      }
    }
  }
}

}  // namespace
}  // namespace genesis

#endif  // GENESIS_WITH_CUDA
