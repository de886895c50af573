// CPU kernels that produce values without arithmetic inputs: fill, copy
// (strided, with dtype cast), iota and random (Note [Random numbers]).
#include <cmath>
#include <cstring>

#include "cpu_kernels.h"
#include "cpu_loops.h"
#include "genesis/storage/convert.h"
#include "genesis/tensor/philox.h"

namespace genesis::kernels::cpu {

void fill(const KernelContext&, const StridedOperand& out, Scalar value) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(value);
    const StridedOperand* ops[] = {&out};
    char* base[] = {static_cast<char*>(out.data)};
    run(make_loop(ops, 1, base), [&](char** p, const std::int64_t* s, std::int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(p[0]);
        for (std::int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (std::int64_t i = 0; i < n; ++i) store<T>(p[0] + i * s[0], v);
      }
    });
  });
}

namespace {
bool is_contiguous(const StridedOperand& op) {
  std::int64_t expected = 1;
  for (int d = op.ndim - 1; d >= 0; --d) {
    if (op.sizes[d] != 1 && op.strides[d] != expected) return false;
    expected *= op.sizes[d];
  }
  return true;
}
}  // namespace

void copy(const KernelContext&, const StridedOperand& dst, const StridedOperand& src) {
  if (is_contiguous(dst) && is_contiguous(src) && !src.is_scalar) {
    // Both packed: the storage layer's converter (multithreaded, and a
    // memcpy when the dtypes match).
    convert_dtype(src.data, src.dtype, dst.data, dst.dtype, static_cast<std::size_t>(dst.numel()));
    return;
  }
  std::int64_t slot = 0;
  char* base[] = {static_cast<char*>(dst.data), input_base(src, &slot)};
  const StridedOperand* ops[] = {&dst, &src};
  const Loop loop = make_loop(ops, 2, base);
  dispatch(dst.dtype, [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    dispatch(src.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      run(loop, [&](char** p, const std::int64_t* s, std::int64_t n) {
        if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
          D* o = reinterpret_cast<D*>(p[0]);
          const S* in = reinterpret_cast<const S*>(p[1]);
          for (std::int64_t i = 0; i < n; ++i) o[i] = cast<D>(in[i]);
        } else {
          for (std::int64_t i = 0; i < n; ++i) store<D>(p[0] + i * s[0], cast<D>(load<S>(p[1] + i * s[1])));
        }
      });
    });
  });
}

void iota(const KernelContext&, const StridedOperand& out, Scalar start, Scalar step) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data);
    const std::int64_t n = out.numel();
    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        if constexpr (std::is_integral_v<T>) {
          o[i] = static_cast<T>(start.to_int64() + static_cast<std::int64_t>(i) * step.to_int64());
        } else {
          o[i] = cast<T>(start.to_double() + static_cast<double>(i) * step.to_double());
        }
      }
    });
  });
}

void random(const KernelContext&, const StridedOperand& out, const RandomParams& p) {
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data);
    const std::int64_t n = out.numel();
    const std::uint64_t range = static_cast<std::uint64_t>(p.int_high) - static_cast<std::uint64_t>(p.int_low);
    parallel_for(n, kParallelGrain / 4, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const philox::Block blk = philox::element_block(p.seed, p.offset, static_cast<std::uint64_t>(i));
        if constexpr (std::is_same_v<T, bool>) {
          o[i] = false;  // the tensor layer never asks for random bools
        } else if (p.kind == RandomKind::kInteger) {
          o[i] = cast<T>(philox::integer(blk, p.int_low, range));
        } else if constexpr (std::is_same_v<T, double>) {
          o[i] = p.kind == RandomKind::kUniform ? p.low + (p.high - p.low) * philox::uniform_double(blk)
                                                : p.low + p.high * philox::normal_double(blk);
        } else if constexpr (!std::is_integral_v<T>) {
          if (p.kind == RandomKind::kUniform) {
            const float u = philox::uniform_float(blk);
            const double v = p.low + (p.high - p.low) * static_cast<double>(u);
            T r = cast<T>(v);
            // Rounding to a narrow dtype may reach `high`; keep [low, high).
            if (static_cast<double>(static_cast<float>(r)) >= p.high && p.high > p.low) r = cast<T>(p.low);
            o[i] = r;
          } else {
            o[i] = cast<T>(p.low + p.high * philox::normal_double(blk));
          }
        } else {
          o[i] = T{};
        }
      }
    });
  });
}

}  // namespace genesis::kernels::cpu
