// Streams, events and the current stream: see include/genesis/cuda/stream.h.
#include "genesis/cuda/stream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "device_index.h"
#include "genesis/core/error.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {

namespace {

// Handle values CUDA gives special meaning (cudaStreamLegacy, cudaStreamPerThread).
constexpr StreamId kLegacyStreamHandle = 1;
constexpr StreamId kPerThreadStreamHandle = 2;

#if GENESIS_WITH_CUDA
cudaEvent_t as_event(std::uintptr_t e) noexcept { return reinterpret_cast<cudaEvent_t>(e); }
#endif

// The calling thread's current stream per device; a slot that was never set
// means "the default stream of that device". Grown on first use, so a thread
// that never asks pays nothing.
struct CurrentStreams {
  std::vector<Stream> streams;
  std::vector<char> set;
};

CurrentStreams& current_streams(int device) {
  thread_local CurrentStreams tls;
  if (tls.streams.size() <= static_cast<std::size_t>(device)) {
    const auto n = static_cast<std::size_t>(std::max(device + 1, device_count()));
    tls.streams.resize(n);
    tls.set.resize(n, 0);
  }
  return tls;
}

}  // namespace

bool per_thread_default_stream() noexcept {
  static const bool enabled = [] {
    const char* v = std::getenv("GENESIS_PER_THREAD_DEFAULT_STREAM");
    return v != nullptr && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "on") == 0);
  }();
  return enabled;
}

// --- Stream ------------------------------------------------------------------

bool Stream::is_default() const noexcept {
  return id_ == 0 || id_ == kLegacyStreamHandle || id_ == kPerThreadStreamHandle;
}

std::pair<int, int> priority_range(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "priority_range()");
  int least = 0;
  int greatest = 0;
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device);
  GENESIS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
#endif
  return {least, greatest};
}

#if GENESIS_WITH_CUDA
namespace {

// Note [Streams are recycled, never destroyed]: memory used on a stream keeps
// that stream's handle (record_stream), and cached blocks are keyed by it; the
// caching allocator records an event on the stream when such a block is
// freed, possibly long after the Stream object that made the stream is gone.
// Recording on a destroyed stream is undefined behaviour (a crash inside the
// driver, seen on the H200 when a Python test dropped its stream before its
// storage). So a created stream is never destroyed: when its last Stream
// copy goes it returns to a free list, and the next create() with the same
// device, priority and flags takes it again. PyTorch's stream pools make the
// same trade; here streams are only as many as were alive at once.
struct RecycledStream {
  cudaStream_t stream;
  int device;
  int priority;
  bool non_blocking;
};

std::mutex& recycle_mutex() {
  static auto* m = new std::mutex();  // leaked: Stream copies may die during static destruction
  return *m;
}
std::vector<RecycledStream>& recycled() {
  static auto* v = new std::vector<RecycledStream>();
  return *v;
}

cudaStream_t take_recycled_stream(int device, int priority, bool non_blocking) {
  std::lock_guard lock(recycle_mutex());
  auto& v = recycled();
  // Most recently dropped first (LIFO): its work is the most likely to be
  // cached near the blocks the new owner will reuse.
  for (auto it = v.rbegin(); it != v.rend(); ++it) {
    if (it->device == device && it->priority == priority && it->non_blocking == non_blocking) {
      cudaStream_t s = it->stream;
      v.erase(std::next(it).base());
      return s;
    }
  }
  return nullptr;
}

void recycle_stream(cudaStream_t s, int device, int priority, bool non_blocking) noexcept {
  try {
    std::lock_guard lock(recycle_mutex());
    recycled().push_back({s, device, priority, non_blocking});
  } catch (...) {
    // Out of memory for the list: keep the stream alive anyway (leaked), which
    // is always safe; destroying it is not.
  }
}

}  // namespace
#endif

Stream Stream::create(int device, int priority, bool non_blocking) {
  device = GENESIS_RESOLVE_DEVICE(device, "Stream::create()");
  const auto [least, greatest] = priority_range(device);
  GENESIS_CHECK(priority <= least && priority >= greatest, "Stream::create(): priority ", priority,
                " is outside the range of device ", device, ": from ", least, " (least urgent) to ", greatest,
                " (most urgent)");
#if GENESIS_WITH_CUDA
  cudaStream_t s = take_recycled_stream(device, priority, non_blocking);
  if (s == nullptr) {
    DeviceGuard guard(device);  // a stream belongs to the device current at creation
    GENESIS_CUDA_CHECK(cudaStreamCreateWithPriority(
        &s, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault, priority));
  }
  // If the control block cannot be allocated, shared_ptr calls the deleter.
  std::shared_ptr<void> owner(static_cast<void*>(s), [device, priority, non_blocking](void* p) noexcept {
    recycle_stream(static_cast<cudaStream_t>(p), device, priority, non_blocking);
  });
  return Stream(reinterpret_cast<StreamId>(s), device, priority, std::move(owner));
#else
  (void)non_blocking;
  return Stream();
#endif
}

Stream Stream::from_id(StreamId id) {
  if (device_count() == 0) detail::throw_cuda_unavailable("Stream::from_id()", __FILE__, __LINE__);
  int device = 0;
  int priority = 0;
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaStreamGetDevice(detail::to_cuda_stream(id), &device));
  GENESIS_CUDA_CHECK(cudaStreamGetPriority(detail::to_cuda_stream(id), &priority));
#endif
  return Stream(id, device, priority, nullptr);
}

