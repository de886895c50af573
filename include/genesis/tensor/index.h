// NumPy indexing through an IndexPlan.
//
// Note [Advanced indexing]: an index list is split into basic items (ints,
// slices, Ellipsis, NewAxis) and advanced ones (integer and bool tensors;
// once any tensor is present, plain ints count as advanced too, NumPy's
// rule). The basic items become a view V of the tensor (zero copy). Each bool
// mask of k dims is compacted into k int64 index tensors (nonzero). The
// advanced index tensors broadcast together to a shape B. The result has the
// dims of V that are not indexed, with B inserted
//   * where the first advanced item was, when the advanced items are
//     adjacent in the index list (x[:, [0, 1], [2, 3]] -> (N, 2));
//   * at the front otherwise (x[[0, 1], :, [2, 3]] -> (2, N)).
// A gather reads out[i] = V[..] through a "restrided" V: V's strides on the
// kept dims, 0 on the B dims, plus index_k[i] * V.stride(dim_k); a scatter
// writes through the same addresses (kernels::KernelTable::gather/scatter).
// Every index is checked against its dim's size (-size <= i < size) before
// any kernel touches memory; an out-of-range one raises IndexError "index 7
// is out of bounds for dimension 1 with size 5", the dimension numbered in
// the indexed tensor. Duplicate positions in an assignment: the last write
// (in row-major order of the indexing result) wins on the CPU, whose scatter
// is serial; NumPy leaves it unspecified, and so does Genesis for other
// backends (a CUDA scatter may keep any of the values).
//
// On CUDA the bounds check reduces every index tensor's max and min into one
// small device buffer and reads it on the host in one transfer (one
// synchronisation per index expression), and a boolean mask needs its count
// (one more): the price of raising IndexError before any kernel runs.
// index(x, {mask}) with one bool mask over x's leading dims skips the
// coordinates altogether (Note [Fused mask selection] in src/tensor/index.cpp:
// count, then the masked_select kernel); plan_index still describes it as
// the general mask-compaction plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "genesis/tensor/tensor.h"

namespace genesis {

/// Python's None in a slice bound.
inline constexpr std::nullopt_t None = std::nullopt;

/// start:stop:step with Python semantics (negative bounds count from the
/// end; a negative step walks backwards; step 0 is InvalidArgumentError).
struct Slice {
  std::optional<std::int64_t> start;
  std::optional<std::int64_t> stop;
  std::optional<std::int64_t> step;
  Slice() = default;
  Slice(std::optional<std::int64_t> start_, std::optional<std::int64_t> stop_,
        std::optional<std::int64_t> step_ = std::nullopt)
      : start(start_), stop(stop_), step(step_) {}
};

struct EllipsisIndex {};
struct NewAxisIndex {};
/// `...` and `None` / np.newaxis in an index list.
inline constexpr EllipsisIndex Ellipsis{};
inline constexpr NewAxisIndex NewAxis{};

/// One entry of an index list: int, Slice, Ellipsis, NewAxis, bool (a 0-d
/// mask, NumPy's x[True]) or a Tensor (integer or bool).
class IndexItem {
 public:
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  IndexItem(T i) : v_(static_cast<std::int64_t>(i)) {}  // NOLINT: implicit on purpose
  IndexItem(bool b) : v_(b) {}                            // NOLINT
  IndexItem(Slice s) : v_(s) {}                           // NOLINT
  IndexItem(EllipsisIndex e) : v_(e) {}                   // NOLINT
  IndexItem(NewAxisIndex n) : v_(n) {}                    // NOLINT
  IndexItem(std::nullopt_t) : v_(NewAxisIndex{}) {}       // NOLINT: None
  IndexItem(Tensor t) : v_(std::move(t)) {}               // NOLINT

