// CudaDeviceResource: device memory from cudaMalloc as an upstream resource.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <map>

#include "genesis/cuda/event_pool.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// Device memory of one GPU from cudaMalloc / cudaFree, each called with the
/// resource's device current (the caller's current device is restored).
///
/// allocate() returns nullptr on cudaErrorMemoryAllocation (after clearing
/// that error) so that the caching allocator can free its cache and retry;
/// it throws InvalidArgumentError for bytes == 0 and CudaError for any other
/// failure. Events are real CUDA events of this device, from an EventPool.
///
/// Thread safety: all member functions may be called concurrently.
class CudaDeviceResource final : public UpstreamResource {
 public:
  /// Throws InvalidArgumentError when `device` is not a CUDA device of this
  /// machine (including any device when there is no GPU or no CUDA).
  explicit CudaDeviceResource(int device);
  /// Whether a resource for `device` maps pages (supports_virtual_memory):
  /// the driver offers virtual memory management there and GENESIS_NO_VMM
  /// is not 1. Never throws.
  static bool maps_pages(int device) noexcept;
  ~CudaDeviceResource() override;

  MemoryKind kind() const noexcept override { return MemoryKind::kDevice; }
  Device device() const noexcept override { return Device(DeviceType::kCUDA, device_); }
  /// "cuda:N".
  std::string name() const override;
  /// cudaMemGetInfo for this device. Throws CudaError.
  MemInfo mem_info() const override;

  /// Records an event on `stream` (a cudaStream_t of this device; 0 = its
  /// legacy default stream). Throws CudaError.
  EventId record_event(StreamId stream) override;
  /// cudaEventQuery; throws CudaError if the recorded work failed.
  bool event_done(EventId event) override;
  /// cudaEventSynchronize; throws CudaError if the recorded work failed.
  void wait_event(EventId event) override;
  void stream_wait_event(StreamId stream, EventId event) override;
  bool stream_idle(StreamId stream) override;
  /// Returns the event to the pool. Never throws.
  void release_event(EventId event) noexcept override;
  /// Events recorded and not yet released (for leak checks).
  std::size_t outstanding_events() const { return events_.outstanding(); }

  /// The CUDA device index.
  int device_index() const noexcept { return device_; }

  /// cudaStreamSynchronize. Throws CudaError.
  void synchronize_stream(StreamId stream) override;

  // Virtual memory through the driver's VMM API (genesis/cuda/vmm.h): one
  // physical allocation per chunk, unmapped whole: the driver's cost is per
  // allocation, not per byte (Note [Physical chunks]). unmap_pages releases
  // the chunks wholly inside its range; a chunk it would cut is left mapped
  // (the allocator never asks for that).
  bool supports_virtual_memory() const noexcept override { return vmm_; }
  std::size_t page_size() const noexcept override { return page_size_; }
  std::uintptr_t reserve_address_range(std::size_t bytes) override;
  void release_address_range(std::uintptr_t addr, std::size_t bytes) noexcept override;
  bool map_pages(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) override;
  void unmap_pages(std::uintptr_t addr, std::size_t bytes) noexcept override;

 private:
  void* do_allocate(std::size_t bytes) override;
  void do_deallocate(void* ptr, std::size_t bytes) noexcept override;

  const int device_;
  cuda::EventPool events_;
  bool vmm_ = false;
  std::size_t page_size_ = std::size_t{2} << 20;
  std::size_t total_bytes_ = 0;  // the device's memory: no single allocation can exceed it
  std::mutex vmm_mutex_;
  struct Chunk {
    unsigned long long handle = 0;
    std::size_t bytes = 0;
  };
  std::map<std::uintptr_t, Chunk> chunks_;  // chunk address -> physical handle (ordered: unmap walks a range)
};

}  // namespace genesis::memory
