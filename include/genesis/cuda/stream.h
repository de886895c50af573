// Streams, events and the per-thread "current stream" (what Python's
// `with genesis.cuda.stream(s):` sets).
//
// Like runtime.h this header includes no CUDA header: a stream is carried as
// a StreamId (the cudaStream_t value), an event as a std::uintptr_t (the
// cudaEvent_t value), so code built without the toolkit can use the types.
// Without CUDA or without a GPU every call that needs the device throws
// CudaError saying why (detail::throw_cuda_unavailable).
//
// Note [Default stream]: the current stream of a thread starts as the legacy
// default stream (StreamId 0) of each device, because
//   * the caching allocator keys cached blocks by StreamId: 0 is one stream
//     shared by every thread, which is what the id says. cudaStreamPerThread
//     (handle value 2) is a *different* stream in every thread behind the
//     *same* id, so a block freed by thread A on it could be handed at once to
//     thread B's per-thread stream while A's kernels still use it;
//   * libraries linked into the same process (cuBLAS, NCCL, user kernels that
//     launch on stream 0) are implicitly ordered with the legacy stream, so
//     mixing Genesis work with theirs is safe by default;
//   * nvcc's --default-stream per-thread is a per-translation-unit choice of
//     the application, not something a library can impose.
// A process that wants per-thread default streams anyway sets the environment
// variable GENESIS_PER_THREAD_DEFAULT_STREAM=1 before its first stream call:
// default_stream() then returns cudaStreamPerThread. The caveat above then
// applies: order cross-thread reuse of memory yourself (record_stream or
// events), as with PyTorch built for per-thread default streams.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "genesis/core/stream_id.h"

namespace genesis::cuda {

class Event;

/// Passed as a device index: "the calling thread's current device".
inline constexpr int kCurrentDevice = -1;

/// A CUDA stream on one device: a value type (cheap to copy, compared by
/// handle and device). A stream made by Stream::create is owned: when the
/// last copy goes away the CUDA stream is not destroyed but kept for the next
/// create() with the same device, priority and flags (Note [Streams are
/// recycled, never destroyed] in stream.cpp: the caching allocator may still
/// record events on it). Default and wrapped external streams are not owned.
///
/// Thread safety: a Stream may be copied and used from any thread; the
/// reference count is atomic.
class Stream {
 public:
  /// The legacy default stream of device 0 without touching CUDA (so that a
  /// default-constructed Stream is cheap and never throws).
  Stream() = default;

  /// Creates a new owned stream on `device` (kCurrentDevice: the current one).
  /// `priority` follows CUDA: lower numbers run first, within
  /// priority_range(device); `non_blocking` = true makes the stream not
  /// synchronise with the legacy default stream (cudaStreamNonBlocking).
  /// Throws CudaError without a GPU, InvalidArgumentError for a device index
  /// that does not exist or a priority outside priority_range(device).
  static Stream create(int device = kCurrentDevice, int priority = 0, bool non_blocking = true);

  /// Wraps a stream made elsewhere (a library, a cudaStream_t of the caller)
  /// without taking ownership: it must outlive every use of the Stream. The
  /// device and priority are queried from CUDA (0, 1 and 2, the special
  /// handles, belong to the current device). Throws CudaError without a GPU or
  /// when the handle is not a valid stream.
  static Stream from_id(StreamId id);

  /// The handle value (the cudaStream_t); 0 for the legacy default stream.
  StreamId id() const noexcept { return id_; }
  /// The device the stream belongs to.
  int device() const noexcept { return device_; }
  /// Its priority (lower = more urgent); 0 for default streams.
  int priority() const noexcept { return priority_; }
  /// True when this is a default stream (legacy or per-thread) of its device.
  bool is_default() const noexcept;

  /// Blocks the calling thread until all work queued on the stream so far has
  /// finished. Throws CudaError if that work failed or without a GPU.
  void synchronize() const;
  /// True when all work queued so far has finished; never blocks. Throws
  /// CudaError if the work failed or without a GPU.
  bool query() const;
  /// Makes all work queued on this stream after the call wait for `event`
  /// (cudaStreamWaitEvent); returns at once. An event never recorded is
  /// complete, so waiting on it is a no-op. Throws CudaError on failure.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) noexcept {
    return a.id_ == b.id_ && a.device_ == b.device_;
  }
  friend bool operator!=(const Stream& a, const Stream& b) noexcept { return !(a == b); }

