// The kernel interface every device implements (CPU, CUDA).
//
// Note [Kernel tables]: a backend is a table of plain function pointers, one
// table per device type (ggml's design). Tensor code never branches on CPU vs
// CUDA: it picks the table of the tensor's device type (kernels_for) and
// calls an entry. A missing entry (nullptr) makes the tensor layer raise
// InvalidArgumentError "<op> is not available on cuda yet". Tables are filled
// once, on first use, by install_cpu_kernels / install_cuda_kernels
// (src/tensor/cpu/cpu_backend.cpp, src/tensor/cuda/cuda_backend.cpp):
// registering a CUDA kernel is one line there, `table.binary = &cuda_binary;`.
// (Explicit installers, not static registrar objects: the library is static
// and the linker drops object files nobody references.)
//
// Note [Kernel contracts]: the tensor layer does all checking, type promotion
// and broadcasting before it calls a kernel, so kernels never validate:
//   * every operand lives on ctx.device; the work is queued on ctx.stream
//     (CUDA: no synchronisation inside a kernel entry; CPU: runs at once);
//   * operands of one call have the same ndim and sizes unless the entry says
//     otherwise; a broadcast input has stride 0 in the broadcast dimensions;
//   * strides count elements (not bytes) and may be 0 or negative; an
//     operand's data points at its element [0, ..., 0];
//   * output operands never overlap their inputs unless they are the very
//     same elements (same data, sizes and strides: an in-place op); partial
//     overlap is removed beforehand by cloning the input;
//   * numel may be 0 (the tensor layer usually skips such calls, a kernel must
//     still handle it as a no-op);
//   * float16 and bfloat16 are computed in float32 and rounded once per
//     element on store (what PyTorch does).
// Dtypes named in an entry's contract are the only ones it receives.
#pragma once

#include <cstdint>
#include <type_traits>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/memory/upstream.h"  // StreamId
#include "genesis/tensor/scalar.h"

namespace genesis::kernels {

/// Most dimensions a tensor may have (NumPy allows 64; 16 keeps an operand
/// small enough to pass to a CUDA kernel by value).
inline constexpr int kMaxDims = 16;

/// One strided array argument of a kernel. Trivially copyable: a CUDA entry
/// may pass it to a __global__ function by value.
struct StridedOperand {
  void* data = nullptr;  // element [0, ..., 0]; may be null when numel() == 0
  DType dtype = DType::kFloat32;
  int ndim = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};  // in elements; 0 = broadcast
  // An input may be a broadcast constant instead of memory: then every
  // element equals `scalar` converted to this operand's dtype
  // (kernels::scalar_to in core/cast.h), the strides are all 0 and `data`
  // is null. Only inputs of binary, where and scatter's values use it.
  bool is_scalar = false;
  Scalar scalar{};

