// Shared by the GPU dtype conversion tests (tests/storage/gpu_convert_test.cpp,
// gpu_convert_exhaustive_test.cpp): device buffers and transfers, edge-case
// and random inputs of every dtype, and check_pair, which converts on the GPU
// and on the CPU (convert_dtype) and requires the same bytes. A mismatch
// prints the pair, the element index, the input bits and the expected (CPU)
// and actual (GPU) output bits of the first few differences.
//
// A named namespace (not an anonymous one): the GpuConvert fixture is one type
// in every test file that uses it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/dtype.h"
#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/convert_cuda.h"

namespace genesis::gpu_convert_test {

class GpuConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA GPU available (" << (cuda::compiled_with_cuda() ? "none found" : "built without CUDA")
                   << "): GPU dtype conversion tests skipped";
    }
  }
};

#if GENESIS_WITH_CUDA

inline constexpr DType kAll[] = {DType::kBool,    DType::kUInt8,    DType::kInt8,    DType::kInt16,
                                 DType::kInt32,   DType::kInt64,    DType::kFloat16, DType::kBFloat16,
                                 DType::kFloat32, DType::kFloat64};

using Bytes = std::vector<unsigned char>;

// --- device memory and transfers -------------------------------------------

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    GENESIS_CUDA_CHECK(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  }
  ~DeviceBuffer() { (void)cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(ptr_); }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

inline void upload(unsigned char* dst, const void* src, std::size_t bytes) {
  GENESIS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
inline void download(void* dst, const unsigned char* src, std::size_t bytes) {
  GENESIS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

// Runs `fn(begin, end)` over [0, n) on all cores.
inline void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn) {
  const std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunk = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t b = 0; b < n; b += chunk) pool.emplace_back(fn, b, std::min(n, b + chunk));
  for (auto& t : pool) t.join();
}

// --- reporting ---------------------------------------------------------------

inline std::string hex_element(const unsigned char* p, std::size_t size) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, size);  // little endian
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", static_cast<int>(2 * size), static_cast<unsigned long long>(v));
  return buf;
}

// Compares element-wise; reports up to 8 differences with the inputs.
inline ::testing::AssertionResult same_bytes(const unsigned char* input, DType sd, const unsigned char* expected,
                                      const unsigned char* actual, DType dd, std::size_t count,
                                      const std::string& context) {
  const std::size_t ss = dtype_size(sd);
  const std::size_t ds = dtype_size(dd);
  if (std::memcmp(expected, actual, count * ds) == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(expected + i * ds, actual + i * ds, ds) == 0) continue;
    if (bad < 8) {
      os << "\n  [" << i << "] input " << hex_element(input + i * ss, ss) << "  CPU " << hex_element(expected + i * ds, ds)
         << "  GPU " << hex_element(actual + i * ds, ds);
    }
    ++bad;
  }
  return ::testing::AssertionFailure() << dtype_name(sd) << " -> " << dtype_name(dd) << " (" << context << "): "
                                       << bad << " of " << count << " elements differ from the CPU convert_dtype:"
                                       << os.str();
}

// --- inputs -------------------------------------------------------------------

