// CPU matmul: cblas sgemm/dgemm (OpenBLAS) for float32/float64, the 16-bit
// floats through float32 copies, integers with a plain loop.
//
// ThreadSanitizer cannot see OpenBLAS's own (uninstrumented) thread pool
// synchronise, and reports the product's writes as races: run TSan builds
// with OPENBLAS_NUM_THREADS=1.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "genesis/core/threads.h"

#include "cpu_kernels.h"
#include "cpu_loops.h"

#if GENESIS_WITH_BLAS
#include <cblas.h>
// Weak: only OpenBLAS has it; with another CBLAS the address is null.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
#endif

namespace genesis::kernels::cpu {
namespace {

// One matrix of a batch: element (i, j) at data[i * rs + j * cs].
template <typename T>
struct Mat {
  const T* data;
  std::int64_t rs, cs;
};

// The plain product (integers, and floats without BLAS): rows of the output
// in parallel, each accumulated in a row buffer (i-k-j order, so b is read
// along its rows).
template <typename T, typename Acc>
void matmul_loop(T* out, Mat<T> a, Mat<T> b, std::int64_t m, std::int64_t n, std::int64_t k) {
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, n * k));
  parallel_for(m, grain, [&](std::int64_t i0, std::int64_t i1) {
    std::vector<Acc> row(static_cast<std::size_t>(n));
    for (std::int64_t i = i0; i < i1; ++i) {
      std::fill(row.begin(), row.end(), Acc(0));
      for (std::int64_t p = 0; p < k; ++p) {
        const Acc av = static_cast<Acc>(static_cast<compute_t<T>>(a.data[i * a.rs + p * a.cs]));
        const T* brow = b.data + p * b.rs;
        for (std::int64_t j = 0; j < n; ++j) {
          if constexpr (std::is_integral_v<Acc>) {
            using U = std::make_unsigned_t<Acc>;
            row[j] = static_cast<Acc>(static_cast<U>(row[j]) +
                                      static_cast<U>(av) * static_cast<U>(static_cast<Acc>(brow[j * b.cs])));
          } else {
            row[j] += av * static_cast<Acc>(static_cast<compute_t<T>>(brow[j * b.cs]));
          }
        }
      }
      for (std::int64_t j = 0; j < n; ++j) out[i * n + j] = cast<T>(row[j]);
    }
  });
}

#if GENESIS_WITH_BLAS
// OpenBLAS runs its own threads, by default one per CPU of the machine
// (quotas ignored); they follow get_num_threads() like ours (Note [Thread
// count] in genesis/core/threads.h), unless OPENBLAS_NUM_THREADS says
// otherwise (TSan runs set it to 1). Applied only when the count changes:
// OpenBLAS resizes its pool then.
void sync_blas_threads() {
  static const bool user_set = std::getenv("OPENBLAS_NUM_THREADS") != nullptr;
  if (user_set || openblas_set_num_threads == nullptr) return;
  static std::atomic<int> applied{0};
  const int n = get_num_threads();
  if (applied.exchange(n, std::memory_order_relaxed) != n) openblas_set_num_threads(n);
}

// cblas row-major gemm: a matrix with unit column stride is "no transpose"
// with lda = row stride; one with unit row stride is "transpose" with lda =
// column stride. Size-1 dims may carry any stride, so lda is clamped to the
// minimum BLAS accepts.
template <typename T>
void gemm(T* out, Mat<T> a, Mat<T> b, std::int64_t m, std::int64_t n, std::int64_t k) {
  auto layout = [](const Mat<T>& x, std::int64_t rows, std::int64_t cols, CBLAS_TRANSPOSE& t, std::int64_t& ld) {
    const std::int64_t min_cols = std::max<std::int64_t>(1, cols), min_rows = std::max<std::int64_t>(1, rows);
    if ((x.cs == 1 || cols <= 1) && (rows <= 1 || x.rs >= min_cols)) {
      t = CblasNoTrans;
      ld = rows <= 1 ? min_cols : x.rs;
    } else {
      t = CblasTrans;
      ld = cols <= 1 ? min_rows : x.cs;
    }
  };
  CBLAS_TRANSPOSE ta, tb;
  std::int64_t lda, ldb;
  layout(a, m, k, ta, lda);
  layout(b, k, n, tb, ldb);
  sync_blas_threads();
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a.data,
                static_cast<int>(lda), b.data, static_cast<int>(ldb), 0.0f, out, static_cast<int>(std::max<std::int64_t>(1, n)));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a.data,
                static_cast<int>(lda), b.data, static_cast<int>(ldb), 0.0, out, static_cast<int>(std::max<std::int64_t>(1, n)));
  }
}
#endif

// Packs a strided matrix into a row-major float buffer.
template <typename T>
void to_float(std::vector<float>& dst, Mat<T> x, std::int64_t rows, std::int64_t cols) {
  dst.resize(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[i * cols + j] = static_cast<float>(x.data[i * x.rs + j * x.cs]);
}

}  // namespace

void matmul(const KernelContext&, const StridedOperand& out, const StridedOperand& a, const StridedOperand& b,
            const MatmulParams&) {
  const std::int64_t batch = out.sizes[0], m = out.sizes[1], n = out.sizes[2], k = a.sizes[2];
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return;  // rejected by the tensor layer
    } else {
      auto one = [&](std::int64_t bi) {
        T* o = static_cast<T*>(out.data) + bi * out.strides[0];
        const Mat<T> am{static_cast<const T*>(a.data) + bi * a.strides[0], a.strides[1], a.strides[2]};
        const Mat<T> bm{static_cast<const T*>(b.data) + bi * b.strides[0], b.strides[1], b.strides[2]};
        if (m == 0 || n == 0) return;
        if (k == 0) {
          for (std::int64_t i = 0; i < m * n; ++i) o[i] = cast<T>(0);
          return;
        }
#if GENESIS_WITH_BLAS
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          gemm<T>(o, am, bm, m, n, k);
          return;
        } else if constexpr (kIsHalfLike<T>) {
          std::vector<float> fa, fb, fo(static_cast<std::size_t>(m * n));
          to_float(fa, am, m, k);
          to_float(fb, bm, k, n);
          gemm<float>(fo.data(), Mat<float>{fa.data(), k, 1}, Mat<float>{fb.data(), n, 1}, m, n, k);
          for (std::int64_t i = 0; i < m * n; ++i) o[i] = T(fo[static_cast<std::size_t>(i)]);
          return;
        }
#endif
        if constexpr (std::is_integral_v<T>) matmul_loop<T, std::int64_t>(o, am, bm, m, n, k);
        else matmul_loop<T, double>(o, am, bm, m, n, k);
      };
      // BLAS threads inside each product; a plain loop over the batch.
      for (std::int64_t bi = 0; bi < batch; ++bi) one(bi);
    }
  });
}

}  // namespace genesis::kernels::cpu
