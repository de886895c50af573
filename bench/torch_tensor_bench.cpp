// Tensor ops on the GPU, Genesis and PyTorch (ATen) side by side in one
// process (reference figures and goals: bench/RESULTS.md):
//   copy          d2d copy_ of 1 GiB fp32
//   add           a + b, 256 Mi fp32 elements
//   sum           sum of 256 Mi fp32 elements
//   sum_dim0/1    8192 x 8192 fp32 summed over dim 0 / dim 1
//   transpose     m.transpose(0, 1).contiguous(), 8192 x 8192 fp32
//   slice_copy    m[::2, ::3].contiguous(), 8192 x 8192 fp32
//   gather_rows   m[idx], 8192 random rows of 8192 x 8192 fp32
//   mask_select   m[mask], mask = m > 0.5 (8192 x 8192 fp32), timed in ms
//   matmul_*      n x n @ n x n for n = 1024, 4096, 8192 in fp32 (no TF32),
//                 TF32, fp16 and bf16 (fp32 accumulation)
// Both libraries read the SAME input memory: Genesis tensors are created
// first and wrapped for ATen with at::from_blob (zero copy), so the results
// are compared directly (on the GPU, with ATen); a mismatch beyond the
// op's tolerance prints both values and exits with status 1.
//
// Timing: each op runs 3 warm-ups, then --reps repetitions, each a batch of
// calls (about 2 ms) between two cudaEvents on the legacy default stream
// (both libraries queue there by default), the two libraries' repetitions
// interleaved; the median time per call is reported. GB/s count bytes read + written.
// Output: "RESULT op=.. impl=genesis|pytorch gbps=.. ms=.. tflops=.." lines,
// then a side-by-side table with the ratio genesis / pytorch.
//
// Build: cmake -DGENESIS_TORCH_BENCH=ON
//          -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)') ...
//        cmake --build build --target torch_tensor_bench
// Run:   build/torch_tensor_bench [--reps 20] [--only name,name] [--no-matmul]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "genesis/tensor/api.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

namespace {

int g_reps = 20;
std::vector<std::string> g_only;

bool wanted(const std::string& name) {
  if (g_only.empty()) return true;
  for (const auto& o : g_only) {
    if (name.rfind(o, 0) == 0) return true;
  }
  return false;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FATAL: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds per call of a() and of b(), measured interleaved.
// After 3 warm-ups each, a timed repetition runs `inner` calls back to back
// between two cudaEvents, with `inner` chosen per function so that a
// repetition lasts about 2 ms: host-side launch overhead then overlaps the
// GPU work of the previous call, as in a real program (a single call between
// two events would charge the host's time before the launch to the GPU).
// Repetitions alternate a, b, b, a, a, b, ... so that clock and power drift
// over the run (large for compute-bound matmuls: measuring all of one
// library and then all of the other moved 4096^2 matmuls by ~10%) falls on
// both alike.
std::pair<double, double> median_ms_pair(const std::function<void()>& a, const std::function<void()>& b) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) a();
  for (int i = 0; i < 3; ++i) b();
  check(cudaDeviceSynchronize(), "warm-up");
  auto timed = [&](const std::function<void()>& fn, int inner) {
    check(cudaEventRecord(start, nullptr), "record");
    for (int k = 0; k < inner; ++k) fn();
    check(cudaEventRecord(stop, nullptr), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    return static_cast<double>(ms) / inner;
  };
  auto inner_for = [&](const std::function<void()>& fn) {
    const double once = timed(fn, 1);
    return static_cast<int>(std::clamp(2.0 / std::max(once, 1e-3), 1.0, 200.0));
  };
  const int inner_a = inner_for(a), inner_b = inner_for(b);
  std::vector<double> ta, tb;
  for (int i = 0; i < g_reps; ++i) {
    if (i % 2 == 0) {
      ta.push_back(timed(a, inner_a));
      tb.push_back(timed(b, inner_b));
    } else {
      tb.push_back(timed(b, inner_b));
      ta.push_back(timed(a, inner_a));
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

struct Row {
  std::string op;
  double genesis_ms = 0, torch_ms = 0;
  double bytes = 0, flops = 0;
};
std::vector<Row> g_rows;

void result_line(const std::string& op, const char* impl, double ms, double bytes, double flops) {
  std::printf("RESULT op=%s impl=%s gbps=%.1f ms=%.4f tflops=%.2f\n", op.c_str(), impl,
              bytes > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0, ms, flops > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0);
  std::fflush(stdout);
}

// Times both implementations of one op and records the row.
void bench(const std::string& op, double bytes, double flops, const std::function<void()>& genesis_fn,
           const std::function<void()>& torch_fn) {
  Row r;
  r.op = op;
  r.bytes = bytes;
  r.flops = flops;
  // Each side gets its own warm-up (one-time setup such as cuBLAS handles
  // is outside the timed runs).
  std::tie(r.torch_ms, r.genesis_ms) = median_ms_pair(torch_fn, genesis_fn);
  result_line(op, "pytorch", r.torch_ms, bytes, flops);
  result_line(op, "genesis", r.genesis_ms, bytes, flops);
  g_rows.push_back(r);
}

at::ScalarType to_aten(genesis::DType t) {
  switch (t) {
    case genesis::DType::kBool: return at::kBool;
    case genesis::DType::kUInt8: return at::kByte;
    case genesis::DType::kInt8: return at::kChar;
    case genesis::DType::kInt16: return at::kShort;
    case genesis::DType::kInt32: return at::kInt;
    case genesis::DType::kInt64: return at::kLong;
    case genesis::DType::kFloat16: return at::kHalf;
    case genesis::DType::kBFloat16: return at::kBFloat16;
    case genesis::DType::kFloat32: return at::kFloat;
    case genesis::DType::kFloat64: return at::kDouble;
  }
  return at::kFloat;
}

// A zero-copy ATen view of a Genesis CUDA tensor (the Genesis tensor must
// outlive it).
at::Tensor as_aten(const genesis::Tensor& t) {
  std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  return at::from_blob(t.data_ptr(), sizes, strides,
                       at::TensorOptions().device(at::kCUDA, t.device().index()).dtype(to_aten(t.dtype())));
}

// Genesis's result against PyTorch's: max |g - t| <= atol + rtol * max |t|.
// Exact when both tolerances are 0. Exits on mismatch.
void verify(const std::string& op, const genesis::Tensor& g, const at::Tensor& t, double rtol, double atol) {
  std::vector<int64_t> gs(g.shape().begin(), g.shape().end());
  if (gs != t.sizes().vec()) {
    auto text = [](const std::vector<int64_t>& v) {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
      return out + "]";
    };
    std::fprintf(stderr, "MISMATCH %s: shape genesis %s vs pytorch %s\n", op.c_str(), text(gs).c_str(),
                 text(t.sizes().vec()).c_str());
    std::exit(1);
  }
  const at::Tensor ga = as_aten(g);
  if (rtol == 0 && atol == 0) {
    if (!at::equal(ga, t)) {
      const at::Tensor ne = ga.ne(t).flatten().nonzero();
      const int64_t first = ne.numel() > 0 ? ne[0][0].item<int64_t>() : -1;
      std::fprintf(stderr, "MISMATCH %s: %lld elements differ; first at flat index %lld: genesis %.9g pytorch %.9g\n",
                   op.c_str(), static_cast<long long>(ne.size(0)), static_cast<long long>(first),
                   first >= 0 ? ga.flatten()[first].item<double>() : 0.0,
                   first >= 0 ? t.flatten()[first].item<double>() : 0.0);
      std::exit(1);
    }
    std::printf("CHECK op=%s exact ok\n", op.c_str());
    return;
  }
  const at::Tensor gd = ga.to(at::kDouble), td = t.to(at::kDouble);
  const double diff = (gd - td).abs().max().item<double>();
  const double scale = td.abs().max().item<double>();
  if (!(diff <= atol + rtol * scale)) {
    const int64_t at_idx = (gd - td).abs().flatten().argmax().item<int64_t>();
    std::fprintf(stderr, "MISMATCH %s: max |genesis - pytorch| = %.6g > %.3g + %.3g * %.6g; at flat %lld: genesis %.9g pytorch %.9g\n",
                 op.c_str(), diff, atol, rtol, scale, static_cast<long long>(at_idx),
                 gd.flatten()[at_idx].item<double>(), td.flatten()[at_idx].item<double>());
    std::exit(1);
  }
  std::printf("CHECK op=%s max_abs_diff=%.3g (max |ref| %.3g) ok\n", op.c_str(), diff, scale);
}

void print_table() {
  std::printf("\n%-22s %12s %12s %12s %12s %10s\n", "op", "genesis", "pytorch", "genesis ms", "pytorch ms", "ratio");
  for (const Row& r : g_rows) {
    const bool tf = r.flops > 0;
    const double unit = tf ? 1e12 : 1e9;
    const double work = tf ? r.flops : r.bytes;
    if (work > 0) {
      std::printf("%-22s %9.1f %s %9.1f %s %12.4f %12.4f %9.3fx\n", r.op.c_str(), work / (r.genesis_ms * 1e-3) / unit,
                  tf ? "TF/s" : "GB/s", work / (r.torch_ms * 1e-3) / unit, tf ? "TF/s" : "GB/s", r.genesis_ms, r.torch_ms,
                  r.torch_ms / r.genesis_ms);
    } else {
      std::printf("%-22s %12s %12s %12.4f %12.4f %9.3fx\n", r.op.c_str(), "-", "-", r.genesis_ms, r.torch_ms,
                  r.torch_ms / r.genesis_ms);
    }
  }
  std::printf("(ratio = pytorch time / genesis time: >= 1 means Genesis is as fast or faster)\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool matmuls = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      g_reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      std::size_t pos = 0;
      while (pos <= list.size()) {
        const std::size_t comma = list.find(',', pos);
        const std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!item.empty()) g_only.push_back(item);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (a == "--no-matmul") {
      matmuls = false;
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--only op,op] [--no-matmul]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "torch_tensor_bench needs a GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, reps %d (median)\n", prop.name, g_reps);

  using namespace genesis;
  const Device gpu{DeviceType::kCUDA, 0};
  genesis::manual_seed(2026);

  // ------------------------------------------------------- element-wise ---
  const std::int64_t big = std::int64_t{256} << 20;  // 256 Mi fp32 = 1 GiB
  if (wanted("copy") || wanted("add") || wanted("sum")) {
    Tensor a = genesis::rand({big}, TensorOptions(DType::kFloat32, gpu));
    Tensor b = genesis::rand({big}, TensorOptions(DType::kFloat32, gpu));
    at::Tensor ta = as_aten(a), tb = as_aten(b);
    const double gib = static_cast<double>(big) * 4;
    if (wanted("copy")) {
      Tensor dst = genesis::empty({big}, TensorOptions(DType::kFloat32, gpu));
      at::Tensor tdst = at::empty_like(ta);
      bench("copy", 2 * gib, 0, [&] { dst.copy_(a); }, [&] { tdst.copy_(ta); });
      verify("copy", dst, tdst, 0, 0);
    }
    if (wanted("add")) {
      Tensor c;
      at::Tensor tc;
      bench("add", 3 * gib, 0, [&] { c = a + b; }, [&] { tc = ta + tb; });
      verify("add", c, tc, 0, 0);
    }
    if (wanted("sum")) {
      Tensor s;
      at::Tensor ts;
      bench("sum", gib, 0, [&] { s = a.sum(); }, [&] { ts = ta.sum(); });
      verify("sum", s, ts, 1e-5, 0);
    }
  }

  // ------------------------------------------------------ 8192 x 8192 ---
  const std::int64_t n = 8192;
  {
    Tensor m = genesis::randn({n, n}, TensorOptions(DType::kFloat32, gpu));
    at::Tensor tm = as_aten(m);
    const double mat = static_cast<double>(n) * n * 4;
    if (wanted("sum_dim0")) {
      Tensor s;
      at::Tensor ts;
      bench("sum_dim0", mat + n * 4.0, 0, [&] { s = m.sum(0); }, [&] { ts = tm.sum(0); });
      verify("sum_dim0", s, ts, 1e-5, 1e-3);
    }
    if (wanted("sum_dim1")) {
      Tensor s;
      at::Tensor ts;
      bench("sum_dim1", mat + n * 4.0, 0, [&] { s = m.sum(1); }, [&] { ts = tm.sum(1); });
      verify("sum_dim1", s, ts, 1e-5, 1e-3);
    }
    if (wanted("transpose")) {
      Tensor t;
      at::Tensor tt;
      bench("transpose", 2 * mat, 0, [&] { t = m.transpose(0, 1).contiguous(); },
            [&] { tt = tm.transpose(0, 1).contiguous(); });
      verify("transpose", t, tt, 0, 0);
    }
    if (wanted("slice_copy")) {
      Tensor t;
      at::Tensor tt;
      const double out_bytes = static_cast<double>((n + 1) / 2) * ((n + 2) / 3) * 4;
      bench("slice_copy", 2 * out_bytes, 0,
            [&] { t = genesis::index(m, {Slice(std::nullopt, std::nullopt, 2), Slice(std::nullopt, std::nullopt, 3)}).contiguous(); },
            [&] { tt = tm.slice(0, 0, n, 2).slice(1, 0, n, 3).contiguous(); });
      verify("slice_copy", t, tt, 0, 0);
    }
    if (wanted("gather_rows")) {
      Tensor idx = genesis::randint(0, n, {n}, TensorOptions(DType::kInt64, gpu));
      at::Tensor tidx = as_aten(idx);
      Tensor t;
      at::Tensor tt;
      bench("gather_rows", 2 * mat + n * 8.0, 0, [&] { t = genesis::index(m, {idx}); }, [&] { tt = tm.index({tidx}); });
      verify("gather_rows", t, tt, 0, 0);
    }
    if (wanted("mask_select")) {
      Tensor mask = m > 0.5;
      at::Tensor tmask = as_aten(mask);
      Tensor t;
      at::Tensor tt;
      bench("mask_select", 0, 0, [&] { t = genesis::index(m, {mask}); }, [&] { tt = tm.index({tmask}); });
      verify("mask_select", t, tt, 0, 0);
    }
  }

  // ------------------------------------------------------------ matmul ---
  if (matmuls) {
    struct Kind {
      const char* name;
      DType dtype;
      bool tf32;
      double rtol;
    };
    const Kind kinds[] = {{"fp32", DType::kFloat32, false, 1e-4},
                          {"tf32", DType::kFloat32, true, 2e-2},
                          {"fp16", DType::kFloat16, false, 2e-2},
                          {"bf16", DType::kBFloat16, false, 5e-2}};
    for (const Kind& k : kinds) {
      for (std::int64_t s : {1024, 4096, 8192}) {
        const std::string op = std::string("matmul_") + k.name + "_" + std::to_string(s);
        if (!wanted(op)) continue;
        genesis::set_allow_tf32(k.tf32);
        at::globalContext().setAllowTF32CuBLAS(k.tf32);
        Tensor a = genesis::randn({s, s}, TensorOptions(k.dtype, gpu));
        Tensor b = genesis::randn({s, s}, TensorOptions(k.dtype, gpu));
        at::Tensor ta = as_aten(a), tb = as_aten(b);
        Tensor c;
        at::Tensor tc;
        const double flops = 2.0 * static_cast<double>(s) * s * s;
        bench(op, 0, flops, [&] { c = genesis::matmul(a, b); }, [&] { tc = at::matmul(ta, tb); });
        // Entries are sums of s products of N(0,1) values: ~sqrt(s) in size.
        verify(op, c, tc, k.rtol, 0);
      }
    }
    genesis::set_allow_tf32(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }

  check(cudaDeviceSynchronize(), "final sync");
  print_table();
  return 0;
}