template <typename T>
inline void put(Bytes& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

inline double d_bits(std::uint64_t b) { return std::bit_cast<double>(b); }
inline float f_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// Values every conversion must get right: zeros, extremes, NaNs with
// payloads (quiet and signalling, both signs), subnormals, rounding ties of
// every narrower format, integer range limits of every wider one.
inline Bytes edge_cases(DType t) {
  Bytes out;
  const double doubles[] = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994,
                            127.5, 128.0, 255.0, 255.9, 256.0, 300.7, -129.5, -200.0, 32767.5, 32768.0,
                            -32769.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e10, -1e10, 2147483647.0,
                            2147483647.9, 2147483648.0, -2147483648.0, -2147483648.9, -2147483649.0,
                            9223372036854774784.0, 9223372036854775808.0, -9223372036854775808.0,
                            -9223372036854777856.0, 1e20, -1e20, 1e300, -1e300, 3.4028234663852886e38,
                            3.4028235677973366e38, 3.4028235677973362e38, 1.1754943508222875e-38,
                            1.401298464324817e-45, 7.006492321624085e-46, 5.960464477539063e-08,
                            2.9802322387695312e-08, 2.98023223876953125e-08 * 1.0000001,
                            6.103515625e-05, 1.0 + 1.0 / 2048, 1.0 + 1.0 / 2048 + 1e-15, 1.0 + 1.0 / 256,
                            1.0 + 1.0 / 256 + 1e-15, 1.0 + 3.0 / 2048, 1.0 + std::ldexp(1.0, -24),
                            1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -52),
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(),
                            -std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min()};
  switch (t) {
    case DType::kBool:
      for (int v : {0, 1, 2, 127, 128, 255}) put(out, static_cast<std::uint8_t>(v));
      break;
    case DType::kUInt8:
      for (int v : {0, 1, 2, 127, 128, 200, 254, 255}) put(out, static_cast<std::uint8_t>(v));
      break;
    case DType::kInt8:
      for (int v : {0, 1, -1, 2, 127, -127, -128, 100, -100}) put(out, static_cast<std::int8_t>(v));
      break;
    case DType::kInt16:
      for (int v : {0, 1, -1, 255, 256, -256, 2048, 2049, 2051, 4097, 4098, 4099, 32767, -32768, -32767, 257, 259})
        put(out, static_cast<std::int16_t>(v));
      break;
    case DType::kInt32:
      for (std::int64_t v : {0LL, 1LL, -1LL, 255LL, 256LL, 2049LL, 65504LL, 65519LL, 65520LL, 65535LL, 65536LL,
                             -65520LL, 16777217LL, 16777219LL, -16777217LL, 2147483647LL, -2147483648LL,
                             -2147483647LL, 257LL, 259LL, 33619968LL, 33619969LL, 0x01010101LL, 0x7f7f7f7fLL})
        put(out, static_cast<std::int32_t>(v));
      break;
    case DType::kInt64: {
      const std::int64_t big = std::int64_t{1} << 62;
      for (std::int64_t v : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::int64_t{65519},
                             std::int64_t{65520}, std::int64_t{16777217}, std::int64_t{2147483648},
                             std::int64_t{-2147483649}, (std::int64_t{1} << 53) + 1, (std::int64_t{1} << 53) + 3,
                             big + (std::int64_t{1} << 54) + 1, big + (std::int64_t{1} << 54),
                             big + (std::int64_t{1} << 54) - 1, -(big + (std::int64_t{1} << 54) + 1),
                             big + (std::int64_t{1} << 38) + 1, big + (std::int64_t{1} << 38),
                             std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::min() + 1, (std::int64_t{1} << 40) + (std::int64_t{1} << 32) + 1})
        put(out, v);
      break;
    }
    case DType::kFloat16:
      for (unsigned v : {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x03ffu, 0x0400u, 0x3c00u, 0xbc00u, 0x3c01u, 0x7bffu,
                         0xfbffu, 0x7c00u, 0xfc00u, 0x7e00u, 0xfe00u, 0x7c01u, 0xfc01u, 0x7dffu, 0x7fffu, 0xffffu,
                         0x5bffu, 0x5c00u, 0x57ffu, 0x3800u, 0x3e00u, 0x4100u, 0x7800u, 0xf800u})
        put(out, static_cast<std::uint16_t>(v));
      break;
    case DType::kBFloat16:
      for (unsigned v : {0x0000u, 0x8000u, 0x0001u, 0x8001u, 0x007fu, 0x0080u, 0x3f80u, 0xbf80u, 0x3f81u, 0x7f7fu,
                         0xff7fu, 0x7f80u, 0xff80u, 0x7fc0u, 0xffc0u, 0x7f81u, 0xff81u, 0x7fbfu, 0x7fffu, 0xffffu,
                         0x4f00u, 0xcf00u, 0x5f00u, 0xdf00u, 0x477fu, 0x4780u, 0x3f00u, 0x3fc0u, 0x4020u})
        put(out, static_cast<std::uint16_t>(v));
      break;
    case DType::kFloat32:
      for (double d : doubles) put(out, static_cast<float>(d));
      for (std::uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu,
                              0xffc12345u, 0x7f802000u, 0x7f801fffu, 0x00000001u, 0x007fffffu, 0x80000001u,
                              0x33000000u, 0x33000001u, 0x32ffffffu, 0x33400000u, 0x3f808000u, 0x3f818000u,
                              0x3f808001u, 0x3f807fffu, 0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x477ff000u,
                              0x477fefffu, 0x4f000000u, 0xcf000000u, 0x4effffffu, 0x5f000000u, 0xdf000000u,
                              0x5effffffu, 0x38800000u, 0x387fe000u, 0x387fffffu, 0x00400000u})
        put(out, f_bits(b));
      break;
    case DType::kFloat64:
      for (double d : doubles) put(out, d);
      for (std::uint64_t b : {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                              0xfff0000000000001ull, 0x7ff00000ffffffffull, 0x7ff8000020000000ull,
                              0x7ff7ffffffffffffull, 0x7fffffffffffffffull, 0x7ff0000020000000ull,
                              0x7ff0040000000000ull, 0x0000000000000001ull, 0x000fffffffffffffull,
                              0x8000000000000001ull, 0x47efffffe0000000ull, 0x47efffffefffffffull,
                              0x47efffffdfffffffull, 0x36a0000000000000ull, 0x36a0000000000001ull,
                              0x369fffffffffffffull, 0x3e70000000000000ull, 0x3e70000000000001ull,
                              0x3e6fffffffffffffull, 0x3ff0000010000000ull, 0x3ff0000010000001ull,
                              0x3ff000000fffffffull, 0x3ff0100000000000ull, 0x3ff0100000000001ull,
                              0x3ff00fffffffffffull, 0x3ff0080000000000ull, 0x3ff0080000000001ull})
        put(out, d_bits(b));
      break;
  }
  return out;
}

