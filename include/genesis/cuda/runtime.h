// Thin platform layer over the CUDA runtime: everything above it
// compiles and runs without a GPU. Without CUDA (or without a GPU) the queries
// report "no device" instead of failing; the calls that need a device throw
// CudaError.
//
// This header never includes CUDA headers, so code built without the toolkit
// (and code that only asks "is there a GPU?") can include it. Code that calls
// the CUDA runtime directly includes "genesis/cuda/check.h" instead.
#pragma once

#include <cstddef>
#include <new>

namespace genesis::cuda {

/// True when Genesis was compiled with CUDA support. Never throws.
bool compiled_with_cuda() noexcept;

/// Number of usable CUDA devices; 0 without CUDA, without a driver or GPU.
/// Never throws; thread-safe. The count is queried once per process (the CUDA
/// runtime fixes the device list, CUDA_VISIBLE_DEVICES included, at init).
int device_count() noexcept;

/// True when at least one CUDA device can be used.
inline bool is_available() noexcept { return device_count() > 0; }

/// The calling thread's current CUDA device, or 0 when there is none.
/// Never throws.
int current_device_or_zero() noexcept;

/// The calling thread's current CUDA device. Throws CudaError when CUDA is not
/// available (built without CUDA, no driver, no GPU) or the query fails.
int current_device();

/// Makes `device` current for the calling thread. Throws CudaError when CUDA
/// is not available or the index is invalid.
void set_device(int device);

/// Within its scope this thread's CUDA calls do not invalidate a stream
/// capture in progress (cudaStreamCaptureModeRelaxed): an allocator may then
/// call cudaMalloc while a CUDA graph is being captured, which the default
/// capture mode forbids (Note [Private pools behind PyTorch] in
/// python/src/py_torch_backend.cpp). The thread's previous mode comes back at
/// the end. Does nothing without CUDA or a driver.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept;
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// Blocks until all work queued on `device` has finished. Throws CudaError
/// when CUDA is not available or queued work failed. Restores the calling
/// thread's current device.
void synchronize_device(int device);

/// Free and total bytes of a device's memory, as cudaMemGetInfo reports them.
struct DeviceMemInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

/// Queries cudaMemGetInfo for `device` (creating its context if needed).
/// Throws CudaError when CUDA is not available or the call fails. Restores
/// the calling thread's current device.
DeviceMemInfo mem_get_info(int device);

/// RAII: makes a device current for the calling thread and restores the
/// previous one on destruction. Switching is skipped when the device is
/// already current (so a guard costs one cudaGetDevice on the common path).
///
/// Not copyable or movable: it belongs to the scope and thread that made it.
/// The destructor never throws.
class DeviceGuard {
 public:
  /// Throws CudaError when CUDA is not available or `device` is invalid.
  explicit DeviceGuard(int device);
  /// For noexcept paths (deallocation, destructors): tries to switch and, if
  /// that fails, leaves the current device alone. See switched().
  DeviceGuard(int device, std::nothrow_t) noexcept;
  ~DeviceGuard();

  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  /// The device that was current before the guard, restored at destruction.
  int previous_device() const noexcept { return previous_; }
  /// True when the guard changed the current device (and will restore it).
  bool switched() const noexcept { return switched_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

namespace detail {

/// Raw CUDA error code used when CUDA is not usable at all (cudaErrorNoDevice).
inline constexpr int kNoDeviceCode = 100;

/// Throws CudaError saying that `what` needs CUDA, and why it is not usable.
[[noreturn]] void throw_cuda_unavailable(const char* what, const char* file, int line);

}  // namespace detail
}  // namespace genesis::cuda
