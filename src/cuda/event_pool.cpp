#include "genesis/cuda/event_pool.h"

#include <algorithm>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {

#if GENESIS_WITH_CUDA
namespace {
cudaEvent_t as_event(void* e) noexcept { return static_cast<cudaEvent_t>(e); }
}  // namespace
#endif

EventPool::~EventPool() {
#if GENESIS_WITH_CUDA
  for (auto& slot : slots_) {
    // At process exit the runtime may already be unloading
    // (cudaErrorCudartUnloading) or the context gone; the events die with it.
    if (slot->event != nullptr && cudaEventDestroy(as_event(slot->event)) != cudaSuccess)
      (void)cudaGetLastError();
  }
#endif
}

EventPool::Slot* EventPool::acquire(int device) {
  GENESIS_CHECK(device >= 0, "EventPool: invalid device index ", device);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<std::size_t>(device) < devices_.size() && !devices_[device].free.empty()) {
      Slot* slot = devices_[device].free.back();
      devices_[device].free.pop_back();
      slot->in_use = true;
      ++outstanding_;
      return slot;
    }
  }
  // Slow path: create the event outside the lock, so that a driver call does
  // not serialise other threads' records of already pooled events.
#if GENESIS_WITH_CUDA
  cudaEvent_t ev = nullptr;
  {
    DeviceGuard guard(device);  // an event belongs to the device current at creation
    GENESIS_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    if (devices_.size() <= static_cast<std::size_t>(device)) devices_.resize(device + 1);
    DeviceSlots& d = devices_[device];
    // Reserve now (growing geometrically) so that release() can push back
    // without allocating.
    if (d.free.capacity() < d.created + 1)
      d.free.reserve(std::max<std::size_t>({2 * d.free.capacity(), d.created + 1, 8}));
    slots_.push_back(std::make_unique<Slot>());  // strong guarantee: nothing added on failure
  } catch (...) {
    if (cudaEventDestroy(ev) != cudaSuccess) (void)cudaGetLastError();
    throw;
  }
  ++devices_[device].created;
  Slot* slot = slots_.back().get();
  slot->event = ev;
  slot->device = device;
  slot->in_use = true;
  ++outstanding_;
  return slot;
#else
  detail::throw_cuda_unavailable("recording a CUDA event", __FILE__, __LINE__);
#endif
}

std::uintptr_t EventPool::record(int device, std::uintptr_t stream) {
  if (device_count() == 0) detail::throw_cuda_unavailable("recording a CUDA event", __FILE__, __LINE__);
  Slot* slot = acquire(device);
#if GENESIS_WITH_CUDA
  cudaError_t err = cudaSuccess;
  {
    // Stream 0 means "the legacy default stream of the current device", so the
    // event's device has to be current while recording.
    DeviceGuard guard(device, std::nothrow);
    err = cudaEventRecord(as_event(slot->event), detail::to_cuda_stream(stream));
  }
  if (err != cudaSuccess) {
    release(reinterpret_cast<std::uintptr_t>(slot));
    detail::throw_cuda_error(static_cast<int>(err), "cudaEventRecord(event, stream)", __FILE__, __LINE__);
  }
#else
  (void)stream;
#endif
  return reinterpret_cast<std::uintptr_t>(slot);
}

int EventPool::stream_device(std::uintptr_t stream) {
  if (device_count() == 0) detail::throw_cuda_unavailable("querying a stream's device", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  int device = 0;
  GENESIS_CUDA_CHECK(cudaStreamGetDevice(detail::to_cuda_stream(stream), &device));
  return device;
#else
  (void)stream;
  return 0;
#endif
}

EventPool::Slot* EventPool::checked_slot(std::uintptr_t event, const char* what) const {
  auto* slot = reinterpret_cast<Slot*>(event);
  std::lock_guard<std::mutex> lock(mutex_);
  // Best effort: a released slot may already be handed out again, in which
  // case a stale handle aliases the new event (same as a stale cudaEvent_t).
  GENESIS_CHECK(slot != nullptr && slot->in_use, "EventPool::", what, ": event ", event,
                " was not recorded by this pool or was already released");
  return slot;
}

bool EventPool::query(std::uintptr_t event) {
  Slot* slot = checked_slot(event, "query");
#if GENESIS_WITH_CUDA
  const cudaError_t err = cudaEventQuery(as_event(slot->event));
  if (err == cudaSuccess) return true;
  // cudaErrorNotReady is a status, not a failure; it does not set the last error.
  if (err == cudaErrorNotReady) return false;
  detail::throw_cuda_error(static_cast<int>(err), "cudaEventQuery(event)", __FILE__, __LINE__);
#else
  (void)slot;
  return true;
#endif
}

void EventPool::synchronize(std::uintptr_t event) {
  Slot* slot = checked_slot(event, "synchronize");
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaEventSynchronize(as_event(slot->event)));
#else
  (void)slot;
#endif
}

void EventPool::wait(std::uintptr_t event, int device, std::uintptr_t stream) {
  Slot* slot = checked_slot(event, "wait");
#if GENESIS_WITH_CUDA
  DeviceGuard guard(device);  // stream 0 is the legacy stream of the current device
  GENESIS_CUDA_CHECK(cudaStreamWaitEvent(detail::to_cuda_stream(stream), as_event(slot->event), 0));
#else
  (void)slot;
  (void)device;
  (void)stream;
#endif
}

void EventPool::release(std::uintptr_t event) noexcept {
  if (event == 0) return;
  auto* slot = reinterpret_cast<Slot*>(event);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!slot->in_use) return;
  slot->in_use = false;
  --outstanding_;
  devices_[slot->device].free.push_back(slot);  // capacity reserved in acquire()
}

std::size_t EventPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return outstanding_;
}

std::size_t EventPool::pooled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const auto& d : devices_) n += d.free.size();
  return n;
}

}  // namespace genesis::cuda
