// CPU reductions (sum, prod, mean, max, min, any, all) and arg-reductions.
//
// Kept and reduced dimensions become two loops (Note [CPU strided loop]).
// Many outputs: threads split the outputs. Few outputs over many elements:
// each output's range is cut into fixed blocks of kBlock elements whose
// partial results are merged in block order, so float sums do not depend on
// the number of threads.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "cpu_kernels.h"
#include "cpu_loops.h"

namespace genesis::kernels::cpu {
namespace {

constexpr std::int64_t kBlock = std::int64_t{1} << 16;

template <typename T>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, std::int64_t,
                                     std::conditional_t<kIsHalfLike<T>, float, double>>;

template <typename T>
struct SumOp {
  using Acc = sum_acc_t<T>;
  Acc init() const { return Acc(0); }
  Acc combine(Acc a, T x) const {
    if constexpr (std::is_integral_v<Acc>) return static_cast<Acc>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(static_cast<Acc>(x)));
    else return a + static_cast<Acc>(static_cast<compute_t<T>>(x));
  }
  Acc merge(Acc a, Acc b) const {
    if constexpr (std::is_integral_v<Acc>) return static_cast<Acc>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
    else return a + b;
  }
};

template <typename T>
struct ProdOp {
  using Acc = sum_acc_t<T>;
  Acc init() const { return Acc(1); }
  Acc combine(Acc a, T x) const { return merge(a, static_cast<Acc>(static_cast<compute_t<T>>(x))); }
  Acc merge(Acc a, Acc b) const {
    if constexpr (std::is_integral_v<Acc>) return static_cast<Acc>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
    else return a * b;
  }
};

template <typename T, bool kMax>
struct MinMaxOp {
  using Acc = compute_t<T>;
  Acc init() const {
    if constexpr (std::is_same_v<Acc, bool>) return !kMax;
    else if constexpr (std::is_integral_v<Acc>) return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    else return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
  }
  Acc combine(Acc a, T x) const { return merge(a, static_cast<Acc>(x)); }
  Acc merge(Acc a, Acc b) const {
    if constexpr (!std::is_integral_v<Acc>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    if constexpr (kMax) return b > a ? b : a;
    else return b < a ? b : a;
  }
};

template <typename T, bool kAny>
struct AnyAllOp {
  using Acc = bool;
  Acc init() const { return !kAny; }
  Acc combine(Acc a, T x) const { return merge(a, cast<bool>(x)); }
  Acc merge(Acc a, Acc b) const { return kAny ? (a || b) : (a && b); }
};

// One accumulator per element of a buffer: a plain struct, because
// std::vector<bool> packs bits and threads writing neighbouring partial
// results would race on one word.
template <typename Acc>
struct Slot {
  Acc v;
};

struct Split {
  int kept_ndim = 0, red_ndim = 0;
  std::int64_t kept_sizes[kMaxDims], kept_in[kMaxDims], kept_out[kMaxDims];
  std::int64_t red_sizes[kMaxDims], red_in[kMaxDims];
  std::int64_t num_out = 1, num_red = 1;
};

Split split_dims(const StridedOperand& out, const StridedOperand& in) {
  Split s;
  for (int d = 0; d < in.ndim; ++d) {
    if (in.sizes[d] == 1) continue;
    if (out.sizes[d] == 1) {
      s.red_sizes[s.red_ndim] = in.sizes[d];
      s.red_in[s.red_ndim++] = in.strides[d];
      s.num_red *= in.sizes[d];
    } else {
      s.kept_sizes[s.kept_ndim] = in.sizes[d];
      s.kept_in[s.kept_ndim] = in.strides[d];
      s.kept_out[s.kept_ndim++] = out.strides[d];
      s.num_out *= in.sizes[d];
    }
  }
  return s;
}

// Element offsets (in elements) of the o-th output in input and output.
void output_offsets(const Split& s, std::int64_t o, std::int64_t& in_off, std::int64_t& out_off) {
  in_off = 0;
  out_off = 0;
  for (int d = s.kept_ndim - 1; d >= 0; --d) {
    const std::int64_t i = o % s.kept_sizes[d];
    o /= s.kept_sizes[d];
    in_off += i * s.kept_in[d];
    out_off += i * s.kept_out[d];
  }
}

template <typename T, typename Op>
typename Op::Acc reduce_range(const Op& op, const Loop& red, std::int64_t b, std::int64_t e) {
  typename Op::Acc acc = op.init();
  run_range(red, b, e, [&](char** p, const std::int64_t* st, std::int64_t n) {
    if (st[0] == sizeof(T)) {
      const T* x = reinterpret_cast<const T*>(p[0]);
      for (std::int64_t i = 0; i < n; ++i) acc = op.combine(acc, x[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) acc = op.combine(acc, load<T>(p[0] + i * st[0]));
    }
  });
  return acc;
}

template <typename T, typename O, typename Op, typename Finish>
void reduce_with(const Op& op, const StridedOperand& out, const StridedOperand& in, Finish finish) {
  const Split s = split_dims(out, in);
  const std::size_t isz = sizeof(T);
  auto reduced_loop = [&](char* base) {
    const std::int64_t* strides[] = {s.red_in};
    char* bases[] = {base};
    if (s.red_ndim == 0) {
      const std::int64_t one = 1, zero = 0;
      const std::int64_t* z[] = {&zero};
      return make_loop(1, &one, 1, bases, z, &isz);
    }
    return make_loop(s.red_ndim, s.red_sizes, 1, bases, strides, &isz);
  };
  char* in_base = static_cast<char*>(in.data);
  char* out_base = static_cast<char*>(out.data);
  auto one_output = [&](std::int64_t o, bool parallel_inside) {
    std::int64_t in_off = 0, out_off = 0;
    output_offsets(s, o, in_off, out_off);
    const Loop red = reduced_loop(in_base + in_off * static_cast<std::int64_t>(isz));
    typename Op::Acc acc;
    if (!parallel_inside || s.num_red <= kBlock) {
      acc = reduce_range<T>(op, red, 0, s.num_red);
    } else {
      const std::int64_t blocks = (s.num_red + kBlock - 1) / kBlock;
      std::vector<Slot<typename Op::Acc>> partial(static_cast<std::size_t>(blocks));
      parallel_for(blocks, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t k = b; k < e; ++k) {
          partial[static_cast<std::size_t>(k)].v =
              reduce_range<T>(op, red, k * kBlock, std::min(s.num_red, (k + 1) * kBlock));
        }
      });
      acc = op.init();
      for (const auto& p : partial) acc = op.merge(acc, p.v);
    }
    store<O>(out_base + out_off * static_cast<std::int64_t>(sizeof(O)), finish(acc, s.num_red));
  };
  // Row path: when the innermost kept dim is also the fastest in memory
  // (sum(dim=0) of a row-major matrix), walking one output at a time would
  // stride through memory. Instead a chunk of adjacent outputs accumulates
  // together while the reduced elements are visited once, row by row.
  std::int64_t min_red_stride = std::numeric_limits<std::int64_t>::max();
  for (int d = 0; d < s.red_ndim; ++d) min_red_stride = std::min(min_red_stride, std::abs(s.red_in[d]));
  if (s.kept_ndim >= 1 && s.red_ndim >= 1 && s.kept_sizes[s.kept_ndim - 1] >= 8 &&
      std::abs(s.kept_in[s.kept_ndim - 1]) < min_red_stride) {
    constexpr std::int64_t kChunk = 512;
    const std::int64_t len = s.kept_sizes[s.kept_ndim - 1];
    const std::int64_t in_step = s.kept_in[s.kept_ndim - 1] * static_cast<std::int64_t>(isz);
    const std::int64_t out_step = s.kept_out[s.kept_ndim - 1] * static_cast<std::int64_t>(sizeof(O));
    const std::int64_t chunks_per_row = (len + kChunk - 1) / kChunk;
    const std::int64_t tasks = (s.num_out / len) * chunks_per_row;
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, s.num_red * kChunk));
    parallel_for(tasks, grain, [&](std::int64_t b, std::int64_t e) {
      std::vector<Slot<typename Op::Acc>> acc(static_cast<std::size_t>(kChunk));
      for (std::int64_t task = b; task < e; ++task) {
        const std::int64_t row = task / chunks_per_row;
        const std::int64_t j0 = (task % chunks_per_row) * kChunk, j1 = std::min(len, j0 + kChunk);
        std::int64_t in_off = 0, out_off = 0;
        output_offsets(s, row * len, in_off, out_off);
        for (auto& a : acc) a.v = op.init();
        const Loop red = reduced_loop(in_base + in_off * static_cast<std::int64_t>(isz) + j0 * in_step);
        const std::int64_t n_j = j1 - j0;
        run_range(red, 0, s.num_red, [&](char** p, const std::int64_t* st, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i) {
            const char* at = p[0] + i * st[0];
            if (in_step == static_cast<std::int64_t>(sizeof(T))) {
              const T* x = reinterpret_cast<const T*>(at);
              for (std::int64_t j = 0; j < n_j; ++j) acc[static_cast<std::size_t>(j)].v = op.combine(acc[static_cast<std::size_t>(j)].v, x[j]);
            } else {
              for (std::int64_t j = 0; j < n_j; ++j) {
                acc[static_cast<std::size_t>(j)].v = op.combine(acc[static_cast<std::size_t>(j)].v, load<T>(at + j * in_step));
              }
            }
          }
        });
        char* o = out_base + out_off * static_cast<std::int64_t>(sizeof(O)) + j0 * out_step;
        for (std::int64_t j = 0; j < n_j; ++j) store<O>(o + j * out_step, finish(acc[static_cast<std::size_t>(j)].v, s.num_red));
      }
    });
    return;
  }
  if (s.num_out >= num_threads() && s.num_out * s.num_red >= kParallelGrain) {
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, s.num_red));
    parallel_for(s.num_out, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) one_output(o, false);
    });
  } else {
    for (std::int64_t o = 0; o < s.num_out; ++o) one_output(o, true);
  }
}