 private:
  friend Stream default_stream(int device);
  Stream(StreamId id, int device, int priority, std::shared_ptr<void> owner) noexcept
      : id_(id), device_(device), priority_(priority), owner_(std::move(owner)) {}

  StreamId id_ = 0;
  int device_ = 0;
  int priority_ = 0;
  std::shared_ptr<void> owner_;  // null unless created by create(); its deleter recycles the stream
};

/// The range of stream priorities of `device` as CUDA reports it: {least,
/// greatest}, where greatest <= least numerically (e.g. {0, -5}). Throws
/// CudaError without a GPU.
std::pair<int, int> priority_range(int device = kCurrentDevice);

/// The default stream of `device`: the legacy stream (id 0), or
/// cudaStreamPerThread when GENESIS_PER_THREAD_DEFAULT_STREAM=1 (Note
/// [Default stream]). Throws CudaError without a GPU, InvalidArgumentError
/// for a device that does not exist.
Stream default_stream(int device = kCurrentDevice);

/// True when the process uses per-thread default streams (Note [Default
/// stream]); read once from the environment. Never throws.
bool per_thread_default_stream() noexcept;

/// The calling thread's current stream on `device` (kCurrentDevice: on the
/// current device); default_stream(device) until set_current_stream or a
/// StreamGuard changes it. Throws CudaError without a GPU.
Stream current_stream(int device = kCurrentDevice);

/// Makes `stream` the calling thread's current stream on stream.device(). Does
/// not change the current device (StreamGuard does both). Throws CudaError
/// without a GPU.
void set_current_stream(const Stream& stream);

/// RAII for `with genesis.cuda.stream(s):`: makes `stream` the current stream
/// of its device AND makes that device current; the destructor restores the
/// previous current stream of that device and the previous current device.
/// Not copyable or movable; never throws from its destructor.
class StreamGuard {
 public:
  /// Throws CudaError without a GPU.
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  /// The stream that was current on stream.device() before the guard.
  const Stream& previous_stream() const noexcept { return previous_stream_; }
  /// The device that was current before the guard.
  int previous_device() const noexcept { return previous_device_; }

 private:
  Stream previous_stream_;
  int previous_device_ = 0;
};

/// A CUDA event. Created lazily by the first record(), on the recorded
/// stream's device (as PyTorch does), so an Event can be constructed anywhere
/// and costs nothing until used. Move-only: it owns the cudaEvent_t, which
/// the destructor destroys (tolerating CUDA shutting down).
///
/// Thread safety: one Event must not be recorded from two threads at once;
/// query/synchronize/elapsed_ms from several threads are fine.
class Event {
 public:
  /// `enable_timing` = false makes record and query cheaper
  /// (cudaEventDisableTiming); elapsed_ms then throws. Never throws.
  explicit Event(bool enable_timing = false) noexcept : timing_(enable_timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Records the event on `stream` (creating it on stream.device() the first
  /// time). Returns at once. Throws CudaError without a GPU or on failure,
  /// InvalidArgumentError when the event already belongs to another device.
  void record(const Stream& stream);
  /// Records on current_stream().
  void record();

  /// Blocks until the work captured by the last record() has finished; no-op
  /// for an event never recorded. Throws CudaError if that work failed.
  void synchronize() const;
  /// True when the captured work has finished (true if never recorded);
  /// never blocks. Throws CudaError if the work failed.
  bool query() const;
  /// Milliseconds between this event and `end` (both recorded, both with
  /// timing enabled, both complete; resolution about 0.5 us). Throws
  /// InvalidArgumentError when a condition does not hold or CudaError when
  /// CUDA refuses (e.g. cudaErrorNotReady: synchronize `end` first).
  float elapsed_ms(const Event& end) const;

  bool is_created() const noexcept { return event_ != 0; }
  bool timing_enabled() const noexcept { return timing_; }
  /// The device the event was created on; -1 before the first record().
  int device() const noexcept { return device_; }
  /// The cudaEvent_t value; 0 before the first record().
  std::uintptr_t id() const noexcept { return event_; }

 private:
  void destroy() noexcept;

  std::uintptr_t event_ = 0;
  int device_ = -1;
  bool timing_ = false;
  bool recorded_ = false;
};

}  // namespace genesis::cuda
