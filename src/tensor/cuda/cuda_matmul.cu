// CUDA matmul through cuBLAS (MatmulParams and the matmul contract in
// genesis/tensor/backend.h): cuBLASLt for float32 / TF32 / float16 /
// bfloat16 (Note [Matmul through cuBLASLt]), the legacy API for float64 and
// whenever cuBLASLt offers no algorithm.
//
// Note [Row-major matmul on cuBLAS]: cuBLAS is column-major. The row-major
// product out = a @ b (M x N, rows of N) is, read column-major, out^T = b^T
// a^T, an N x M product. A row-major matrix X (rows x cols, element strides
// rs, cs) read column-major is X^T with ld = rs when cs == 1 (op N), or X
// itself with ld = cs when rs == 1 (op T, which gives X^T back). Size-1
// dims may carry any stride, so ld is clamped to the minimum cuBLAS accepts
// (the CPU backend does the same for cblas). On the legacy path batches use
// the strided-batched call (batch stride 0 = broadcast) and a single matrix
// the plain call; cuBLASLt takes the same batch count and strides as
// matrix-layout attributes.
//
// Note [cuBLAS handles]: one handle per (thread, device), taken from a
// process-wide pool and returned to it when the thread exits (creating a
// handle costs milliseconds). The pool is never destroyed: destroying
// handles during static destruction can run after the CUDA runtime has shut
// down. Each call sets the stream and a workspace taken from Genesis's
// caching allocator on that stream and released right after the call is
// queued (stream-ordered reuse makes this safe).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>

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

// Note [cuBLAS handles] for one handle type (cublasHandle_t for the legacy
// API, cublasLtHandle_t for cuBLASLt).
template <typename H, cublasStatus_t (*Create)(H*)>
struct HandlePool {
  std::mutex mutex;
  std::unordered_map<int, std::vector<H>> free;

  static HandlePool& instance() {
    static HandlePool* pool = new HandlePool;  // never destroyed: Note [cuBLAS handles]
    return *pool;
  }

  struct ThreadHandles {
    std::unordered_map<int, H> by_device;
    ~ThreadHandles() {
      HandlePool& pool = instance();
      std::lock_guard<std::mutex> lock(pool.mutex);
      for (auto& [dev, h] : by_device) pool.free[dev].push_back(h);
    }
  };

  static H handle_for(int device) {
    thread_local ThreadHandles mine;
    auto it = mine.by_device.find(device);
    if (it != mine.by_device.end()) return it->second;
    H h = nullptr;
    {
      HandlePool& pool = instance();
      std::lock_guard<std::mutex> lock(pool.mutex);
      auto& v = pool.free[device];
      if (!v.empty()) {
        h = v.back();
        v.pop_back();
      }
    }
    if (h == nullptr) GENESIS_CUBLAS_CHECK(Create(&h));  // device is current (LaunchScope)
    mine.by_device.emplace(device, h);
    return h;
  }
};

cublasStatus_t create_legacy(cublasHandle_t* h) { return cublasCreate(h); }
cublasStatus_t create_lt(cublasLtHandle_t* h) { return cublasLtCreate(h); }

cublasHandle_t handle_for(int device) { return HandlePool<cublasHandle_t, create_legacy>::handle_for(device); }
cublasLtHandle_t lt_handle_for(int device) { return HandlePool<cublasLtHandle_t, create_lt>::handle_for(device); }

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

// ---------------------------------------------------------------- cuBLASLt ---
//
// Note [Matmul through cuBLASLt]: float32 (with or without TF32), float16 and
// bfloat16 go through cublasLtMatmul with the top algorithm of
// cublasLtMatmulAlgoGetHeuristic, as PyTorch does on Hopper: the legacy
// GemmEx entry picks different (slower) kernels at some sizes. The product is
// the same column-major one as the legacy call (Note [Row-major matmul on
// cuBLAS]): A = b (cm x ck after op), B = a (ck x cn after op), C = D = out
// (cm x cn). Building the descriptors and asking the heuristic costs tens of
// microseconds, so both are cached per problem (shape, ops, lds, batch
// strides, pointer alignments, dtype, TF32, device) in a small LRU. Cached
// entries are immutable after construction and shared (shared_ptr), so an
// eviction while another thread still runs with an entry is safe; the
// descriptors are only read by cublasLtMatmul. When the heuristic offers no
// algorithm the entry records that, and the legacy path runs instead.

struct LtKey {
  int device, dtype, compute;
  int op_a, op_b;
  std::int64_t m, n, k, lda, ldb, ldc, batch, sa, sb, sc;
  std::uint32_t align_a, align_b, align_c;
  bool operator==(const LtKey&) const = default;
};

