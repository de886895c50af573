// cuBLAS and cuBLASLt, loaded the first time a CUDA matmul needs them.
//
// Note [CUDA loaded on first use]: nothing Genesis builds needs a CUDA
// library to load, so that a CUDA build (a wheel, an installed genesis-mem,
// the Python module) starts and runs its CPU work on a machine without a GPU
// or CUDA toolkit. The CUDA runtime is linked statically (cudart_static, which
// itself opens the driver, libcuda, only when a CUDA call is made); NVML is
// opened with dlopen (src/debug/nvml_loader.cpp); and cuBLAS/cuBLASLt, the
// only shared CUDA libraries the kernels call, are not linked at all: this
// file defines the cuBLAS entry points cuda_matmul.cu calls, and each opens
// the library on its first call and forwards to the real function.
// (GENESIS_LINK_CUDA_DRIVER=ON links libcuda and gives this up.)
//
// The definitions are hidden: they resolve Genesis's own calls only, and a
// program that also links cuBLAS itself (PyTorch) keeps calling the real
// library directly. Their signatures are the headers' (an extern "C"
// definition that differs from its declaration does not compile), so the
// forwarders cannot drift from the API; a cuBLAS function that cuda_matmul.cu
// starts to use without a forwarder here fails the link, which names it.
//
// The library is looked up as the dynamic loader would (LD_LIBRARY_PATH,
// ld.so.cache, ...) and then in the toolkit directory Genesis was built
// against (GENESIS_CUDA_LIBRARY_DIR), so a build works where it was made
// without an RPATH. Missing, the first CUDA matmul throws CudaError naming
// the library and what to install.
#if GENESIS_WITH_CUDA

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "genesis/core/error.h"

#define GENESIS_CUBLAS_STR2(x) #x
#define GENESIS_CUBLAS_STR(x) GENESIS_CUBLAS_STR2(x)

namespace genesis::kernels::cuda_impl {
namespace {

constexpr const char* kMajor = GENESIS_CUBLAS_STR(CUBLAS_VER_MAJOR);

struct Library {
  std::string soname;
  void* handle = nullptr;
  std::string why;  // dlerror() of the attempts, when handle is null

  explicit Library(std::string name) : soname(std::move(name)) {
    handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) return;
    const char* e = dlerror();
    why = e != nullptr ? e : "cannot be loaded";
#ifdef GENESIS_CUDA_LIBRARY_DIR
    const std::string path = std::string(GENESIS_CUDA_LIBRARY_DIR) + "/" + soname;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      e = dlerror();
      why += std::string("; ") + (e != nullptr ? e : path + " cannot be loaded");
    }
#endif
  }
};

// Loaded once, kept for the process's lifetime.
const Library& cublas() {
  static const Library lib(std::string("libcublas.so.") + kMajor);
  return lib;
}
const Library& cublas_lt() {
  static const Library lib(std::string("libcublasLt.so.") + kMajor);
  return lib;
}

template <typename Fn>
Fn resolve(const Library& lib, const char* name) {
  if (lib.handle == nullptr) {
    throw CudaError(detail::str_cat("CUDA matmul needs cuBLAS, but ", lib.soname, " could not be loaded (", lib.why,
                                    "): install the cuBLAS runtime of CUDA ", kMajor,
                                    " (the toolkit, or its libcublas package) or add its directory to LD_LIBRARY_PATH"),
                    0, __FILE__, __LINE__);
  }
  void* sym = dlsym(lib.handle, name);
  if (sym == nullptr) {
    throw CudaError(detail::str_cat(lib.soname, " has no ", name, " (a cuBLAS older than the CUDA ", kMajor,
                                    " headers Genesis was built with?)"),
                    0, __FILE__, __LINE__);
  }
  return reinterpret_cast<Fn>(sym);
}

}  // namespace
}  // namespace genesis::kernels::cuda_impl

// One forwarder: the symbol `name` of `lib`, looked up on the first call.
#define GENESIS_CUBLAS_FORWARD(lib, ret, name, params, args)                                                 \
  extern "C" __attribute__((visibility("hidden"))) ret name params {                                         \
    using Fn = ret(*) params; /* not decltype(&::name): some names have C++ overloads too */              \
    static const Fn fn = ::genesis::kernels::cuda_impl::resolve<Fn>(::genesis::kernels::cuda_impl::lib(), #name); \
    return fn args;                                                                                          \
  }

// ------------------------------------------------------------------ cuBLAS ---
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream),
                       (handle, stream))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasSetWorkspace_v2,
                       (cublasHandle_t handle, void* workspace, size_t bytes), (handle, workspace, bytes))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode),
                       (handle, mode))
GENESIS_CUBLAS_FORWARD(cublas, const char*, cublasGetStatusName, (cublasStatus_t status), (status))
GENESIS_CUBLAS_FORWARD(cublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasSgemm_v2,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                        float* c, int ldc),
                       (handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasDgemm_v2,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const double* alpha, const double* a, int lda, const double* b, int ldb, const double* beta,
                        double* c, int ldc),
                       (handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasSgemmStridedBatched,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const float* alpha, const float* a, int lda, long long int sa, const float* b, int ldb,
                        long long int sb, const float* beta, float* c, int ldc, long long int sc, int batch),
                       (handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasDgemmStridedBatched,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const double* alpha, const double* a, int lda, long long int sa, const double* b, int ldb,
                        long long int sb, const double* beta, double* c, int ldc, long long int sc, int batch),
                       (handle, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasGemmEx,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const void* alpha, const void* a, cudaDataType at, int lda, const void* b, cudaDataType bt,
                        int ldb, const void* beta, void* c, cudaDataType ct, int ldc, cublasComputeType_t compute,
                        cublasGemmAlgo_t algo),
                       (handle, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo))
GENESIS_CUBLAS_FORWARD(cublas, cublasStatus_t, cublasGemmStridedBatchedEx,
                       (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                        const void* alpha, const void* a, cudaDataType at, int lda, long long int sa, const void* b,
                        cudaDataType bt, int ldb, long long int sb, const void* beta, void* c, cudaDataType ct,
                        int ldc, long long int sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo),
                       (handle, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c, ct, ldc, sc, batch,
                        compute, algo))

// ---------------------------------------------------------------- cuBLASLt ---
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulDescCreate,
                       (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                       (desc, compute, scale))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
                       (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size),
                       (desc, attr, buf, size))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatrixLayoutCreate,
                       (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                       (layout, type, rows, cols, ld))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout),
                       (layout))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
                       (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                        size_t size),
                       (layout, attr, buf, size))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref),
                       (pref))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref),
                       (pref))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                       (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                        size_t size),
                       (pref, attr, buf, size))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                        cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                        int* returned),
                       (handle, desc, a, b, c, d, pref, requested, results, returned))
GENESIS_CUBLAS_FORWARD(cublas_lt, cublasStatus_t, cublasLtMatmul,
                       (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                        cublasLtMatrixLayout_t ad, const void* b, cublasLtMatrixLayout_t bd, const void* beta,
                        const void* c, cublasLtMatrixLayout_t cd, void* d, cublasLtMatrixLayout_t dd,
                        const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream),
                       (handle, desc, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, workspace, workspace_bytes,
                        stream))

#endif  // GENESIS_WITH_CUDA
