// Per-device records of errors found by kernels (Note [Asynchronous kernel
// errors] in genesis/cuda/async_errors.h).
#include "genesis/cuda/async_errors.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "device_index.h"
#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceSlot {
  std::once_flag once;
  AsyncErrorRecord* record = nullptr;  // device memory
  std::atomic<int*> host_flag{nullptr};  // pinned host word (host address); set last
  int* host_flag_device = nullptr;     // the same word, as kernels address it
  std::mutex take;                     // one taker at a time resets the record
};

DeviceSlot g_slots[kMaxDevices];
// Set once any device has a sink: raise_async_errors is then worth a look.
std::atomic<bool> g_any_sink{false};

bool env_sync_default() {
  const char* v = std::getenv("GENESIS_SYNC_INDEX_CHECKS");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

std::atomic<bool>& sync_flag() {
  static std::atomic<bool> flag{env_sync_default()};
  return flag;
}

#if GENESIS_WITH_CUDA
AsyncErrorRecord empty_record() {
  AsyncErrorRecord r{};
  for (int k = 0; k < kAsyncIndexSlots; ++k) {
    r.index_max[k] = LLONG_MIN;
    r.index_min[k] = LLONG_MAX;
  }
  return r;
}

void create(DeviceSlot& s, int device) {
  DeviceGuard guard(device);
  const AsyncErrorRecord init = empty_record();
  void* rec = nullptr;
  GENESIS_CUDA_CHECK(cudaMalloc(&rec, sizeof(AsyncErrorRecord)));
  GENESIS_CUDA_CHECK(cudaMemcpy(rec, &init, sizeof init, cudaMemcpyHostToDevice));
  void* flag = nullptr;
  GENESIS_CUDA_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *static_cast<volatile int*>(flag) = 0;
  void* flag_dev = nullptr;
  GENESIS_CUDA_CHECK(cudaHostGetDevicePointer(&flag_dev, flag, 0));
  s.record = static_cast<AsyncErrorRecord*>(rec);
  s.host_flag_device = static_cast<int*>(flag_dev);
  s.host_flag.store(static_cast<int*>(flag), std::memory_order_release);
  g_any_sink.store(true, std::memory_order_release);
}
#endif

}  // namespace

AsyncErrorSink async_error_sink(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "async_error_sink()");
  GENESIS_CHECK(device < kMaxDevices, "async_error_sink: device ", device, " beyond the ", kMaxDevices, " supported");
  DeviceSlot& s = g_slots[device];
#if GENESIS_WITH_CUDA
  std::call_once(s.once, [&] { create(s, device); });
#endif
  return AsyncErrorSink{s.record, s.host_flag_device};
}

std::optional<AsyncIndexError> take_async_error(int device) {
  if (!g_any_sink.load(std::memory_order_acquire) || device < 0 || device >= kMaxDevices) return std::nullopt;
  DeviceSlot& s = g_slots[device];
  int* const flag = s.host_flag.load(std::memory_order_acquire);
  if (flag == nullptr || *static_cast<volatile int*>(flag) == 0) return std::nullopt;
#if GENESIS_WITH_CUDA
  std::lock_guard<std::mutex> lock(s.take);
  if (*static_cast<volatile int*>(flag) == 0) return std::nullopt;  // another thread took it
  // Kernels still running may add to the record: wait for all of them so
  // the values are final (the error path only).
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  AsyncErrorRecord r{};
  GENESIS_CUDA_CHECK(cudaMemcpy(&r, s.record, sizeof r, cudaMemcpyDeviceToHost));
  const AsyncErrorRecord init = empty_record();
  GENESIS_CUDA_CHECK(cudaMemcpy(s.record, &init, sizeof init, cudaMemcpyHostToDevice));
  *static_cast<volatile int*>(flag) = 0;
  for (int k = 0; k < kAsyncIndexSlots; ++k) {
    if ((r.index_flags & (1u << k)) == 0) continue;
    // The CPU's order: the largest index is checked before the smallest.
    AsyncIndexError e;
    e.index = r.index_max[k] != LLONG_MIN ? r.index_max[k] : r.index_min[k];
    e.dim = r.index_dim[k];
    e.size = r.index_size[k];
    return e;
  }
#endif
  return std::nullopt;
}

void raise_async_errors(int device) {
  if (const auto e = take_async_error(device)) {
    GENESIS_THROW(IndexError, "index ", e->index, " is out of bounds for dimension ", e->dim, " with size ", e->size,
                  " (found on cuda:", device,
                  " by an indexing kernel and reported at this synchronization; set GENESIS_SYNC_INDEX_CHECKS=1 "
                  "to raise it at the indexing call)");
  }
}

void raise_index_errors_now(int device, std::uintptr_t stream) {
#if GENESIS_WITH_CUDA
  {
    DeviceGuard guard(device);
    GENESIS_CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream)));
  }
#else
  (void)stream;
#endif
  if (const auto e = take_async_error(device)) {
    GENESIS_THROW(IndexError, "index ", e->index, " is out of bounds for dimension ", e->dim, " with size ", e->size);
  }
}

bool sync_index_checks() noexcept { return sync_flag().load(std::memory_order_relaxed); }

void set_sync_index_checks(bool on) noexcept { sync_flag().store(on, std::memory_order_relaxed); }

}  // namespace genesis::cuda