  GENESIS_HOST_DEVICE constexpr std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

static_assert(std::is_trivially_copyable_v<StridedOperand>);

/// Where and how a kernel runs.
struct KernelContext {
  Device device;
  memory::StreamId stream = ~memory::StreamId{0};  // kCurrentStream
};

/// Element-wise functions of one argument. Contract: out.dtype == in.dtype,
/// except kLogicalNot whose out is bool. kNeg, kAbs, kRelu: every dtype but
/// bool (relu(x) = max(x, 0), NaN stays NaN). kExp, kLog, kSqrt,
/// kSigmoid, kTanh, kSin, kCos: floating dtypes only. kLogicalNot: any dtype.
/// kBitwiseNot: integer dtypes (~x) and bool (logical not) only.
enum class UnaryOp : std::uint8_t {
  kNeg, kAbs, kRelu, kExp, kLog, kSqrt, kSigmoid, kTanh, kSin, kCos, kLogicalNot, kBitwiseNot,
};

/// Element-wise functions of two arguments. Contract: a.dtype == b.dtype ==
/// the compute dtype. Arithmetic (kAdd .. kRightShift) writes out.dtype ==
/// compute dtype; comparisons (kEq .. kGe) and kLogicalAnd/Or write bool.
/// kDiv: floating only (true division). kFloorDiv, kRemainder: Python
/// semantics (floor; the remainder has the divisor's sign). kTruncDiv: the
/// quotient rounded toward zero (C's integer /; trunc(a / b) for floats).
/// kFmod: C's fmod (the remainder has the dividend's sign; integer %).
/// Integer kFloorDiv/kRemainder/kTruncDiv/kFmod never see a zero divisor on
/// the CPU: the tensor layer raises DivisionByZeroError first (Note
/// [Integer division by zero] in elementwise.cpp); a kernel writes 0 for
/// one, and integer MIN / -1 wraps to MIN. kPow: integer pow with negative
/// exponent gives 1/x truncated (0 unless |x| == 1). kMaximum/kMinimum
/// propagate NaN. kAdd/kSub/kMul on bool: logical or / xor / and
/// (PyTorch's results). kBitwiseAnd/Or/Xor: integer and bool dtypes only
/// (bool: logical). kLeftShift/kRightShift: integer dtypes only, NumPy's
/// results: a count below 0 or at least the bit width shifts everything
/// out (0; -1 for a negative value shifted right); the right shift of a
/// signed value is arithmetic; left shifts wrap.
enum class BinaryOp : std::uint8_t {
  kAdd, kSub, kMul, kDiv, kFloorDiv, kRemainder, kPow, kMaximum, kMinimum,
  kTruncDiv, kFmod, kBitwiseAnd, kBitwiseOr, kBitwiseXor, kLeftShift, kRightShift,
  kEq, kNe, kLt, kLe, kGt, kGe, kLogicalAnd, kLogicalOr,
};

constexpr bool is_comparison(BinaryOp op) noexcept { return op >= BinaryOp::kEq; }

/// Reductions over some dimensions. Contract: `out` has in.ndim dimensions,
/// out.sizes[d] == 1 where d is reduced and == in.sizes[d] otherwise (the
/// keepdim layout; the tensor layer squeezes afterwards). A dimension of size
/// 1 may be "reduced" or not, the result is the same.
///   kSum, kProd: out.dtype == in.dtype, or int64 when in is bool/integer
///                (accumulate in int64; in float for float16/bfloat16; in
///                double for float32/float64 on the CPU). Empty: 0 / 1.
///   kMean:       floating in, out.dtype == in.dtype. Empty: NaN.
///   kMax, kMin:  out.dtype == in.dtype, every dtype; NaN propagates;
///                never called on an empty reduction (the tensor layer errs).
///   kAny, kAll:  out bool, any in dtype.
enum class ReduceOp : std::uint8_t { kSum, kProd, kMean, kMax, kMin, kAny, kAll };

/// Arg-reductions along one dimension: the first index of the max/min (a NaN
/// counts as the max and the min, and the first NaN wins, like PyTorch).
enum class ArgReduceOp : std::uint8_t { kMax, kMin };

/// Random fills (Note [Random numbers] in tensor/philox.h).
enum class RandomKind : std::uint8_t {
  kUniform,  // low + (high - low) * u, u uniform in [0, 1); floating out
  kNormal,   // mean + std * z (low = mean, high = std); floating out
  kInteger,  // uniform integer in [int_low, int_high); any non-bool out
};

struct RandomParams {
  RandomKind kind = RandomKind::kUniform;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;  // counter of element 0
  double low = 0.0, high = 1.0;
  std::int64_t int_low = 0, int_high = 1;
};

/// The advanced-indexing half of a gather or scatter (Note [Advanced indexing]
/// in tensor/index.h). Host memory; a CUDA entry copies what it needs into
/// kernel arguments.
struct IndexArgs {
  int num_indices = 0;
  const StridedOperand* indices = nullptr;  // int64, sizes == the iteration sizes
  const std::int64_t* indexed_sizes = nullptr;    // size of the indexed dim, per index
  const std::int64_t* indexed_strides = nullptr;  // its stride in the source/destination
  const std::int64_t* report_dims = nullptr;      // per index: the dim to name in errors (null: k)
  /// False: every index is known to lie in [-size, size). True (only for a
  /// table with gather_checks_bounds): not validated; the kernel must not
  /// use an index out of range and reports it (Note [Asynchronous kernel
  /// errors] in genesis/cuda/async_errors.h).
  bool unchecked = false;
};

struct MatmulParams {
  bool allow_tf32 = false;  // float32 on CUDA may use TF32 tensor cores
};

/// The table of kernel entries of one device type. Every entry may be null
/// (not implemented on that device yet).
struct KernelTable {
  /// out[i] = value converted to out.dtype (Note [Cast semantics] in
  /// storage/convert.h). Any dtype.
  void (*fill)(const KernelContext& ctx, const StridedOperand& out, Scalar value) = nullptr;

  /// dst[i] = cast(src[i]): a strided copy with dtype conversion (Note [Cast
  /// semantics]); src may broadcast (stride 0). Any pair of dtypes.
  void (*copy)(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& src) = nullptr;

  /// out (contiguous, 1-d) [i] = start + i * step. Integer out: computed in
  /// int64; floating out: in double, then rounded. Non-bool dtypes.
  void (*iota)(const KernelContext& ctx, const StridedOperand& out, Scalar start, Scalar step) = nullptr;

  /// out (contiguous) [i] = random_element<T>(params, i) (tensor/
  /// random_element.h, Note [Random numbers]); the tensor layer advances the
  /// generator. Floating out for kUniform/kNormal, non-bool for kInteger.
  void (*random)(const KernelContext& ctx, const StridedOperand& out, const RandomParams& params) = nullptr;

  /// out[i] = op(in[i]) (UnaryOp contract).
  void (*unary)(const KernelContext& ctx, UnaryOp op, const StridedOperand& out,
                const StridedOperand& in) = nullptr;