// `n` random elements of `t`: a third uniformly random bits (every class of
// value, NaN payloads included), the rest values of ordinary size (so that
// float -> integer and rounding see in-range values, not only huge ones).
inline Bytes random_values(DType t, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> moderate(-70000.0, 70000.0);
  std::uniform_real_distribution<double> unit(-4.0, 4.0);
  std::uniform_int_distribution<int> pick(0, 5);
  Bytes out;
  out.reserve(n * dtype_size(t));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t bits = rng();
    const int kind = pick(rng);
    const double value = kind == 1 ? moderate(rng) : kind == 2 ? unit(rng)
                         : kind == 3 ? std::ldexp(static_cast<double>(static_cast<std::int64_t>(bits)), -static_cast<int>(bits % 100))
                                     : std::round(moderate(rng));
    const bool raw = kind == 0 || kind == 5;
    switch (t) {
      case DType::kBool: put(out, static_cast<std::uint8_t>(raw ? bits : bits % 3)); break;
      case DType::kUInt8: put(out, static_cast<std::uint8_t>(bits)); break;
      case DType::kInt8: put(out, static_cast<std::int8_t>(bits)); break;
      case DType::kInt16: put(out, static_cast<std::int16_t>(bits)); break;
      case DType::kInt32:
        put(out, raw ? static_cast<std::int32_t>(bits)
                     : static_cast<std::int32_t>(std::clamp(value, -2147483648.0, 2147483647.0)));
        break;
      case DType::kInt64: put(out, static_cast<std::int64_t>(raw ? bits : bits >> (bits % 64))); break;
      case DType::kFloat16: put(out, raw ? static_cast<std::uint16_t>(bits) : double_to_half_bits(value)); break;
      case DType::kBFloat16: put(out, raw ? static_cast<std::uint16_t>(bits) : double_to_bfloat16_bits(value)); break;
      case DType::kFloat32: put(out, raw ? f_bits(static_cast<std::uint32_t>(bits)) : static_cast<float>(value)); break;
      case DType::kFloat64: put(out, raw ? d_bits(bits) : value); break;
    }
  }
  return out;
}

inline Bytes mixed_input(DType t, std::size_t random_count, std::uint64_t seed) {
  Bytes in = edge_cases(t);
  Bytes r = random_values(t, random_count, seed);
  in.insert(in.end(), r.begin(), r.end());
  return in;
}

// --- running one case ---------------------------------------------------------

// Converts `input` on the GPU (src at element offset src_off and dst at
// dst_off of fresh buffers, on a non-default stream) and on the CPU, and
// compares. The bytes around the destination range must stay untouched.
inline ::testing::AssertionResult check_pair(const Bytes& input, DType sd, DType dd, std::size_t src_off,
                                      std::size_t dst_off, const cuda::Stream& stream) {
  const std::size_t ss = dtype_size(sd);
  const std::size_t ds = dtype_size(dd);
  const std::size_t count = input.size() / ss;
  Bytes expected(count * ds);
  convert_dtype(input.data(), sd, expected.data(), dd, count);

  DeviceBuffer src((count + src_off) * ss);
  DeviceBuffer dst((count + dst_off + 16) * ds);
  upload(src.data() + src_off * ss, input.data(), count * ss);
  GENESIS_CUDA_CHECK(cudaMemset(dst.data(), 0xa5, dst.size()));
  convert_dtype_cuda(src.data() + src_off * ss, sd, dst.data() + dst_off * ds, dd, count, stream.id());
  stream.synchronize();
  Bytes actual(dst.size());
  download(actual.data(), dst.data(), dst.size());

  for (std::size_t i = 0; i < dst_off * ds; ++i)
    if (actual[i] != 0xa5) return ::testing::AssertionFailure() << "wrote before the destination range";
  for (std::size_t i = (dst_off + count) * ds; i < actual.size(); ++i)
    if (actual[i] != 0xa5)
      return ::testing::AssertionFailure() << dtype_name(sd) << " -> " << dtype_name(dd)
                                           << ": wrote past the destination range (byte " << i << ")";
  std::ostringstream ctx;
  ctx << count << " elements, src offset " << src_off << ", dst offset " << dst_off;
  return same_bytes(input.data(), sd, expected.data(), actual.data() + dst_off * ds, dd, count, ctx.str());
}

#endif  // GENESIS_WITH_CUDA

}  // namespace genesis::gpu_convert_test
