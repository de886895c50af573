// GPU tests of the CUDA kernel table (src/tensor/cuda/): every entry is run
// against the CPU table on the same random inputs and the results compared
// -- bit for bit wherever the math is exact (casts, integer ops,
// comparisons, IEEE + - * /, Philox draws), with dtype-scaled tolerances for
// libm functions, floating reductions and matmul.
//
// Suites:
//   GpuKernels   one test per table entry, over every dtype the contract
//                allows and these layouts: contiguous, strided, negative
//                stride, broadcast (stride 0), is_scalar inputs, in place,
//                empty, large (multi-block, odd sizes) and a misaligned
//                offset; the tiled-transpose, row-gather, column/row
//                reduction and split paths are hit on purpose.
//   GpuTensorApi the public Tensor API on cuda vs the same calls on cpu.
// Output buffers start with the same sentinel bytes on both sides and are
// compared whole, so a write outside the view is caught too. A mismatch
// prints the op, the dtype(s), the layout, the element index, and the
// expected (CPU) and actual (GPU) values of the first few differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/core/dtype.h"
#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/tensor/api.h"
#include "genesis/tensor/backend.h"
#include "genesis/core/cast.h"

#if GENESIS_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace genesis {
namespace {

using kernels::ArgReduceOp;
using kernels::BinaryOp;
using kernels::IndexArgs;
using kernels::KernelContext;
using kernels::KernelTable;
using kernels::ReduceOp;
using kernels::StridedOperand;
using kernels::UnaryOp;

#define GENESIS_SKIP_WITHOUT_GPU()                                              \
  do {                                                                          \
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device available"; \
  } while (0)

#if GENESIS_WITH_CUDA

#define CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

constexpr DType kAllDTypes[] = {DType::kBool,    DType::kUInt8,    DType::kInt8,    DType::kInt16,   DType::kInt32,
                                DType::kInt64,   DType::kFloat16,  DType::kBFloat16, DType::kFloat32, DType::kFloat64};
constexpr DType kFloatDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};

const KernelTable& cpu_table() { return kernels::kernels_for(DeviceType::kCPU); }
const KernelTable& gpu_table() { return kernels::kernels_for(DeviceType::kCUDA); }
KernelContext cpu_ctx() { return KernelContext{Device{}, ~memory::StreamId{0}}; }
KernelContext gpu_ctx() { return KernelContext{Device{DeviceType::kCUDA, 0}, ~memory::StreamId{0}}; }

// ------------------------------------------------------------ elements ---

double element_as_double(DType t, const unsigned char* p) {
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

std::string element_text(DType t, const unsigned char* p) {
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

void write_double(DType t, unsigned char* p, double v) {
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

double dtype_eps(DType t) {
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

const char* layout_name(Layout l) {
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

std::mt19937_64& rng() {
  static std::mt19937_64 r(12345);
  return r;
}

// Random element bytes for dtype t: small integers so that integer ops stay
// interesting (and sometimes overflow for the narrow ones), floats in
// [-4, 4] with a sprinkle of 0, -0, inf and NaN unless `finite`.
void random_fill(DType t, unsigned char* p, std::size_t count, bool finite = false, bool positive = false) {
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
View make_view(DType dtype, const std::vector<std::int64_t>& sizes, Layout layout, bool fill_random = true,
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
std::string compare_buffers(DType t, const std::vector<unsigned char>& expected, const std::vector<unsigned char>& got,
                            Tol tol, double scale = 1.0) {
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
bool quick() {
  static const bool q = [] {
    const char* v = std::getenv("GENESIS_GPU_TEST_QUICK");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return q;
}
bool skip_large(const std::vector<std::int64_t>& sizes) {
  std::int64_t n = 1;
  for (std::int64_t s : sizes) n *= s;
  return quick() && n > 20000;
}

std::string describe(const char* op, DType t, Layout l, const std::vector<std::int64_t>& sizes) {
  std::ostringstream os;
  os << op << " dtype=" << dtype_name(t) << " layout=" << layout_name(l) << " sizes=[";
  for (std::size_t i = 0; i < sizes.size(); ++i) os << (i ? "," : "") << sizes[i];
  os << "]";
  return os.str();
}

const std::vector<std::vector<std::int64_t>>& shapes() {
  static const std::vector<std::vector<std::int64_t>> s = {
      {0}, {1}, {7}, {3, 5}, {33, 65}, {2, 3, 17}, {1000003}, {257, 1031}, {4, 1, 6},
  };
  return s;
}

constexpr Layout kInLayouts[] = {Layout::kContiguous, Layout::kStrided,   Layout::kNegative,
                                 Layout::kBroadcast,  Layout::kTransposed, Layout::kMisaligned};
constexpr Layout kOutLayouts[] = {Layout::kContiguous, Layout::kStrided, Layout::kNegative, Layout::kMisaligned};

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    GENESIS_SKIP_WITHOUT_GPU();
  }
};

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

#else  // !GENESIS_WITH_CUDA

TEST(GpuKernels, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace genesis
