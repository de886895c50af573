// Exhaustive GPU tests of convert_dtype_cuda (genesis/storage/convert_cuda.h):
// all 65536 float16 / bfloat16 bit patterns to every dtype; all 2^32 float32
// bit patterns to float16 and bfloat16 (a few seconds on an H100/H200; exclude
// this suite from compute-sanitizer runs), and a throughput line. The GPU
// result must equal the CPU convert_dtype result byte for byte; the helpers
// are in tests/support/gpu_convert_check.h.
#include <gtest/gtest.h>

#include "support/gpu_convert_check.h"

namespace genesis {
namespace {

using namespace gpu_convert_test;  // NOLINT: the shared helpers of the GPU conversion tests

class GpuConvertExhaustive : public GpuConvert {};

#if GENESIS_WITH_CUDA

TEST_F(GpuConvertExhaustive, All16BitFloatPatternsToEveryDtype) {
  const cuda::Stream stream = cuda::Stream::create();
  Bytes input;
  for (std::uint32_t b = 0; b < 65536; ++b) put(input, static_cast<std::uint16_t>(b));
  for (DType sd : {DType::kFloat16, DType::kBFloat16})
    for (DType dd : kAll) EXPECT_TRUE(check_pair(input, sd, dd, 0, 0, stream));
}

TEST_F(GpuConvertExhaustive, AllFloat32PatternsToHalfAndBFloat16) {
  constexpr std::size_t kChunk = std::size_t{1} << 27;  // 512 MiB of input per round
  constexpr std::uint64_t kTotal = std::uint64_t{1} << 32;
  const cuda::Stream stream = cuda::Stream::create();
  DeviceBuffer src(kChunk * 4);
  DeviceBuffer dst_half(kChunk * 2);
  DeviceBuffer dst_bf16(kChunk * 2);
  std::vector<std::uint32_t> input(kChunk);
  std::vector<std::uint16_t> gpu_half(kChunk), gpu_bf16(kChunk), cpu(kChunk);
  std::size_t failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t base = 0; base < kTotal && failures == 0; base += kChunk) {
    parallel_for(kChunk, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) input[i] = static_cast<std::uint32_t>(base + i);
    });
    upload(src.data(), input.data(), kChunk * 4);
    convert_dtype_cuda(src.data(), DType::kFloat32, dst_half.data(), DType::kFloat16, kChunk, stream.id());
    convert_dtype_cuda(src.data(), DType::kFloat32, dst_bf16.data(), DType::kBFloat16, kChunk, stream.id());
    stream.synchronize();
    download(gpu_half.data(), dst_half.data(), kChunk * 2);
    download(gpu_bf16.data(), dst_bf16.data(), kChunk * 2);
    for (auto [dd, gpu] : {std::pair{DType::kFloat16, &gpu_half}, std::pair{DType::kBFloat16, &gpu_bf16}}) {
      // The CPU reference and the comparison both run on every core.
      convert_dtype(input.data(), DType::kFloat32, cpu.data(), dd, kChunk);
      std::vector<std::size_t> bad_at;
      std::mutex mu;
      parallel_for(kChunk, [&](std::size_t b, std::size_t e) {
        if (std::memcmp(cpu.data() + b, gpu->data() + b, (e - b) * 2) == 0) return;
        for (std::size_t i = b; i < e; ++i)
          if (cpu[i] != (*gpu)[i]) {
            std::lock_guard<std::mutex> lock(mu);
            bad_at.push_back(i);
            if (bad_at.size() > 64) return;
          }
      });
      if (!bad_at.empty()) {
        std::sort(bad_at.begin(), bad_at.end());
        const std::size_t i = bad_at.front();
        EXPECT_TRUE(same_bytes(reinterpret_cast<const unsigned char*>(input.data() + i), DType::kFloat32,
                               reinterpret_cast<const unsigned char*>(cpu.data() + i),
                               reinterpret_cast<const unsigned char*>(gpu->data() + i), dd,
                               std::min<std::size_t>(kChunk - i, 4096), "all float32 bit patterns"))
            << "first difference at float bits 0x" << std::hex << input[i] << std::dec << "; " << bad_at.size()
            << (bad_at.size() > 64 ? "+" : "") << " differences in chunk at 0x" << std::hex << base;
        ++failures;
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info     ] all 2^32 float32 -> float16/bfloat16 checked in %.1f s\n", s);
}

TEST_F(GpuConvertExhaustive, ThroughputReport) {
  // Not an assertion on speed: one line per pair for the log, so a slow path
  // shows up. 256 Mi elements, 5 timed repetitions after a warm-up.
  constexpr std::size_t kCount = std::size_t{1} << 28;
  const cuda::Stream stream = cuda::Stream::create();
  DeviceBuffer src(kCount * 4);
  DeviceBuffer dst(kCount * 8);
  GENESIS_CUDA_CHECK(cudaMemset(src.data(), 0x3c, src.size()));
  const DType pairs[][2] = {{DType::kFloat32, DType::kFloat16}, {DType::kFloat32, DType::kBFloat16},
                            {DType::kFloat16, DType::kFloat32}, {DType::kBFloat16, DType::kFloat32},
                            {DType::kFloat32, DType::kFloat64}, {DType::kInt32, DType::kFloat32},
                            {DType::kUInt8, DType::kFloat32},   {DType::kFloat32, DType::kInt64}};
  for (const auto& p : pairs) {
    const std::size_t n = std::min(kCount, src.size() / dtype_size(p[0]));
    cuda::Event start(true), end(true);
    convert_dtype_cuda(src.data(), p[0], dst.data(), p[1], n, stream.id());  // warm-up
    start.record(stream);
    for (int r = 0; r < 5; ++r) convert_dtype_cuda(src.data(), p[0], dst.data(), p[1], n, stream.id());
    end.record(stream);
    end.synchronize();
    const double ms = start.elapsed_ms(end) / 5;
    const double gbs = static_cast<double>(n * (dtype_size(p[0]) + dtype_size(p[1]))) / (ms * 1e6);
    std::printf("[ info     ] convert_dtype_cuda %-8s -> %-8s %zu elements: %.3f ms, %.0f GB/s\n",
                std::string(dtype_name(p[0])).c_str(), std::string(dtype_name(p[1])).c_str(), n, ms, gbs);
  }
}

#endif  // GENESIS_WITH_CUDA

}  // namespace
}  // namespace genesis