  bool is_int() const noexcept { return std::holds_alternative<std::int64_t>(v_); }
  bool is_bool() const noexcept { return std::holds_alternative<bool>(v_); }
  bool is_slice() const noexcept { return std::holds_alternative<Slice>(v_); }
  bool is_ellipsis() const noexcept { return std::holds_alternative<EllipsisIndex>(v_); }
  bool is_new_axis() const noexcept { return std::holds_alternative<NewAxisIndex>(v_); }
  bool is_tensor() const noexcept { return std::holds_alternative<Tensor>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  bool as_bool() const { return std::get<bool>(v_); }
  const Slice& as_slice() const { return std::get<Slice>(v_); }
  const Tensor& as_tensor() const { return std::get<Tensor>(v_); }
  /// "3", "1:5:2", "...", "None", "tensor(shape=[2], dtype=int64)".
  std::string str() const;

 private:
  std::variant<std::int64_t, bool, Slice, EllipsisIndex, NewAxisIndex, Tensor> v_;
};

enum class IndexKind : std::uint8_t {
  kView,     // basic indexing only: a zero-copy view
  kGather,   // reads through index tensors into a new tensor
  kScatter,  // assignment through index tensors
  kCopy,     // assignment of a tensor into a view (strided copy, broadcast)
  kFill,     // assignment of a scalar into a view
};

const char* index_kind_name(IndexKind k) noexcept;

/// How an index expression will run. Built by plan_index /
/// plan_index_put, and what index() / index_put() execute: a VIEW is
/// `view` itself, FILL and COPY write into `view`, GATHER and SCATTER run
/// the device's gather/scatter kernel over `view` restrided by
/// (advanced_position, indexed_dims) with `index_tensors`. The index
/// tensors are already checked (IndexError) and on the tensor's device.
struct IndexPlan {
  IndexKind kind = IndexKind::kView;
  /// Shape of x[items] (for assignments: the shape the value broadcasts to).
  Shape result_shape;
  /// VIEW: the view's strides. GATHER: contiguous strides of the result.
  /// SCATTER/COPY/FILL: strides of the written positions as seen by the
  /// kernel (0 on the advanced dims for SCATTER).
  Shape result_strides;
  /// Element offset of the view's first element relative to the indexed
  /// tensor's first element, and the same in bytes.
  std::int64_t ptr_offset = 0;
  std::int64_t ptr_offset_bytes = 0;
  /// The basic-indexing view V (Note [Advanced indexing]).
  Tensor view;
  /// GATHER/SCATTER: int64 index tensors (masks compacted), broadcast to the
  /// common index shape, one per indexed dim of `view`, and those dims.
  std::vector<Tensor> index_tensors;
  std::vector<std::int64_t> indexed_dims;
  /// The same dims numbered as in the indexed tensor x (what errors name).
  std::vector<std::int64_t> reported_dims;
  /// Where the broadcast index dims go in the result.
  std::int64_t advanced_position = 0;
  /// A bool mask was present: the size depends on the data (a nonzero pass,
  /// which synchronises a CUDA stream, was needed).
  bool needs_mask_compaction = false;
  /// GATHER built by index() or SCATTER built by index_put() on a device
  /// whose kernels check the indices themselves: they were not checked here
  /// (always false from plan_index and plan_index_put).
  bool bounds_deferred = false;
  /// Bytes of temporary device memory the plan needs: compacted mask indices
  /// and the broadcast index tensors it created.
  std::size_t temp_memory_bytes = 0;
};

/// The plan of x[items]. Throws IndexError for too many indices or an index
/// out of range (checked here, on every device: index() and index_put()
/// themselves leave the check of CUDA index tensors to the kernels, Note
/// [Asynchronous kernel errors] in genesis/cuda/async_errors.h), InvalidArgumentError for a bad item (step 0, two ellipses,
/// a float tensor, a mask of the wrong shape).
IndexPlan plan_index(const Tensor& x, const std::vector<IndexItem>& items);
/// The plan of x[items] = value (value_is_scalar picks FILL over COPY).
IndexPlan plan_index_put(const Tensor& x, const std::vector<IndexItem>& items, bool value_is_scalar);

/// x[items] (NumPy semantics; a view for basic indexing, a new tensor
/// otherwise). Entry point for the Python bindings.
Tensor index(const Tensor& x, const std::vector<IndexItem>& items);
/// x[items] = value. The value broadcasts to the indexed shape and is cast
/// to x's dtype. A value that shares memory with x is copied first, so
/// x[1:] = x[:-1] behaves as in NumPy.
/// With `accumulate`, x[items] += value instead, where a position named
/// several times receives every value (np.add.at / PyTorch's
/// index_put_(accumulate=True)).
void index_put(Tensor& x, const std::vector<IndexItem>& items, const Tensor& value, bool accumulate = false);
void index_put(Tensor& x, const std::vector<IndexItem>& items, Scalar value, bool accumulate = false);

}  // namespace genesis
