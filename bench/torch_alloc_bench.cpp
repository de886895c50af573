// torch_alloc_bench: the allocators Genesis is measured against, with the
// same patterns and output format as alloc_bench (see bench/bench_common.h):
//
//   pytorch          c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete
//                    (PyTorch's caching allocator; the backend that
//                    PYTORCH_CUDA_ALLOC_CONF selects, native by default)
//   cudaMallocAsync  cudaMallocAsync / cudaFreeAsync on a non-blocking stream,
//                    device 0's default memory pool with
//                    cudaMemPoolAttrReleaseThreshold = UINT64_MAX (no release)
//   cudaMalloc       cudaMalloc + cudaFree (hot and mixed only: ~50 us a pair)
//
//   torch_alloc_bench [--allocator pytorch|async|cudamalloc|all (comma list)]
//                     [--quick] [--json FILE] [--reps N] [--threads 1,4,8]
//                     [--patterns hot,mixed,threads] [--iters N]
//
// Thread patterns: pytorch threads allocate on their current stream (the
// default stream of device 0); cudaMallocAsync threads each use their own
// non-blocking stream from the same default pool.
//
// Built only with -DGENESIS_TORCH_BENCH=ON (needs libtorch). For a syntax
// check without libtorch, compile with -DGENESIS_BENCH_NO_TORCH: the PyTorch
// parts drop out and the CUDA parts stay.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"

#ifndef GENESIS_BENCH_NO_TORCH
#include <ATen/ATen.h>  // only to run PyTorch's lazy CUDA initialisation
#include <c10/cuda/CUDACachingAllocator.h>

#include "torch_adaptor.h"
#endif

namespace {

namespace gb = genesis_bench;
using Labels = std::vector<std::pair<std::string, std::string>>;

constexpr int kDevice = 0;

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, int line) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s failed: %s (%s, error %d) at torch_alloc_bench.cpp:%d", expr,
                cudaGetErrorString(e), cudaGetErrorName(e), static_cast<int>(e), line);
  throw std::runtime_error(buf);
}

#define BENCH_CUDA_CHECK(expr)                                       \
  do {                                                               \
    const cudaError_t bench_err_ = (expr);                           \
    if (__builtin_expect(bench_err_ != cudaSuccess, 0)) {            \
      throw_cuda(bench_err_, #expr, __LINE__);                       \
    }                                                                \
  } while (0)

// ------------------------------------------------------------- adaptors ---

#ifndef GENESIS_BENCH_NO_TORCH
using gb::TorchAdaptor;

/// Initialises PyTorch's CUDA state the way a tensor allocation does (which
/// calls CUDACachingAllocator::init(device_count)); falls back to calling
/// init directly when ATen cannot (e.g. libtorch_cuda was dropped at link
/// time). Returns an empty string on success, else why it failed.
std::string init_torch() {
  std::string aten_error;
  try {
    at::Tensor t = at::empty({1}, at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, kDevice)));
    t.reset();
  } catch (const std::exception& e) {
    aten_error = e.what();
  }
  if (!aten_error.empty()) {
    std::printf("# at::empty on CUDA failed (%s); calling CUDACachingAllocator::init directly\n",
                aten_error.substr(0, aten_error.find('\n')).c_str());
    try {
      int count = 0;
      BENCH_CUDA_CHECK(cudaGetDeviceCount(&count));
      c10::cuda::CUDACachingAllocator::init(count);
    } catch (const std::exception& e) {
      return std::string("CUDACachingAllocator::init failed: ") + e.what();
    }
  }
  try {
    void* p = c10::cuda::CUDACachingAllocator::raw_alloc(512);
    if (p == nullptr) return "raw_alloc(512) returned nullptr";
    c10::cuda::CUDACachingAllocator::raw_delete(p);
  } catch (const std::exception& e) {
    return std::string("raw_alloc/raw_delete failed: ") + e.what();
  }
  return "";
}

std::string torch_backend_name() {
  try {
    return c10::cuda::CUDACachingAllocator::get()->name();
  } catch (const std::exception&) {
    return "unknown";
  }
}
#endif  // GENESIS_BENCH_NO_TORCH

