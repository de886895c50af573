// CUDA matmul through cuBLAS (MatmulParams and the matmul contract in
// genesis/tensor/backend.h).
//
// Note [Row-major matmul on cuBLAS]: cuBLAS is column-major. The row-major
// product out = a @ b (M x N, rows of N) is, read column-major, out^T = b^T
// a^T, an N x M product. A row-major matrix X (rows x cols, element strides
// rs, cs) read column-major is X^T with ld = rs when cs == 1 (op N), or X
// itself with ld = cs when rs == 1 (op T, which gives X^T back). Size-1
// dims may carry any stride, so ld is clamped to the minimum cuBLAS accepts
// (the CPU backend does the same for cblas). Batches use the strided-batched
// call (batch stride 0 = broadcast); a single matrix uses the plain call, as
// PyTorch does, so that both libraries pick from the same kernels.
//
// Note [cuBLAS handles]: one handle per (thread, device), taken from a
// process-wide pool and returned to it when the thread exits (creating a
// handle costs milliseconds). The pool is never destroyed: destroying
// handles during static destruction can run after the CUDA runtime has shut
// down. Each call sets the stream and a workspace taken from Genesis's
// caching allocator on that stream and released right after the call is
// queued (stream-ordered reuse makes this safe).
#include <cublas_v2.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_common.cuh"
#include "cuda_kernels.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::kernels::cuda_impl {
namespace {

#define GENESIS_CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                               \
    const cublasStatus_t genesis_cublas_status_ = (expr);                                            \
    if (genesis_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                           \
      throw ::genesis::CudaError(                                                                    \
          ::genesis::detail::str_cat(#expr " failed: ", cublasGetStatusName(genesis_cublas_status_),  \
                                     " (", static_cast<int>(genesis_cublas_status_),                 \
                                     "): ", cublasGetStatusString(genesis_cublas_status_)),          \
          static_cast<int>(genesis_cublas_status_), __FILE__, __LINE__);                             \
    }                                                                                                \
  } while (0)

struct HandlePool {
  std::mutex mutex;
  std::unordered_map<int, std::vector<cublasHandle_t>> free;
};

HandlePool& handle_pool() {
  static HandlePool* pool = new HandlePool;  // never destroyed: Note [cuBLAS handles]
  return *pool;
}

struct ThreadHandles {
  std::unordered_map<int, cublasHandle_t> by_device;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (auto& [dev, h] : by_device) pool.free[dev].push_back(h);
  }
};

cublasHandle_t handle_for(int device) {
  thread_local ThreadHandles mine;
  auto it = mine.by_device.find(device);
  if (it != mine.by_device.end()) return it->second;
  cublasHandle_t h = nullptr;
  {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto& v = pool.free[device];
    if (!v.empty()) {
      h = v.back();
      v.pop_back();
    }
  }
  if (h == nullptr) GENESIS_CUBLAS_CHECK(cublasCreate(&h));  // device is current (LaunchScope)
  mine.by_device.emplace(device, h);
  return h;
}

// cuBLAS's recommended workspace on Hopper.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

struct Operand {
  cublasOperation_t op;
  std::int64_t ld;
};

// Note [Row-major matmul on cuBLAS] for one row-major rows x cols matrix.
Operand layout(std::int64_t rs, std::int64_t cs, std::int64_t rows, std::int64_t cols) {
  const std::int64_t min_cols = std::max<std::int64_t>(1, cols), min_rows = std::max<std::int64_t>(1, rows);
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= min_cols)) return {CUBLAS_OP_N, rows <= 1 ? min_cols : rs};
  return {CUBLAS_OP_T, cols <= 1 ? min_rows : cs};
}

