// PinnedHostResource: page-locked host memory (cudaHostAlloc) as an upstream.
#pragma once

#include <cstddef>
#include <string>

#include "genesis/cuda/event_pool.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// Page-locked ("pinned") host memory from cudaHostAlloc with
/// cudaHostAllocPortable, so that copies from any device can use it for DMA
/// and run asynchronously on streams.
///
/// Because async copies keep using a pinned block after the host code freed
/// it, events are real CUDA events: record_event(stream) records a pooled
/// event on the stream (whose device is asked from the runtime), event_done
/// queries it, wait_event synchronizes on it.
///
/// allocate() returns nullptr when the system cannot pin more memory, throws
/// InvalidArgumentError for bytes == 0 and CudaError for other failures.
/// Thread safety: all member functions may be called concurrently.
class PinnedHostResource final : public UpstreamResource {
 public:
  /// Throws InvalidArgumentError when Genesis was built without CUDA or the
  /// machine has no usable GPU (pinning needs a CUDA context).
  PinnedHostResource();
  ~PinnedHostResource() override = default;

  MemoryKind kind() const noexcept override { return MemoryKind::kPinnedHost; }
  Device device() const noexcept override { return Device(DeviceType::kCPU); }
  std::string name() const override { return "pinned"; }
  /// Host memory figures (MemAvailable / MemTotal): pinned pages come out of
  /// physical RAM. Never throws.
  MemInfo mem_info() const override;

  /// Records a CUDA event on `stream` (a cudaStream_t value, 0 = legacy
  /// default stream of the current device). Throws CudaError.
  EventId record_event(StreamId stream) override;
  /// cudaEventQuery; throws CudaError if the recorded work failed.
  bool event_done(EventId event) override;
  /// cudaEventSynchronize; throws CudaError if the recorded work failed.
  void wait_event(EventId event) override;
  bool stream_idle(StreamId stream) override;
  /// Returns the event to the pool. Never throws.
  void release_event(EventId event) noexcept override;
  /// Events recorded and not yet released (for leak checks).
  std::size_t outstanding_events() const { return events_.outstanding(); }

  /// True when `ptr` points into page-locked host memory that CUDA knows
  /// about (cudaHostAlloc'd or cudaHostRegister'ed). False without CUDA or a
  /// GPU, and for nullptr. Never throws; thread-safe.
  static bool is_pinned(const void* ptr) noexcept;

 private:
  void* do_allocate(std::size_t bytes) override;
  void do_deallocate(void* ptr, std::size_t bytes) noexcept override;

  cuda::EventPool events_;
};

}  // namespace genesis::memory