struct LtKeyHash {
  std::size_t operator()(const LtKey& key) const noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the 64-bit words
    auto mix = [&](std::uint64_t v) {
      h ^= v;
      h *= 1099511628211ull;
    };
    mix(static_cast<std::uint64_t>(key.device) << 32 | static_cast<std::uint32_t>(key.dtype));
    mix(static_cast<std::uint64_t>(key.compute) << 32 | static_cast<std::uint32_t>(key.op_a << 8 | key.op_b));
    for (std::int64_t v : {key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.batch, key.sa, key.sb, key.sc}) {
      mix(static_cast<std::uint64_t>(v));
    }
    mix(static_cast<std::uint64_t>(key.align_a) << 40 | static_cast<std::uint64_t>(key.align_b) << 20 | key.align_c);
    return static_cast<std::size_t>(h);
  }
};

// Owns one Lt descriptor; destroys it on scope exit (also when building an
// entry throws half-way). Destroy errors are ignored: nothing can be done
// about them in a destructor.
template <typename D, cublasStatus_t (*Destroy)(D)>
struct LtOwned {
  D d = nullptr;
  LtOwned() = default;
  LtOwned(const LtOwned&) = delete;
  LtOwned& operator=(const LtOwned&) = delete;
  ~LtOwned() {
    if (d != nullptr) (void)Destroy(d);
  }
};

struct LtPlan {
  LtOwned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
  LtOwned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> layout_a, layout_b, layout_c;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;  // false: the heuristic offered nothing, use the legacy path
};

class LtPlanCache {
 public:
  static LtPlanCache& instance() {
    static LtPlanCache* cache = new LtPlanCache;  // never destroyed, like the handle pools
    return *cache;
  }

  std::shared_ptr<const LtPlan> find(const LtKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);  // most recently used first
    return it->second->second;
  }

  // Inserts (or keeps an entry another thread inserted meanwhile) and returns
  // the cached plan.
  std::shared_ptr<const LtPlan> insert(const LtKey& key, std::shared_ptr<const LtPlan> plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    order_.emplace_front(key, std::move(plan));
    index_.emplace(key, order_.begin());
    if (order_.size() > kCapacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

 private:
  // A model uses a few dozen distinct matmul shapes; 512 plans are ~0.5 MB.
  static constexpr std::size_t kCapacity = 512;
  using Entry = std::pair<LtKey, std::shared_ptr<const LtPlan>>;
  std::mutex mutex_;
  std::list<Entry> order_;
  std::unordered_map<LtKey, std::list<Entry>::iterator, LtKeyHash> index_;
};

// Largest power of two (<= 256, cuBLASLt's default requirement) dividing the
// address of every matrix of the batch: the base and, when batched, the
// batch stride in bytes. The heuristic must know it, since its default
// assumes 256-byte aligned matrices and would pick kernels that fault or
// fail on less aligned ones.
std::uint32_t alignment_of(const void* p, std::int64_t batch_stride_elems, std::size_t elem_size, bool batched) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | 256u;
  if (batched && batch_stride_elems != 0) {
    const std::uint64_t stride_bytes =
        static_cast<std::uint64_t>(batch_stride_elems < 0 ? -batch_stride_elems : batch_stride_elems) * elem_size;
    bits |= stride_bytes;
  }
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // lowest set bit
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  GENESIS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}
template <typename T>
void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v) {
  GENESIS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v)));
}
template <typename T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
  GENESIS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
}

// Stored (pre-op) shape of a column-major operand whose op'd shape is
// rows x cols.
void make_layout(LtOwned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>& out, cudaDataType_t type,
                 cublasOperation_t op, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                 std::int64_t batch_stride) {
  const bool t = op == CUBLAS_OP_T;
  GENESIS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out.d, type, static_cast<std::uint64_t>(t ? cols : rows),
                                                  static_cast<std::uint64_t>(t ? rows : cols), ld));
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);  // checked by to_int
    set_layout(out.d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    // 0 broadcasts one matrix to every batch entry, as in the legacy
    // strided-batched call.
    set_layout(out.d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride);
  }
}

