// GPU tests of convert_dtype_cuda (genesis/storage/convert_cuda.h): the GPU
// result must equal the CPU convert_dtype result byte for byte, for every
// dtype pair on edge cases + random inputs, at aligned and misaligned
// offsets, in place, large (grid-stride) runs, queued without synchronising,
// double/int64 -> 16-bit floats around every rounding midpoint, and argument
// errors. Small enough for compute-sanitizer. The exhaustive bit-pattern
// sweeps are in gpu_convert_exhaustive_test.cpp, the helpers in
// tests/support/gpu_convert_check.h.
#include <gtest/gtest.h>

#include "support/gpu_convert_check.h"

namespace genesis {
namespace {

using namespace gpu_convert_test;  // NOLINT: the shared helpers of the GPU conversion tests

#if GENESIS_WITH_CUDA

TEST_F(GpuConvert, EveryPairMatchesCpuOnEdgeAndRandomInputs) {
  const cuda::Stream stream = cuda::Stream::create();
  // Offsets: aligned (vector path), both shifted alike (head + vector path
  // when the sizes agree), and unrelated shifts (scalar path).
  const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0}, {1, 1}, {0, 3}, {5, 2}, {16, 16}};
  std::uint64_t seed = 1;
  for (DType sd : kAll) {
    for (DType dd : kAll) {
      const Bytes input = mixed_input(sd, 4099, seed++);
      for (auto [so, dof] : offsets) EXPECT_TRUE(check_pair(input, sd, dd, so, dof, stream));
    }
  }
}

TEST_F(GpuConvert, SmallCountsCoverHeadsAndTails) {
  const cuda::Stream stream = cuda::Stream::create();
  const DType pairs[][2] = {{DType::kFloat32, DType::kFloat16}, {DType::kUInt8, DType::kFloat64},
                            {DType::kFloat64, DType::kBool},    {DType::kInt16, DType::kBFloat16},
                            {DType::kBFloat16, DType::kInt64},  {DType::kBool, DType::kBool}};
  for (const auto& p : pairs) {
    const Bytes all = mixed_input(p[0], 64, 99);
    for (std::size_t count : {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47}) {
      const Bytes input(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count * dtype_size(p[0])));
      for (std::size_t off : {0, 1, 2, 7}) EXPECT_TRUE(check_pair(input, p[0], p[1], off, off, stream));
    }
  }
}

TEST_F(GpuConvert, LargeRunsUseTheGridStrideLoop) {
  // More vectors than the grid has threads (8 blocks of 256 per SM), so
  // every thread loops; an odd count leaves a tail.
  const std::size_t sms = static_cast<std::size_t>(cuda::get_device_properties().multi_processor_count);
  const std::size_t count = sms * 8 * 256 * 16 * 3 + 5;
  const cuda::Stream stream = cuda::Stream::create();
  const DType pairs[][2] = {{DType::kFloat32, DType::kFloat16}, {DType::kFloat32, DType::kBFloat16},
                            {DType::kFloat16, DType::kFloat32}, {DType::kUInt8, DType::kFloat32},
                            {DType::kFloat64, DType::kInt32}};
  for (const auto& p : pairs) {
    const Bytes input = random_values(p[0], count, 7);
    EXPECT_TRUE(check_pair(input, p[0], p[1], 0, 0, stream));
    EXPECT_TRUE(check_pair(input, p[0], p[1], 3, 3, stream));
  }
}

TEST_F(GpuConvert, InPlaceMatchesCpuInPlace) {
  const cuda::Stream stream = cuda::Stream::create();
  for (DType sd : kAll) {
    for (DType dd : kAll) {
      if (dtype_size(sd) != dtype_size(dd)) continue;
      const Bytes input = mixed_input(sd, 1000, 11);
      const std::size_t count = input.size() / dtype_size(sd);
      Bytes expected = input;
      convert_dtype(expected.data(), sd, expected.data(), dd, count);
      DeviceBuffer buf(input.size());
      upload(buf.data(), input.data(), input.size());
      convert_dtype_cuda(buf.data(), sd, buf.data(), dd, count, stream.id());
      stream.synchronize();
      Bytes actual(input.size());
      download(actual.data(), buf.data(), actual.size());
      EXPECT_TRUE(same_bytes(input.data(), sd, expected.data(), actual.data(), dd, count, "in place"));
    }
  }
}