Stream default_stream(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "default_stream()");
  return Stream(per_thread_default_stream() ? kPerThreadStreamHandle : 0, device, 0, nullptr);
}

void Stream::synchronize() const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Stream::synchronize()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  // The special handles mean "that stream of the current device".
  DeviceGuard guard(device_);
  GENESIS_CUDA_CHECK(cudaStreamSynchronize(detail::to_cuda_stream(id_)));
  raise_async_errors(device_);  // Note [Asynchronous kernel errors]
#endif
}

bool Stream::query() const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Stream::query()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device_);
  const cudaError_t err = cudaStreamQuery(detail::to_cuda_stream(id_));
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) return false;  // a status, not a failure
  detail::throw_cuda_error(static_cast<int>(err), "cudaStreamQuery(stream)", __FILE__, __LINE__);
#else
  return true;
#endif
}

void Stream::wait(const Event& event) const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Stream::wait()", __FILE__, __LINE__);
  if (!event.is_created()) return;  // never recorded: complete
#if GENESIS_WITH_CUDA
  // Cross-device waits are allowed: the event may belong to another device.
  DeviceGuard guard(device_);
  GENESIS_CUDA_CHECK(cudaStreamWaitEvent(detail::to_cuda_stream(id_), as_event(event.id()), 0));
#endif
}

// --- current stream ----------------------------------------------------------

Stream current_stream(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "current_stream()");
  CurrentStreams& tls = current_streams(device);
  if (tls.set[device]) return tls.streams[device];
  return default_stream(device);
}

void set_current_stream(const Stream& stream) {
  const int device = GENESIS_RESOLVE_DEVICE(stream.device(), "set_current_stream()");
  CurrentStreams& tls = current_streams(device);
  tls.streams[device] = stream;
  tls.set[device] = 1;
}

StreamGuard::StreamGuard(const Stream& stream) {
  const int device = GENESIS_RESOLVE_DEVICE(stream.device(), "StreamGuard");
  previous_device_ = current_device();
  previous_stream_ = current_stream(device);
  set_device(device);
  set_current_stream(stream);  // cannot fail now: the device was resolved above
}

StreamGuard::~StreamGuard() {
  // Restoring touches only the thread-local table (no CUDA call can fail for
  // it) and the current device, whose failure is swallowed as DeviceGuard does.
  try {
    set_current_stream(previous_stream_);
  } catch (...) {
  }
#if GENESIS_WITH_CUDA
  if (cudaSetDevice(previous_device_) != cudaSuccess) (void)cudaGetLastError();
#endif
}

// --- Event -------------------------------------------------------------------

Event::~Event() { destroy(); }

void Event::destroy() noexcept {
#if GENESIS_WITH_CUDA
  if (event_ != 0 && cudaEventDestroy(as_event(event_)) != cudaSuccess) (void)cudaGetLastError();
#endif
  event_ = 0;
  device_ = -1;
  recorded_ = false;
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, 0)),
      device_(std::exchange(other.device_, -1)),
      timing_(other.timing_),
      recorded_(std::exchange(other.recorded_, false)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    destroy();
    event_ = std::exchange(other.event_, 0);
    device_ = std::exchange(other.device_, -1);
    timing_ = other.timing_;
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

void Event::record(const Stream& stream) {
  const int device = GENESIS_RESOLVE_DEVICE(stream.device(), "Event::record()");
  GENESIS_CHECK(event_ == 0 || device_ == device, "Event::record(): the event belongs to device ", device_,
                " but the stream to device ", device, "; use one Event per device");
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device);  // creation and stream 0 both mean the current device
  if (event_ == 0) {
    cudaEvent_t ev = nullptr;
    GENESIS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    event_ = reinterpret_cast<std::uintptr_t>(ev);
    device_ = device;
  }
  GENESIS_CUDA_CHECK(cudaEventRecord(as_event(event_), detail::to_cuda_stream(stream.id())));
  recorded_ = true;
#endif
}

void Event::record() { record(current_stream()); }

void Event::synchronize() const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Event::synchronize()", __FILE__, __LINE__);
  if (event_ == 0) return;
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaEventSynchronize(as_event(event_)));
  if (device_ >= 0) raise_async_errors(device_);  // Note [Asynchronous kernel errors]
#endif
}

bool Event::query() const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Event::query()", __FILE__, __LINE__);
  if (event_ == 0) return true;
#if GENESIS_WITH_CUDA
  const cudaError_t err = cudaEventQuery(as_event(event_));
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) return false;
  detail::throw_cuda_error(static_cast<int>(err), "cudaEventQuery(event)", __FILE__, __LINE__);
#else
  return true;
#endif
}

float Event::elapsed_ms(const Event& end) const {
  if (device_count() == 0) detail::throw_cuda_unavailable("Event::elapsed_ms()", __FILE__, __LINE__);
  GENESIS_CHECK(timing_ && end.timing_, "Event::elapsed_ms(): both events need enable_timing = true (start ",
                timing_ ? "has" : "lacks", " it, end ", end.timing_ ? "has" : "lacks", " it)");
  GENESIS_CHECK(recorded_ && end.recorded_, "Event::elapsed_ms(): both events must have been recorded (start ",
                recorded_ ? "was" : "was not", ", end ", end.recorded_ ? "was" : "was not", ")");
  float ms = 0.0f;
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(event_), as_event(end.event_)));
#endif
  return ms;
}

}  // namespace genesis::cuda