int to_int(std::int64_t v, const char* what) {
  if (v > 0x7fffffff) GENESIS_THROW(InvalidArgumentError, "matmul on cuda: ", what, " = ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void matmul(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& a, const StridedOperand& b,
            const MatmulParams& params) {
  const std::int64_t batch = out.sizes[0], m = out.sizes[1], n = out.sizes[2], k = a.sizes[2];
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    fill(ctx, out, Scalar(0));
    return;
  }
  LaunchScope scope(ctx);
  const int device = ctx.device.index();
  cublasHandle_t h = handle_for(device);
  GENESIS_CUBLAS_CHECK(cublasSetStream(h, scope.stream()));  // resets the workspace: set it after
  memory::CachingAllocator& alloc = memory::cuda_allocator(device);
  void* workspace = alloc.allocate(kWorkspaceBytes, scope.stream_id());
  struct Release {
    memory::CachingAllocator& alloc;
    void* p;
    ~Release() { alloc.deallocate(p); }
  } release{alloc, workspace};
  GENESIS_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, kWorkspaceBytes));

  // First cuBLAS operand is b (N x K read column-major), second a.
  const Operand ob = layout(b.strides[1], b.strides[2], k, n);
  const Operand oa = layout(a.strides[1], a.strides[2], m, k);
  const int cm = to_int(n, "N"), cn = to_int(m, "M"), ck = to_int(k, "K");
  const int ldb = to_int(ob.ld, "ld(b)"), lda = to_int(oa.ld, "ld(a)"), ldc = cm;
  const int count = to_int(batch, "batch");
  const long long sb = b.strides[0], sa = a.strides[0], sc = out.strides[0];
  const bool batched = count > 1;

  if (out.dtype == DType::kFloat64) {
    const double one = 1.0, zero = 0.0;
    GENESIS_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const auto* pb = static_cast<const double*>(b.data);
    const auto* pa = static_cast<const double*>(a.data);
    auto* pc = static_cast<double*>(out.data);
    if (batched) {
      GENESIS_CUBLAS_CHECK(cublasDgemmStridedBatched(h, ob.op, oa.op, cm, cn, ck, &one, pb, ldb, sb, pa, lda, sa, &zero,
                                                     pc, ldc, sc, count));
    } else {
      GENESIS_CUBLAS_CHECK(cublasDgemm(h, ob.op, oa.op, cm, cn, ck, &one, pb, ldb, pa, lda, &zero, pc, ldc));
    }
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  if (out.dtype == DType::kFloat32) {
    // TF32 only when asked (PyTorch's allow_tf32 default for matmul is off).
    GENESIS_CUBLAS_CHECK(cublasSetMathMode(h, params.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const auto* pb = static_cast<const float*>(b.data);
    const auto* pa = static_cast<const float*>(a.data);
    auto* pc = static_cast<float*>(out.data);
    if (batched) {
      GENESIS_CUBLAS_CHECK(cublasSgemmStridedBatched(h, ob.op, oa.op, cm, cn, ck, &one, pb, ldb, sb, pa, lda, sa, &zero,
                                                     pc, ldc, sc, count));
    } else {
      GENESIS_CUBLAS_CHECK(cublasSgemm(h, ob.op, oa.op, cm, cn, ck, &one, pb, ldb, pa, lda, &zero, pc, ldc));
    }
    return;
  }
  if (out.dtype != DType::kFloat16 && out.dtype != DType::kBFloat16) {
    GENESIS_THROW(InvalidArgumentError, "matmul on cuda supports float16, bfloat16, float32 and float64, not ",
                  dtype_name(out.dtype));
  }
  // 16-bit floats: tensor cores, float32 accumulation and alpha/beta.
  const cudaDataType_t t = out.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  GENESIS_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  if (batched) {
    GENESIS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ob.op, oa.op, cm, cn, ck, &one, b.data, t, ldb, sb, a.data, t,
                                                    lda, sa, &zero, out.data, t, ldc, sc, count, CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT));
  } else {
    GENESIS_CUBLAS_CHECK(cublasGemmEx(h, ob.op, oa.op, cm, cn, ck, &one, b.data, t, ldb, a.data, t, lda, &zero,
                                      out.data, t, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace genesis::kernels::cuda_impl