TEST_F(GpuConvert, DefaultStreamAndManagedMemory) {
  const Bytes input = mixed_input(DType::kFloat64, 500, 5);
  const std::size_t count = input.size() / 8;
  Bytes expected(count * 2);
  convert_dtype(input.data(), DType::kFloat64, expected.data(), DType::kBFloat16, count);

  void* managed_src = nullptr;
  void* managed_dst = nullptr;
  GENESIS_CUDA_CHECK(cudaMallocManaged(&managed_src, input.size()));
  GENESIS_CUDA_CHECK(cudaMallocManaged(&managed_dst, count * 2));
  std::memcpy(managed_src, input.data(), input.size());
  convert_dtype_cuda(managed_src, DType::kFloat64, managed_dst, DType::kBFloat16, count, 0);
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(same_bytes(input.data(), DType::kFloat64, expected.data(), static_cast<unsigned char*>(managed_dst),
                         DType::kBFloat16, count, "managed -> managed, legacy default stream"));

  DeviceBuffer dst(count * 2);
  convert_dtype_cuda(managed_src, DType::kFloat64, dst.data(), DType::kBFloat16, count,
                     cuda::default_stream().id());
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  Bytes actual(count * 2);
  download(actual.data(), dst.data(), actual.size());
  EXPECT_TRUE(same_bytes(input.data(), DType::kFloat64, expected.data(), actual.data(), DType::kBFloat16, count,
                         "managed -> device"));
  (void)cudaFree(managed_src);
  (void)cudaFree(managed_dst);
}

// The conversion is queued on the stream and returns at once: with the
// stream held by a host callback, convert_dtype_cuda must come back while the
// stream is still blocked (a hidden synchronisation would deadlock; a
// watchdog opens the gate after 20 s and the test then fails instead).
TEST_F(GpuConvert, QueuesOnTheStreamWithoutSynchronising) {
  const cuda::Stream stream = cuda::Stream::create();
  const Bytes input = mixed_input(DType::kFloat32, 10000, 21);
  const std::size_t count = input.size() / 4;
  DeviceBuffer src(input.size()), dst_half(count * 2), dst_copy(input.size());
  upload(src.data(), input.data(), input.size());

  struct GateState {
    std::atomic<bool> open{false};
  } gate;
  auto wait = [](void* p) {
    auto* g = static_cast<GateState*>(p);
    while (!g->open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  };
  GENESIS_CUDA_CHECK(cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(stream.id()), wait, &gate));
  std::atomic<bool> returned{false};
  std::atomic<bool> watchdog_fired{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 2000 && !returned.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!returned.load()) watchdog_fired = true;
    gate.open = true;
  });
  convert_dtype_cuda(src.data(), DType::kFloat32, dst_half.data(), DType::kFloat16, count, stream.id());
  convert_dtype_cuda(src.data(), DType::kFloat32, dst_copy.data(), DType::kFloat32, count, stream.id());
  const bool pending = !stream.query();
  returned = true;
  watchdog.join();
  EXPECT_FALSE(watchdog_fired.load()) << "convert_dtype_cuda waited for the stream (hidden synchronisation)";
  EXPECT_TRUE(pending) << "the stream was still held by the callback, so the work must be pending";
  stream.synchronize();

  Bytes expected(count * 2), actual(count * 2), copy(input.size());
  convert_dtype(input.data(), DType::kFloat32, expected.data(), DType::kFloat16, count);
  download(actual.data(), dst_half.data(), actual.size());
  download(copy.data(), dst_copy.data(), copy.size());
  EXPECT_TRUE(same_bytes(input.data(), DType::kFloat32, expected.data(), actual.data(), DType::kFloat16, count,
                         "queued behind a host callback"));
  EXPECT_EQ(copy, input) << "float32 -> float32 is a plain stream-ordered copy";
}