/// cudaMallocAsync / cudaFreeAsync on one stream (owned by the adaptor).
class AsyncAdaptor {
 public:
  AsyncAdaptor() { BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~AsyncAdaptor() {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  AsyncAdaptor(AsyncAdaptor&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  AsyncAdaptor& operator=(AsyncAdaptor&&) = delete;
  AsyncAdaptor(const AsyncAdaptor&) = delete;
  AsyncAdaptor& operator=(const AsyncAdaptor&) = delete;

  void* alloc(std::size_t n) {
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMallocAsync(&p, n, stream_));
    return p;
  }
  void free(void* p) { BENCH_CUDA_CHECK(cudaFreeAsync(p, stream_)); }
  void sync() { BENCH_CUDA_CHECK(cudaDeviceSynchronize()); }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Makes device 0's default pool the current one and stops it from
/// releasing memory at synchronisation points (the caching configuration).
void setup_default_pool() {
  BENCH_CUDA_CHECK(cudaSetDevice(kDevice));
  int supported = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, kDevice));
  if (!supported) throw std::runtime_error("device does not support memory pools (cudaMallocAsync)");
  cudaMemPool_t pool = nullptr;
  BENCH_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, kDevice));
  BENCH_CUDA_CHECK(cudaDeviceSetMemPool(kDevice, pool));
  std::uint64_t threshold = UINT64_MAX;
  BENCH_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
}

/// cudaMalloc + cudaFree (synchronising, ~50 us a pair).
struct CudaMallocAdaptor {
  void* alloc(std::size_t n) {
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&p, n));
    return p;
  }
  void free(void* p) { BENCH_CUDA_CHECK(cudaFree(p)); }
  void sync() { BENCH_CUDA_CHECK(cudaDeviceSynchronize()); }
};

// ------------------------------------------------------------- running ---

template <class Adaptor, class MakeWorker>
bool bench_one(const std::string& allocator, Adaptor& a, MakeWorker&& make_worker, bool threads_too,
               const gb::Config& cfg, gb::Reporter& rep, const gb::MixedSequence& seq,
               const gb::MixedSequence& seq_set) {
  const Labels labels = {{"allocator", allocator}, {"upstream", "cuda"}, {"api", "raw"}};
  try {
    if (cfg.wants("hot")) {
      for (std::size_t size : gb::hot_sizes()) rep.add(gb::run_hot(a, size, cfg, labels));
    }
    if (cfg.wants("mixed")) rep.add(gb::run_mixed(a, seq, cfg, labels));
    if (cfg.wants("mixed_set")) rep.add(gb::run_mixed(a, seq_set, cfg, labels, "mixed_set"));
    if (threads_too && cfg.wants("threads")) gb::run_thread_suite(make_worker, cfg, rep, labels);
  } catch (const std::exception& e) {
    rep.note(allocator + " failed: " + e.what());
    return false;
  }
  return true;
}

