// Shared by the GPU kernel tests (tests/tensor/gpu_kernels_*_test.cpp,
// gpu_tensor_api_test.cpp): operands built over a host buffer and its device
// twin, random element data, and a whole-buffer comparison of CPU and CUDA
// results. Exact wherever the math is exact (casts, integer ops,
// comparisons, IEEE + - * /, Philox draws), with dtype-scaled tolerances for
// libm functions, floating reductions and matmul.
//
// Output buffers start with the same sentinel bytes on both sides and are
// compared whole, so a write outside the view is caught too. A mismatch
// prints the op, the dtype(s), the layout, the element index, and the
// expected (CPU) and actual (GPU) values of the first few differences.
//
// Everything lives in a named namespace (not an anonymous one) so that the
// GpuKernels fixture is one type in every test file: GoogleTest refuses a
// suite whose tests use different fixture classes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/core/cast.h"
#include "genesis/core/dtype.h"
#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/cuda/runtime.h"
#include "genesis/tensor/api.h"
#include "genesis/tensor/backend.h"

#if GENESIS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#define GENESIS_SKIP_WITHOUT_GPU()                                                       \
  do {                                                                                   \
    if (genesis::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device available"; \
  } while (0)

#if GENESIS_WITH_CUDA

namespace genesis::gpu_test {

using kernels::ArgReduceOp;
using kernels::BinaryOp;
using kernels::IndexArgs;
using kernels::KernelContext;
using kernels::KernelTable;
using kernels::ReduceOp;
using kernels::StridedOperand;
using kernels::UnaryOp;

#define CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

inline constexpr DType kAllDTypes[] = {DType::kBool,    DType::kUInt8,   DType::kInt8,     DType::kInt16,
                                       DType::kInt32,   DType::kInt64,   DType::kFloat16,  DType::kBFloat16,
                                       DType::kFloat32, DType::kFloat64};
inline constexpr DType kFloatDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

inline const KernelTable& cpu_table() { return kernels::kernels_for(DeviceType::kCPU); }
inline const KernelTable& gpu_table() { return kernels::kernels_for(DeviceType::kCUDA); }
inline KernelContext cpu_ctx() { return KernelContext{Device{}, ~memory::StreamId{0}}; }
inline KernelContext gpu_ctx() { return KernelContext{Device{DeviceType::kCUDA, 0}, ~memory::StreamId{0}}; }

// ------------------------------------------------------------ elements ---

inline double element_as_double(DType t, const unsigned char* p) {
  switch (t) {
    case DType::kBool: return *p != 0 ? 1.0 : 0.0;
    case DType::kUInt8: return *p;
    case DType::kInt8: return *reinterpret_cast<const std::int8_t*>(p);
    case DType::kInt16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::kInt32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kInt64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::kFloat16: { Half v; std::memcpy(&v, p, 2); return static_cast<float>(v); }
    case DType::kBFloat16: { BFloat16 v; std::memcpy(&v, p, 2); return static_cast<float>(v); }
    case DType::kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}

inline std::string element_text(DType t, const unsigned char* p) {
  std::ostringstream os;
  os.precision(17);
  os << element_as_double(t, p);
  if (t == DType::kInt64) {
    std::int64_t v;
    std::memcpy(&v, p, 8);
    os.str("");
    os << v;
  }
  os << " (bits 0x";
  for (int i = static_cast<int>(dtype_size(t)) - 1; i >= 0; --i) {
    static const char* hex = "0123456789abcdef";
    os << hex[p[i] >> 4] << hex[p[i] & 15];
  }
  os << ")";
  return os.str();
}

inline void write_double(DType t, unsigned char* p, double v) {
  switch (t) {
    case DType::kBool: *p = v != 0 ? 1 : 0; return;
    case DType::kUInt8: { auto x = kernels::cast<std::uint8_t>(v); std::memcpy(p, &x, 1); return; }
    case DType::kInt8: { auto x = kernels::cast<std::int8_t>(v); std::memcpy(p, &x, 1); return; }
    case DType::kInt16: { auto x = kernels::cast<std::int16_t>(v); std::memcpy(p, &x, 2); return; }
    case DType::kInt32: { auto x = kernels::cast<std::int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::kInt64: { auto x = kernels::cast<std::int64_t>(v); std::memcpy(p, &x, 8); return; }
    case DType::kFloat16: { Half x(v); std::memcpy(p, &x, 2); return; }
    case DType::kBFloat16: { BFloat16 x(v); std::memcpy(p, &x, 2); return; }
    case DType::kFloat32: { auto x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case DType::kFloat64: std::memcpy(p, &v, 8); return;
  }
}

// How two results may differ.
enum class Tol {
  kExact,   // bit for bit (any NaN equals any NaN)
  kLibm,    // a few ulps of the dtype (exp, log, pow, ...)
  kSum,     // floating reduction: order of additions differs
  kMatmul,  // accumulation order and tensor-core rounding differ
};

inline double dtype_eps(DType t) {
  switch (t) {
    case DType::kFloat16: return 9.77e-4;
    case DType::kBFloat16: return 7.82e-3;
    case DType::kFloat32: return 1.2e-7;
    case DType::kFloat64: return 2.3e-16;
    default: return 0;
  }
}

// ------------------------------------------------------------- buffers ---

// A host buffer and its device twin, both sized for one strided view.
struct Buffer {
  DType dtype = DType::kFloat32;
  std::size_t bytes = 0;
  std::vector<unsigned char> host;
  void* dev = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (dev != nullptr) cudaFree(dev);
  }
  void upload() { ASSERT_EQ(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> out(bytes);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a kernel failed: " << cudaGetErrorString(cudaGetLastError());
    EXPECT_EQ(cudaMemcpy(out.data(), dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

// Layouts of a view over its buffer.
enum class Layout { kContiguous, kStrided, kNegative, kBroadcast, kTransposed, kMisaligned, kScalar };

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kStrided: return "strided(step 2)";
    case Layout::kNegative: return "negative-stride";
    case Layout::kBroadcast: return "broadcast(stride 0)";
    case Layout::kTransposed: return "transposed";
    case Layout::kMisaligned: return "misaligned(+1 element)";
    case Layout::kScalar: return "is_scalar";
  }
  return "?";
}

// A strided view: host and device operands over one Buffer.
struct View {
  std::unique_ptr<Buffer> buf;
  StridedOperand cpu, gpu;
  Layout layout = Layout::kContiguous;
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(12345);
  return r;
}

// Random element bytes for dtype t: small integers so that integer ops stay
// interesting (and sometimes overflow for the narrow ones), floats in
// [-4, 4] with a sprinkle of 0, -0, inf and NaN unless `finite`.
inline void random_fill(DType t, unsigned char* p, std::size_t count, bool finite = false, bool positive = false) {
  auto& r = rng();
  std::uniform_real_distribution<double> uf(positive ? 0.05 : -4.0, 4.0);
  std::uniform_int_distribution<int> ui(positive ? 1 : -60, 60);
  std::uniform_int_distribution<int> special(0, 63);
  const std::size_t isz = dtype_size(t);
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char* e = p + i * isz;
    if (t == DType::kBool) {
      *e = static_cast<unsigned char>(r() & 1);
    } else if (!is_floating(t)) {
      int v = ui(r);
      if (t == DType::kUInt8 && v < 0) v = -v;
      if (!positive && special(r) == 0) v = (t == DType::kInt8 || t == DType::kUInt8) ? 127 : 30000;
      write_double(t, e, v);
    } else {
      double v = uf(r);
      if (!finite && !positive) {
        switch (special(r)) {
          case 0: v = 0.0; break;
          case 1: v = -0.0; break;
          case 2: v = INFINITY; break;
          case 3: v = NAN; break;
          case 4: v = std::round(v); break;  // exact ties for floor/remainder
          default: break;
        }
      }
      write_double(t, e, v);
    }
  }
}

// Builds a view of `sizes` with `layout`. Inputs get random data; outputs
// (fill_random = false) a sentinel pattern. kScalar gives an is_scalar
// operand holding `scalar`.
inline View make_view(DType dtype, const std::vector<std::int64_t>& sizes, Layout layout, bool fill_random = true,
                      bool finite = false, bool positive = false) {
  View v;
  v.layout = layout;
  StridedOperand op;
  op.dtype = dtype;
  op.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < op.ndim; ++d) op.sizes[d] = sizes[static_cast<std::size_t>(d)];
  if (layout == Layout::kScalar) {
    op.is_scalar = true;
    double x = 0;
    unsigned char tmp[8] = {};
    random_fill(dtype, tmp, 1, true, positive);
    x = element_as_double(dtype, tmp);
    if (dtype == DType::kBool) op.scalar = Scalar(x != 0);
    else if (is_floating(dtype)) op.scalar = Scalar(x);
    else op.scalar = Scalar(static_cast<std::int64_t>(x));
    v.cpu = v.gpu = op;
    return v;
  }
  // Strides in elements: row-major, optionally permuted/stepped/negated.
  std::vector<int> order(static_cast<std::size_t>(op.ndim));
  std::iota(order.begin(), order.end(), 0);
  if (layout == Layout::kTransposed && op.ndim >= 2) std::swap(order[order.size() - 1], order[order.size() - 2]);
  const std::int64_t step = layout == Layout::kStrided ? 2 : 1;
  std::int64_t running = step;
  for (int k = op.ndim - 1; k >= 0; --k) {
    const int d = order[static_cast<std::size_t>(k)];
    op.strides[d] = running;
    running *= std::max<std::int64_t>(1, op.sizes[d]);
  }
  if (layout == Layout::kBroadcast && op.ndim >= 1) op.strides[0] = 0;
  if (layout == Layout::kNegative && op.ndim >= 1) op.strides[op.ndim - 1] = -op.strides[op.ndim - 1];
  std::int64_t lo = 0, hi = 0;
  for (int d = 0; d < op.ndim; ++d) {
    if (op.sizes[d] == 0) continue;
    const std::int64_t ext = (op.sizes[d] - 1) * op.strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  const std::int64_t pad = 3;
  const std::int64_t shift = (layout == Layout::kMisaligned ? 1 : 0);
  const std::int64_t count = hi - lo + 1 + pad + shift;
  v.buf = std::make_unique<Buffer>();
  v.buf->dtype = dtype;
  v.buf->bytes = static_cast<std::size_t>(count) * dtype_size(dtype);
  v.buf->host.assign(v.buf->bytes, 0xA5);
  if (fill_random) random_fill(dtype, v.buf->host.data(), static_cast<std::size_t>(count), finite, positive);
  if (dtype == DType::kBool && !fill_random) std::fill(v.buf->host.begin(), v.buf->host.end(), 0);
  EXPECT_EQ(cudaMalloc(&v.buf->dev, v.buf->bytes), cudaSuccess);
  v.buf->upload();
  const std::int64_t first = (-lo + shift) * static_cast<std::int64_t>(dtype_size(dtype));
  v.cpu = v.gpu = op;
  v.cpu.data = v.buf->host.data() + first;
  v.gpu.data = static_cast<unsigned char*>(v.buf->dev) + first;
  return v;
}

// Compares a whole output buffer; returns "" or a description of the first
// mismatches.
inline std::string compare_buffers(DType t, const std::vector<unsigned char>& expected,
                                   const std::vector<unsigned char>& got, Tol tol, double scale = 1.0) {
  const std::size_t isz = dtype_size(t);
  const std::size_t n = expected.size() / isz;
  std::ostringstream os;
  int shown = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* e = expected.data() + i * isz;
    const unsigned char* g = got.data() + i * isz;
    if (std::memcmp(e, g, isz) == 0) continue;
    const double ev = element_as_double(t, e), gv = element_as_double(t, g);
    bool ok = false;
    if (is_floating(t)) {
      if (std::isnan(ev) && std::isnan(gv)) ok = true;
      else if (tol != Tol::kExact && std::isfinite(ev) && std::isfinite(gv)) {
        const double eps = dtype_eps(t);
        const double rel = tol == Tol::kLibm ? 4 * eps : tol == Tol::kSum ? 64 * eps : 256 * eps;
        ok = std::fabs(ev - gv) <= rel * scale * (1.0 + std::fabs(ev));
      } else if (tol != Tol::kExact && std::isinf(ev) && std::isinf(gv) && (ev > 0) == (gv > 0)) {
        ok = true;
      }
    }
    if (ok) continue;
    ++bad;
    if (shown++ < 5) {
      os << "\n    element " << i << ": expected " << element_text(t, e) << ", got " << element_text(t, g);
    }
  }
  if (bad == 0) return "";
  std::ostringstream head;
  head << bad << " of " << n << " elements differ (" << dtype_name(t) << "):" << os.str();
  return head.str();
}

#define EXPECT_SAME_RESULT(view, tol, scale, what)                                                          \
  do {                                                                                                      \
    const std::string genesis_diff_ = compare_buffers((view).buf->dtype, (view).buf->host,                  \
                                                      (view).buf->download(), (tol), (scale));              \
    EXPECT_TRUE(genesis_diff_.empty()) << what << ": " << genesis_diff_;                                    \
  } while (0)

// GENESIS_GPU_TEST_QUICK=1 (set for compute-sanitizer runs) skips the large
// shapes: under memcheck every launch and allocation is far slower.
inline bool quick() {
  static const bool q = [] {
    const char* v = std::getenv("GENESIS_GPU_TEST_QUICK");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return q;
}
inline bool skip_large(const std::vector<std::int64_t>& sizes) {
  std::int64_t n = 1;
  for (std::int64_t s : sizes) n *= s;
  return quick() && n > 20000;
}

inline std::string describe(const char* op, DType t, Layout l, const std::vector<std::int64_t>& sizes) {
  std::ostringstream os;
  os << op << " dtype=" << dtype_name(t) << " layout=" << layout_name(l) << " sizes=[";
  for (std::size_t i = 0; i < sizes.size(); ++i) os << (i ? "," : "") << sizes[i];
  os << "]";
  return os.str();
}

inline const std::vector<std::vector<std::int64_t>>& shapes() {
  static const std::vector<std::vector<std::int64_t>> s = {
      {0}, {1}, {7}, {3, 5}, {33, 65}, {2, 3, 17}, {1000003}, {257, 1031}, {4, 1, 6},
  };
  return s;
}

inline constexpr Layout kInLayouts[] = {Layout::kContiguous, Layout::kStrided,    Layout::kNegative,
                                        Layout::kBroadcast,  Layout::kTransposed, Layout::kMisaligned};
inline constexpr Layout kOutLayouts[] = {Layout::kContiguous, Layout::kStrided, Layout::kNegative,
                                         Layout::kMisaligned};

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    GENESIS_SKIP_WITHOUT_GPU();
  }
};

}  // namespace genesis::gpu_test

#endif  // GENESIS_WITH_CUDA