std::shared_ptr<const LtPlan> build_plan(cublasLtHandle_t lt, const LtKey& key, cudaDataType_t type,
                                         cublasComputeType_t compute, std::size_t workspace_bytes) {
  auto plan = std::make_shared<LtPlan>();
  GENESIS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc.d, compute, CUDA_R_32F));
  const auto op_a = static_cast<cublasOperation_t>(key.op_a), op_b = static_cast<cublasOperation_t>(key.op_b);
  const std::int32_t ta = op_a, tb = op_b;
  set_desc(plan->desc.d, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set_desc(plan->desc.d, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  make_layout(plan->layout_a, type, op_a, key.m, key.k, key.lda, key.batch, key.sa);
  make_layout(plan->layout_b, type, op_b, key.k, key.n, key.ldb, key.batch, key.sb);
  make_layout(plan->layout_c, type, CUBLAS_OP_N, key.m, key.n, key.ldc, key.batch, key.sc);

  LtOwned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
  GENESIS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.d));
  const std::uint64_t ws = workspace_bytes;
  set_pref(pref.d, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws);
  set_pref(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
  set_pref(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
  set_pref(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  set_pref(pref.d, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, plan->desc.d, plan->layout_a.d, plan->layout_b.d, plan->layout_c.d,
                                     plan->layout_c.d, pref.d, 1, &result, &returned);
  // NOT_SUPPORTED means "no algorithm for this problem": fall back to the
  // legacy API, which handles every layout the contract allows.
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) GENESIS_CUBLAS_CHECK(st);
  if (st == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
      result.workspaceSize <= workspace_bytes) {
    plan->algo = result.algo;
    plan->has_algo = true;
  }
  return plan;
}

// GENESIS_CUBLASLT=0 in the environment keeps every matmul on the legacy
// API: an A/B switch for benchmarks and an escape hatch should a cuBLASLt
// release misbehave. Read once.
bool lt_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("GENESIS_CUBLASLT");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

// Runs the product through cuBLASLt (Note [Matmul through cuBLASLt]);
// returns false, with nothing queued, when no Lt algorithm fits.
bool matmul_lt(LaunchScope& scope, int device, DType dtype, bool tf32, const Operand& oa_lt, const Operand& ob_lt,
               std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t ldc, std::int64_t batch, std::int64_t sa,
               std::int64_t sb, std::int64_t sc, const void* pa, const void* pb, void* pc) {
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  std::size_t elem = 0;
  switch (dtype) {
    case DType::kFloat32:
      type = CUDA_R_32F;
      elem = 4;
      // TF32 only when asked (PyTorch's allow_tf32 default for matmul is off).
      if (tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case DType::kFloat16: type = CUDA_R_16F; elem = 2; break;
    case DType::kBFloat16: type = CUDA_R_16BF; elem = 2; break;
    default: return false;
  }
  const bool batched = batch > 1;
  LtKey key{};
  key.device = device;
  key.dtype = static_cast<int>(dtype);
  key.compute = static_cast<int>(compute);
  key.op_a = static_cast<int>(oa_lt.op);
  key.op_b = static_cast<int>(ob_lt.op);
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = oa_lt.ld;
  key.ldb = ob_lt.ld;
  key.ldc = ldc;
  key.batch = batch;
  // Batch strides do not matter for a single matrix; zero them so that
  // single products of one shape share a plan.
  key.sa = batched ? sa : 0;
  key.sb = batched ? sb : 0;
  key.sc = batched ? sc : 0;
  key.align_a = alignment_of(pa, sa, elem, batched);
  key.align_b = alignment_of(pb, sb, elem, batched);
  key.align_c = alignment_of(pc, sc, elem, batched);

  cublasLtHandle_t lt = lt_handle_for(device);
  LtPlanCache& cache = LtPlanCache::instance();
  std::shared_ptr<const LtPlan> plan = cache.find(key);
  if (plan == nullptr) plan = cache.insert(key, build_plan(lt, key, type, compute, kWorkspaceBytes));
  if (!plan->has_algo) return false;

  memory::CachingAllocator& alloc = memory::cuda_allocator(device);
  void* workspace = alloc.allocate(kWorkspaceBytes, scope.stream_id());
  struct Release {
    memory::CachingAllocator& alloc;
    void* p;
    ~Release() { alloc.deallocate(p); }
  } release{alloc, workspace};
  const float one = 1.0f, zero = 0.0f;
  GENESIS_CUBLAS_CHECK(cublasLtMatmul(lt, plan->desc.d, &one, pa, plan->layout_a.d, pb, plan->layout_b.d, &zero, pc,
                                      plan->layout_c.d, pc, plan->layout_c.d, &plan->algo, workspace, kWorkspaceBytes,
                                      scope.stream()));
  return true;
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

  // First cuBLAS operand is b (N x K read column-major), second a.
  const Operand ob = layout(b.strides[1], b.strides[2], k, n);
  const Operand oa = layout(a.strides[1], a.strides[2], m, k);
  const int cm = to_int(n, "N"), cn = to_int(m, "M"), ck = to_int(k, "K");
  const int ldb = to_int(ob.ld, "ld(b)"), lda = to_int(oa.ld, "ld(a)"), ldc = cm;
  const int count = to_int(batch, "batch");
  const long long sb = b.strides[0], sa = a.strides[0], sc = out.strides[0];
  const bool batched = count > 1;

  if (out.dtype != DType::kFloat64 && lt_enabled() &&
      matmul_lt(scope, device, out.dtype, params.allow_tf32, ob, oa, cm, cn, ck, ldc, count, sb, sa, sc, b.data, a.data,
                out.data)) {
    return;
  }

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
