// convert_dtype: see include/genesis/storage/convert.h, Note [Cast semantics].
#include "genesis/storage/convert.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include "genesis/core/cast.h"
#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/core/threads.h"

namespace genesis {
namespace {

// Storage type of a bool element. Reading arbitrary bytes through `bool` is
// undefined, so bool buffers are handled as bytes.
struct BoolByte {
  std::uint8_t v;
};

// One element, per Note [Cast semantics]: the rules live in core/cast.h,
// shared with every kernel backend. A bool source byte is read as "nonzero"
// (cast<> itself expects a C++ bool, 0 or 1).
template <typename D, typename S>
D cast_one(S s) {
  if constexpr (std::is_same_v<S, BoolByte> && std::is_same_v<D, BoolByte>) {
    return BoolByte{static_cast<std::uint8_t>(s.v != 0)};
  } else if constexpr (std::is_same_v<S, BoolByte>) {
    return kernels::cast<D>(s.v != 0);
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    return BoolByte{static_cast<std::uint8_t>(kernels::cast<bool>(s))};
  } else if constexpr (std::is_same_v<D, S> && kernels::kIsHalfLike<S>) {
    // convert_dtype passes 16-bit floats through float even to their own
    // type (signalling NaNs come out quiet, as on the GPU); cast<> keeps an
    // identity copy bit for bit.
    return kernels::cast<D>(kernels::cast<float>(s));
  } else {
    return kernels::cast<D>(s);
  }
}

// Loads and stores go through memcpy: buffers only promise the element's
// natural alignment, and in-place conversions (src == dst, same size) read
// and write the same bytes through different types.
template <typename D, typename S>
void convert_range(const unsigned char* src, unsigned char* dst, std::size_t begin,
                   std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    S s;
    std::memcpy(&s, src + i * sizeof(S), sizeof(S));
    const D d = cast_one<D>(s);
    std::memcpy(dst + i * sizeof(D), &d, sizeof(D));
  }
}

using RangeFn = void (*)(const unsigned char*, unsigned char*, std::size_t, std::size_t);

template <typename S>
RangeFn pick_dst(DType dst) {
  switch (dst) {
    case DType::kBool: return &convert_range<BoolByte, S>;
    case DType::kUInt8: return &convert_range<std::uint8_t, S>;
    case DType::kInt8: return &convert_range<std::int8_t, S>;
    case DType::kInt16: return &convert_range<std::int16_t, S>;
    case DType::kInt32: return &convert_range<std::int32_t, S>;
    case DType::kInt64: return &convert_range<std::int64_t, S>;
    case DType::kFloat16: return &convert_range<Half, S>;
    case DType::kBFloat16: return &convert_range<BFloat16, S>;
    case DType::kFloat32: return &convert_range<float, S>;
    case DType::kFloat64: return &convert_range<double, S>;
  }
  return nullptr;  // unreachable: validated by the caller
}

RangeFn pick(DType src, DType dst) {
  switch (src) {
    case DType::kBool: return pick_dst<BoolByte>(dst);
    case DType::kUInt8: return pick_dst<std::uint8_t>(dst);
    case DType::kInt8: return pick_dst<std::int8_t>(dst);
    case DType::kInt16: return pick_dst<std::int16_t>(dst);
    case DType::kInt32: return pick_dst<std::int32_t>(dst);
    case DType::kInt64: return pick_dst<std::int64_t>(dst);
    case DType::kFloat16: return pick_dst<Half>(dst);
    case DType::kBFloat16: return pick_dst<BFloat16>(dst);
    case DType::kFloat32: return pick_dst<float>(dst);
    case DType::kFloat64: return pick_dst<double>(dst);
  }
  return nullptr;
}

bool valid_dtype(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes); }

}  // namespace

void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                   std::size_t count) {
  GENESIS_CHECK(valid_dtype(src_dtype), "convert_dtype: invalid source dtype value ",
                static_cast<unsigned>(src_dtype));
  GENESIS_CHECK(valid_dtype(dst_dtype), "convert_dtype: invalid destination dtype value ",
                static_cast<unsigned>(dst_dtype));
  if (count == 0) return;
  GENESIS_CHECK(src != nullptr, "convert_dtype: source pointer is null with count ", count);
  GENESIS_CHECK(dst != nullptr, "convert_dtype: destination pointer is null with count ", count);

  const std::size_t src_size = dtype_size(src_dtype);
  const std::size_t dst_size = dtype_size(dst_dtype);
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  // Compare addresses as integers: relational comparison of pointers into
  // different objects is unspecified.
  const auto s_begin = reinterpret_cast<std::uintptr_t>(s);
  const auto d_begin = reinterpret_cast<std::uintptr_t>(d);
  if (s_begin == d_begin && src_size == dst_size) {
    // In place: element i is read before it is written and no other element
    // shares its bytes, so the loop (and any chunking) stays correct.
    if (src_dtype == dst_dtype) return;
  } else {
    GENESIS_CHECK(count <= std::numeric_limits<std::size_t>::max() / 8,
                  "convert_dtype: count ", count, " is too large");
    const bool overlap = s_begin < d_begin + count * dst_size && d_begin < s_begin + count * src_size;
    GENESIS_CHECK(!overlap, "convert_dtype: source and destination buffers overlap (",
                  dtype_name(src_dtype), " -> ", dtype_name(dst_dtype),
                  "); only src == dst with equally sized dtypes is supported");
  }

  const RangeFn fn = pick(src_dtype, dst_dtype);
  if (count < kConvertParallelThreshold) {
    fn(s, d, 0, count);
    return;
  }
  // At least 256 Ki elements per thread so that thread start-up stays small
  // next to the work.
  // As many threads as the CPU tensor backend uses (Note [Thread count]).
  const auto hw = static_cast<std::size_t>(get_num_threads());
  const std::size_t threads = std::min<std::size_t>(hw, count / (std::size_t{1} << 18));
  const std::size_t chunk = (count + threads - 1) / threads;
  std::vector<std::thread> workers;
  workers.reserve(threads);
  std::size_t begin = chunk;  // chunk 0 runs on the calling thread
  for (; begin < count; begin += chunk) {
    const std::size_t end = std::min(count, begin + chunk);
    try {
      workers.emplace_back(fn, s, d, begin, end);
    } catch (...) {
      // Could not start a thread (resource limits): do this chunk here.
      fn(s, d, begin, end);
    }
  }
  fn(s, d, 0, std::min(count, chunk));
  for (auto& w : workers) w.join();
}

}  // namespace genesis