std::string now_utc() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  gb::Config cfg;
  std::string which = "all";
  bool help = false;
  const bool parsed = gb::parse_common(argc, argv, cfg, &help, [&](const std::string& k, const std::string& v) {
    if (k == "--allocator") {
      which = v;
      return true;
    }
    if (k == "--upstream") {  // accepted for symmetry with alloc_bench: only cuda
      return v == "cuda" || v == "all";
    }
    return false;
  });
  if (!parsed || help) {
    std::printf(
        "usage: %s [--allocator pytorch|async|cudamalloc|all] [options]\n"
        "PyTorch caching allocator, cudaMallocAsync and cudaMalloc alloc+free round trips\n"
        "(same patterns as alloc_bench, see bench/bench_common.h).\n"
        "  --allocator LIST   comma list of pytorch, async, cudamalloc, or all (default)\n%s",
        argv[0], gb::common_usage());
    return parsed ? 0 : 2;
  }
  bool run_torch = false, run_async = false, run_malloc = false;
  for (const auto& w : gb::split_list(which)) {
    if (w == "all") {
      run_torch = run_async = run_malloc = true;
    } else if (w == "pytorch" || w == "torch") {
      run_torch = true;
    } else if (w == "async" || w == "cudaMallocAsync") {
      run_async = true;
    } else if (w == "cudamalloc" || w == "cudaMalloc") {
      run_malloc = true;
    } else {
      std::fprintf(stderr, "error: unknown allocator '%s' (pytorch, async, cudamalloc, all)\n", w.c_str());
      return 2;
    }
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const std::string date = now_utc(), cpu = gb::cpu_model();
  const gb::MixedSequence seq = gb::MixedSequence::make(gb::kMixedSeed);
  const gb::MixedSequence seq_set = gb::MixedSequence::make(gb::kMixedSeed, gb::kMixedSteps, 64);
  gb::Reporter rep("torch_alloc_bench");
  rep.note("torch_alloc_bench " + date);
  rep.note("command: " + command);

  int count = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&count);
  if (count_err != cudaSuccess || count == 0) {
    const std::string why = count_err != cudaSuccess ? std::string("no GPU (") + cudaGetErrorString(count_err) + ")"
                                                     : std::string("no GPU");
    for (const char* a : {"pytorch", "cudaMallocAsync", "cudaMalloc"}) rep.skip(a, "cuda", why);
    rep.print_table();
    return 0;
  }
  cudaDeviceProp prop{};
  int runtime_version = 0, driver_version = 0;
  cudaGetDeviceProperties(&prop, kDevice);
  cudaRuntimeGetVersion(&runtime_version);
  cudaDriverGetVersion(&driver_version);
  char buf[512];
  std::snprintf(buf, sizeof buf, "gpu: %s; CUDA runtime %d, driver %d; cpu: %s, %u hardware threads", prop.name,
                runtime_version, driver_version, cpu.c_str(), std::thread::hardware_concurrency());
  rep.note(buf);
  std::snprintf(buf, sizeof buf,
                "nominal pairs: hot %llu, mixed %llu, per thread %llu; reps %d (threads %d); budget %.0f ms/rep; "
                "mixed mean size %.2f MiB",
                static_cast<unsigned long long>(cfg.hot_iters), static_cast<unsigned long long>(cfg.mixed_iters),
                static_cast<unsigned long long>(cfg.thread_pairs), cfg.reps, cfg.thread_reps, cfg.rep_budget_ms,
                seq.mean_size() / double(gb::MiB));
  rep.note(buf);
  rep.note(gb::describe_cpu_order());

  bool ok = true;
  std::string torch_backend;

  if (run_torch) {
#ifndef GENESIS_BENCH_NO_TORCH
    const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
    rep.note(std::string("PYTORCH_CUDA_ALLOC_CONF=") + (conf != nullptr ? conf : "(unset)"));
    const std::string why = init_torch();
    if (!why.empty()) {
      rep.skip("pytorch", "cuda", why);
      ok = false;
    } else {
      torch_backend = torch_backend_name();
      rep.note("pytorch allocator backend: " + torch_backend);
      TorchAdaptor a;
      ok = bench_one("pytorch", a, [](int) { return TorchAdaptor{}; }, true, cfg, rep, seq, seq_set) && ok;
      try {
        c10::cuda::CUDACachingAllocator::emptyCache();
      } catch (const std::exception&) {
      }
    }
#else
    rep.skip("pytorch", "cuda", "built without libtorch (GENESIS_BENCH_NO_TORCH)");
#endif
  }

  if (run_async) {
    try {
      setup_default_pool();
      AsyncAdaptor a;
      ok = bench_one("cudaMallocAsync", a, [](int) { return AsyncAdaptor(); }, true, cfg, rep, seq, seq_set) && ok;
      BENCH_CUDA_CHECK(cudaDeviceSynchronize());
      cudaMemPool_t pool = nullptr;
      BENCH_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, kDevice));
      BENCH_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    } catch (const std::exception& e) {
      rep.skip("cudaMallocAsync", "cuda", e.what());
      ok = false;
    }
  }

  if (run_malloc) {
    // Hot and mixed only; a shorter budget: ~50 us (256 MiB: ~0.5 ms) a pair.
    gb::Config c = cfg;
    c.rep_budget_ms = cfg.rep_budget_ms / 3;
    c.reps = std::min(cfg.reps, 3);
    CudaMallocAdaptor a;
    ok = bench_one("cudaMalloc", a, [](int) { return CudaMallocAdaptor{}; }, false, c, rep, seq, seq_set) && ok;
  }

  rep.print_table();
  if (!cfg.json_path.empty()) {
    ok = rep.write_json(cfg.json_path, {{"date", date},
                                        {"cpu", cpu},
                                        {"gpu", prop.name},
                                        {"cuda_runtime", std::to_string(runtime_version)},
                                        {"cuda_driver", std::to_string(driver_version)},
                                        {"pytorch_backend", torch_backend},
                                        {"command", command}}) &&
         ok;
  }
  return ok ? 0 : 1;
}