  /// out[i] = op(a[i], b[i]) (BinaryOp contract). a or b may be is_scalar.
  void (*binary)(const KernelContext& ctx, BinaryOp op, const StridedOperand& out,
                 const StridedOperand& a, const StridedOperand& b) = nullptr;

  /// out[i] = cond[i] ? a[i] : b[i]. cond bool; a, b, out of one dtype; a or
  /// b may be is_scalar.
  void (*where)(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& cond,
                const StridedOperand& a, const StridedOperand& b) = nullptr;

  /// ReduceOp contract (out in keepdim layout).
  void (*reduce)(const KernelContext& ctx, ReduceOp op, const StridedOperand& out,
                 const StridedOperand& in) = nullptr;

  /// Along `dim` of `in`: indices (int64) and, when values.data is not null,
  /// the values (in.dtype), both in keepdim layout (sizes 1 at `dim`).
  /// in.sizes[dim] > 0.
  void (*arg_reduce)(const KernelContext& ctx, ArgReduceOp op, const StridedOperand& values,
                     const StridedOperand& indices, const StridedOperand& in, int dim) = nullptr;

  /// out[i] = src_elem(i) with src_elem(i) = src.data + sum_d i_d * src.strides[d]
  ///                                   + sum_k idx_k[i] * indexed_strides[k],
  /// where idx_k[i] < 0 is first wrapped by + indexed_sizes[k]. The tensor
  /// layer has checked -size <= idx < size for every index (so the kernel
  /// may not), unless index.unchecked (gather_checks_bounds below). src and
  /// out have the same dtype and sizes (src has stride 0 in the dims the
  /// indices produce).
  /// True when gather accepts index.unchecked: it then checks every index
  /// itself, never reads through one out of range and reports it
  /// asynchronously (CUDA: Note [Asynchronous kernel errors]).
  bool gather_checks_bounds = false;
  void (*gather)(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src,
                 const IndexArgs& index) = nullptr;

  /// The mirror of gather: dst_elem(i) = values[i] (accumulate: +=). values
  /// has dst's dtype and may broadcast or be is_scalar. Where several i hit
  /// one element, which write wins is unspecified (the CPU backend runs
  /// serially in row-major order of i, so the last wins there; NumPy also
  /// leaves it unspecified); accumulate must add every value.
  /// True when scatter accepts index.unchecked: it then checks every index
  /// first and writes nothing at all if any is out of range (reported
  /// asynchronously, like gather_checks_bounds).
  bool scatter_checks_bounds = false;
  void (*scatter)(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& values,
                  const IndexArgs& index, bool accumulate) = nullptr;

  /// Mask compaction: out (contiguous int64 [count, mask.ndim], count = the
  /// number of true elements, computed before with kSum) receives the
  /// coordinates of every true element of `mask` (bool) in row-major order.
  void (*nonzero)(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& mask) = nullptr;

  /// Fused mask selection (x[mask] without materialised coordinates):
  /// out row r = src row i_r, where i_0 < i_1 < ... are the indices of the
  /// true elements of `mask` in order. Contract:
  ///   * mask: bool, contiguous, 1-d of n elements (the tensor layer
  ///     flattens the mask's dims);
  ///   * src: contiguous 2-d [n, row] (row = product of the dims the mask
  ///     does not cover; 1 for a mask of src's full shape), any dtype;
  ///   * out: contiguous 2-d [count, row] of src's dtype, count = the number
  ///     of true elements (computed beforehand with kSum: the output size
  ///     depends on the data); count > 0, row > 0 and n > 0 when called.
  /// Only bytes move (no dtype conversion).
  void (*masked_select)(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src,
                        const StridedOperand& mask) = nullptr;

  /// Batched matrix product out[b] = a[b] @ b[b] for 3-d operands
  /// a [B, M, K], b [B, K, N], out [B, M, N] of one dtype (float16, bfloat16,
  /// float32, float64 and, on the CPU, the integer dtypes). Each matrix of a
  /// and b has a unit stride in one of its two dims (BLAS layouts; batch
  /// strides are arbitrary, 0 for broadcast); out's matrices are row-major
  /// with strides [N, 1] (batch stride arbitrary). K may be 0 (out = 0).
  void (*matmul)(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& a,
                 const StridedOperand& b, const MatmulParams& params) = nullptr;
};

/// The table for a device type (Note [Kernel tables]). Thread-safe; built on
/// first use.
const KernelTable& kernels_for(DeviceType type);

/// Installers, called once each while the tables are built. The CPU one is
/// complete; the CUDA one registers whatever CUDA kernels exist (none yet).
void install_cpu_kernels(KernelTable& table);
void install_cuda_kernels(KernelTable& table);

/// Name of a kernel-table entry for messages ("binary", "matmul", ...).
const char* op_name(UnaryOp op) noexcept;
const char* op_name(BinaryOp op) noexcept;
const char* op_name(ReduceOp op) noexcept;

}  // namespace genesis::kernels
