#include "genesis/cuda/runtime.h"

#include "genesis/cuda/async_errors.h"

#include <string>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"

namespace genesis::cuda {

namespace detail {

std::string cuda_error_text(int code) {
#if GENESIS_WITH_CUDA
  const auto err = static_cast<cudaError_t>(code);
  return genesis::detail::str_cat(cudaGetErrorName(err), " (", code, "): ", cudaGetErrorString(err));
#else
  return genesis::detail::str_cat("CUDA error ", code, " (Genesis was built without CUDA)");
#endif
}

void throw_cuda_error(int code, const char* expr, const char* file, int line) {
#if GENESIS_WITH_CUDA
  // The failing call also set the thread's "last error"; clear it so that the
  // next launch check does not blame unrelated code for this failure.
  (void)cudaGetLastError();
#endif
  throw CudaError(genesis::detail::str_cat(expr, " failed: ", cuda_error_text(code)), code, file, line);
}

void throw_cuda_unavailable(const char* what, const char* file, int line) {
  std::string why = compiled_with_cuda()
                        ? "no CUDA GPU is available on this machine (no device, no driver, or "
                          "CUDA_VISIBLE_DEVICES hides them)"
                        : "Genesis was built without CUDA";
  throw CudaError(genesis::detail::str_cat(what, " needs CUDA, but ", why), kNoDeviceCode, file, line);
}

}  // namespace detail

bool compiled_with_cuda() noexcept { return GENESIS_WITH_CUDA != 0; }

int device_count() noexcept {
#if GENESIS_WITH_CUDA
  // Cached: the runtime fixes its device list at initialisation, and Device
  // parsing asks for the count often. A failure (no driver, driver too old,
  // no device) is cached as 0 devices, which is what it means for callers.
  static const int count = []() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // don't leave the failure for a later check
      return 0;
    }
    return n < 0 ? 0 : n;
  }();
  return count;
#else
  return 0;
#endif
}

int current_device_or_zero() noexcept {
#if GENESIS_WITH_CUDA
  if (device_count() == 0) return 0;
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return d;
#else
  return 0;
#endif
}

int current_device() {
  if (device_count() == 0) detail::throw_cuda_unavailable("current_device()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  int d = 0;
  GENESIS_CUDA_CHECK(cudaGetDevice(&d));
  return d;
#else
  return 0;  // unreachable: device_count() is 0 without CUDA
#endif
}

void set_device(int device) {
  if (device_count() == 0) detail::throw_cuda_unavailable("set_device()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaSetDevice(device));
#else
  (void)device;
#endif
}

RelaxedCaptureMode::RelaxedCaptureMode() noexcept {
#if GENESIS_WITH_CUDA
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess) {
    previous_ = static_cast<int>(mode);
    changed_ = true;
  } else {
    (void)cudaGetLastError();
  }
#endif
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
#if GENESIS_WITH_CUDA
  if (!changed_) return;
  auto mode = static_cast<cudaStreamCaptureMode>(previous_);
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) (void)cudaGetLastError();
#endif
}

void synchronize_device(int device) {
  if (device_count() == 0) detail::throw_cuda_unavailable("synchronize_device()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  raise_async_errors(device);  // Note [Asynchronous kernel errors]
#else
  (void)device;
#endif
}

DeviceMemInfo mem_get_info(int device) {
  if (device_count() == 0) detail::throw_cuda_unavailable("mem_get_info()", __FILE__, __LINE__);
  DeviceMemInfo info;
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
#else
  (void)device;
#endif
  return info;
}

// --- DeviceGuard -------------------------------------------------------------

DeviceGuard::DeviceGuard(int device) {
  previous_ = current_device();
  if (device != previous_) {
    set_device(device);
    switched_ = true;
  }
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept {
#if GENESIS_WITH_CUDA
  if (device_count() == 0) return;
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  previous_ = prev;
  if (device == prev) return;
  if (cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  switched_ = true;
#else
  (void)device;
#endif
}

DeviceGuard::~DeviceGuard() {
#if GENESIS_WITH_CUDA
  // Restoring can only fail when the runtime is shutting down or the context
  // is broken; neither is something a destructor can fix, so don't throw.
  if (switched_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
#endif
}

}  // namespace genesis::cuda