// double -> float16/bfloat16 must round once from the double. Around every
// midpoint between adjacent 16-bit values, rounding through float first
// would go wrong for inputs within 2^-24 relative of the midpoint.
TEST_F(GpuConvert, Float64AndInt64ToHalfAroundEveryMidpoint) {
  const cuda::Stream stream = cuda::Stream::create();
  for (DType dd : {DType::kFloat16, DType::kBFloat16}) {
    Bytes doubles;
    Bytes int64s;
    for (std::uint32_t h = 0; h < 0x7c00u || (dd == DType::kBFloat16 && h < 0x7f80u); ++h) {
      const double lo = dd == DType::kFloat16 ? static_cast<double>(half_bits_to_float(static_cast<std::uint16_t>(h)))
                                              : static_cast<double>(bfloat16_bits_to_float(static_cast<std::uint16_t>(h)));
      const double hi = dd == DType::kFloat16
                            ? static_cast<double>(half_bits_to_float(static_cast<std::uint16_t>(h + 1)))
                            : static_cast<double>(bfloat16_bits_to_float(static_cast<std::uint16_t>(h + 1)));
      const double mid = lo + (hi - lo) / 2;  // exact: one more bit than the format
      for (double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300), mid * (1 + 0x1p-30),
                       mid * (1 - 0x1p-30), mid * (1 + 0x1p-50), mid * (1 - 0x1p-50), lo, hi}) {
        put(doubles, v);
        put(doubles, -v);
      }
      if (mid >= 1.0 && mid < 0x1p62) {
        const auto m = static_cast<std::int64_t>(mid);
        if (static_cast<double>(m) == mid) {
          for (std::int64_t d : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}}) {
            put(int64s, m + d);
            put(int64s, -(m + d));
          }
        }
      }
    }
    Bytes r = random_values(DType::kFloat64, 20000, 17);
    doubles.insert(doubles.end(), r.begin(), r.end());
    EXPECT_TRUE(check_pair(doubles, DType::kFloat64, dd, 0, 0, stream));
    EXPECT_TRUE(check_pair(int64s, DType::kInt64, dd, 0, 0, stream));
  }
}

TEST_F(GpuConvert, RejectsHostMemoryMisalignmentOverlapAndForeignStreams) {
  DeviceBuffer dev(4096);
  std::vector<float> host(16);
  auto message = [](const std::function<void()>& fn) -> std::string {
    try {
      fn();
    } catch (const InvalidArgumentError& e) {
      return e.message();
    } catch (const std::exception& e) {
      return std::string("<wrong exception type> ") + e.what();
    }
    return "<no InvalidArgumentError>";
  };
  EXPECT_NE(message([&] { convert_dtype_cuda(host.data(), DType::kFloat32, dev.data(), DType::kFloat16, 16); })
                .find("not CUDA memory"),
            std::string::npos);
  EXPECT_NE(message([&] { convert_dtype_cuda(dev.data(), DType::kFloat32, host.data(), DType::kFloat16, 16); })
                .find("not CUDA memory"),
            std::string::npos);
  void* pinned = nullptr;
  GENESIS_CUDA_CHECK(cudaMallocHost(&pinned, 256));
  EXPECT_NE(message([&] { convert_dtype_cuda(pinned, DType::kFloat32, dev.data(), DType::kFloat16, 16); })
                .find("pinned host memory"),
            std::string::npos);
  (void)cudaFreeHost(pinned);
  EXPECT_NE(message([&] { convert_dtype_cuda(dev.data() + 2, DType::kFloat32, dev.data() + 1024, DType::kFloat16, 4); })
                .find("not aligned"),
            std::string::npos);
  EXPECT_NE(message([&] { convert_dtype_cuda(dev.data(), DType::kFloat32, dev.data() + 8, DType::kFloat32, 16); })
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(message([&] { convert_dtype_cuda(dev.data(), DType::kFloat32, dev.data(), DType::kFloat64, 16); })
                .find("overlap"),
            std::string::npos);
  EXPECT_NO_THROW(convert_dtype_cuda(dev.data(), DType::kFloat32, dev.data(), DType::kFloat32, 16));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  if (cuda::device_count() < 2) GTEST_SKIP() << "the cross-device checks need two GPUs";
  const int other = cuda::current_device() == 0 ? 1 : 0;
  const cuda::Stream foreign = cuda::Stream::create(other);
  EXPECT_NE(message([&] {
              convert_dtype_cuda(dev.data(), DType::kFloat32, dev.data() + 2048, DType::kFloat16, 16, foreign.id());
            }).find("the stream belongs to cuda:"),
            std::string::npos);
  void* far = nullptr;
  {
    cuda::DeviceGuard guard(other);
    GENESIS_CUDA_CHECK(cudaMalloc(&far, 1024));
  }
  EXPECT_NE(message([&] { convert_dtype_cuda(dev.data(), DType::kFloat32, far, DType::kFloat16, 16); })
                .find("copy one of them to the other GPU"),
            std::string::npos);
  (void)cudaFree(far);
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis
