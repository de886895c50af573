// EventPool: reusable CUDA events for stream-ordered reuse of memory blocks.
//
// The caching allocator records an event each time a block used on a foreign
// stream is freed (see Note [Upstream layering]); creating and destroying a
// cudaEvent_t each time would cost a driver round trip per free. The pool
// keeps released events, per device, for the next record().
//
// Handles are std::uintptr_t so that this header needs no CUDA header; they
// are the values that StreamId / EventId (genesis/core/stream_id.h) carry: a
// stream handle is the cudaStream_t value, 0 = the legacy default stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace genesis::cuda {

/// A mutex-protected pool of CUDA events (created with cudaEventDisableTiming,
/// which makes record and query cheaper).
///
/// Thread safety: every member function may be called from any thread. An
/// event handle must not be used after release().
class EventPool {
 public:
  EventPool() = default;
  /// Destroys every event the pool created, released or not. Tolerates CUDA
  /// shutting down (cudaErrorCudartUnloading is ignored); never throws.
  ~EventPool();

  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  /// Takes an event of `device` from the pool (creating one if none is free)
  /// and records it on `stream`, which must belong to `device`. Throws
  /// CudaError when CUDA is unavailable or the runtime call fails (the event
  /// then goes back to the pool).
  std::uintptr_t record(int device, std::uintptr_t stream);

  /// The device of `stream` (cudaStreamGetDevice; for 0, the legacy default
  /// stream, the calling thread's current device). Throws CudaError.
  static int stream_device(std::uintptr_t stream);

  /// True once the work captured by the event has finished; never blocks.
  /// Throws CudaError when the work failed, InvalidArgumentError for a
  /// released event.
  bool query(std::uintptr_t event);

  /// Blocks until the event's work has finished. Throws like query().
  void synchronize(std::uintptr_t event);

  /// Makes later work on `stream` (of `device`) wait until the event's work
  /// has finished, without blocking the host. The event may be released or
  /// recorded again right after: the wait captured it. Throws like query().
  void wait(std::uintptr_t event, int device, std::uintptr_t stream);

  /// Returns an event to the pool. Never throws; releasing 0 or an already
  /// released event does nothing.
  void release(std::uintptr_t event) noexcept;

  /// Events handed out by record() and not yet released.
  std::size_t outstanding() const;
  /// Events waiting in the pool for reuse.
  std::size_t pooled() const;

 private:
  struct Slot {
    void* event = nullptr;  // cudaEvent_t
    int device = 0;
    bool in_use = false;
  };

  Slot* acquire(int device);
  Slot* checked_slot(std::uintptr_t event, const char* what) const;

  struct DeviceSlots {
    std::vector<Slot*> free;
    std::size_t created = 0;
  };

  mutable std::mutex mutex_;
  // Invariants: slots_ owns every slot ever created; a slot is either in_use
  // (handed out) or listed exactly once in devices_[slot->device].free;
  // devices_[d].free.capacity() >= devices_[d].created, so release() never
  // allocates; outstanding_ == number of in_use slots.
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<DeviceSlots> devices_;  // indexed by device
  std::size_t outstanding_ = 0;
};

}  // namespace genesis::cuda
