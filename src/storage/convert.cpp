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
#include "genesis/core/dtype_dispatch.h"
#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/core/threads.h"

namespace genesis {
namespace {

using kernels::BoolByte;

// Loads and stores go through memcpy: buffers only promise the element's
// natural alignment, and in-place conversions (src == dst, same size) read
// and write the same bytes through different types.
template <typename D, typename S>
void convert_range(const unsigned char* src, unsigned char* dst, std::size_t begin,
                   std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    S s;
    std::memcpy(&s, src + i * sizeof(S), sizeof(S));
    const D d = kernels::convert_element<D>(s);  // Note [Cast semantics]
    std::memcpy(dst + i * sizeof(D), &d, sizeof(D));
  }
}

using RangeFn = void (*)(const unsigned char*, unsigned char*, std::size_t, std::size_t);

// The element types come from the one dtype dispatch (core/dtype_dispatch.h);
// bool elements are read as bytes (BoolByte).
RangeFn pick(DType src, DType dst) {
  return kernels::dispatch_element(src, [dst](auto s) {
    return kernels::dispatch_element(dst, [](auto d) -> RangeFn {
      return &convert_range<typename decltype(d)::type, typename decltype(s)::type>;
    });
  });
}

}  // namespace

void convert_dtype(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                   std::size_t count) {
  GENESIS_CHECK(is_valid_dtype(src_dtype), "convert_dtype: invalid source dtype value ",
                static_cast<unsigned>(src_dtype));
  GENESIS_CHECK(is_valid_dtype(dst_dtype), "convert_dtype: invalid destination dtype value ",
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