template <typename T>
void reduce_typed(ReduceOp op, const StridedOperand& out, const StridedOperand& in) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProd: {
      auto run_op = [&](auto reducer) {
        using Acc = typename decltype(reducer)::Acc;
        if (out.dtype == DType::kInt64 && in.dtype != DType::kInt64) {
          reduce_with<T, std::int64_t>(reducer, out, in, [](Acc a, std::int64_t) { return cast<std::int64_t>(a); });
        } else {
          reduce_with<T, T>(reducer, out, in, [](Acc a, std::int64_t) { return cast<T>(a); });
        }
      };
      if (op == ReduceOp::kSum) run_op(SumOp<T>{});
      else run_op(ProdOp<T>{});
      return;
    }
    case ReduceOp::kMean:
      if constexpr (!std::is_integral_v<T>) {
        using Acc = typename SumOp<T>::Acc;
        reduce_with<T, T>(SumOp<T>{}, out, in, [](Acc a, std::int64_t n) {
          return cast<T>(n == 0 ? std::numeric_limits<Acc>::quiet_NaN() : a / static_cast<Acc>(n));
        });
      }
      return;
    case ReduceOp::kMax:
      reduce_with<T, T>(MinMaxOp<T, true>{}, out, in, [](compute_t<T> a, std::int64_t) { return cast<T>(a); });
      return;
    case ReduceOp::kMin:
      reduce_with<T, T>(MinMaxOp<T, false>{}, out, in, [](compute_t<T> a, std::int64_t) { return cast<T>(a); });
      return;
    case ReduceOp::kAny:
      reduce_with<T, bool>(AnyAllOp<T, true>{}, out, in, [](bool a, std::int64_t) { return a; });
      return;
    case ReduceOp::kAll:
      reduce_with<T, bool>(AnyAllOp<T, false>{}, out, in, [](bool a, std::int64_t) { return a; });
      return;
  }
}

}  // namespace

void reduce(const KernelContext&, ReduceOp op, const StridedOperand& out, const StridedOperand& in) {
  dispatch(in.dtype, [&](auto tag) { reduce_typed<typename decltype(tag)::type>(op, out, in); });
}

void arg_reduce(const KernelContext&, ArgReduceOp op, const StridedOperand& values, const StridedOperand& indices,
                const StridedOperand& in, int dim) {
  // Outputs: every dim but `dim`, walked through a loop over in's other dims.
  StridedOperand outer = in;
  outer.sizes[dim] = 1;
  const std::int64_t len = in.sizes[dim];
  const std::int64_t in_step = in.strides[dim];
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const bool want_max = op == ArgReduceOp::kMax;
    const bool with_values = values.data != nullptr;
    const StridedOperand* ops[] = {&outer, &indices, with_values ? &values : &indices};
    char* base[] = {static_cast<char*>(in.data), static_cast<char*>(indices.data),
                    with_values ? static_cast<char*>(values.data) : static_cast<char*>(indices.data)};
    const Loop loop = make_loop(ops, 3, base);
    run(loop, [&](char** p, const std::int64_t* s, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        const char* row = p[0] + i * s[0];
        C best = static_cast<C>(load<T>(row));
        std::int64_t best_i = 0;
        bool best_nan = false;
        if constexpr (!std::is_integral_v<C>) best_nan = best != best;
        for (std::int64_t k = 1; k < len && !best_nan; ++k) {
          const C x = static_cast<C>(load<T>(row + k * in_step * static_cast<std::int64_t>(sizeof(T))));
          if constexpr (!std::is_integral_v<C>) {
            if (x != x) {
              best = x;
              best_i = k;
              best_nan = true;
              break;
            }
          }
          if (want_max ? x > best : x < best) {
            best = x;
            best_i = k;
          }
        }
        store<std::int64_t>(p[1] + i * s[1], best_i);
        if (with_values) store<T>(p[2] + i * s[2], cast<T>(best));
      }
    }, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, len)));
  });
}

}  // namespace genesis::kernels::cpu
