// Upstream resources: where a caching allocator gets its segments from.
//
// Note [Upstream layering]: memory in Genesis is a stack of layers.
// At the bottom an UpstreamResource talks to the platform (cudaMalloc,
// cudaHostAlloc, aligned host memory, or a simulated GPU that hands out
// addresses without touching memory). Above it the device-agnostic
// CachingAllocator keeps freed blocks for reuse. The caching algorithm only
// ever sees this interface, so every line of it runs in CI on the simulated
// device exactly as it runs on an H100.
//
// An upstream also owns the notion of "streams" and "events" for its memory:
// the caching allocator asks it to record an event on a stream when a block
// was used on a stream other than the one it was allocated on, and reuses the
// block only once every such event has completed (record_stream semantics).
// Host memory has no streams: its events are complete at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "genesis/core/device.h"
#include "genesis/core/stream_id.h"

namespace genesis::memory {

/// Stream and event handles are core values (genesis/core/stream_id.h); an
/// upstream's events are the ones UpstreamResource::record_event returns.
using ::genesis::EventId;
using ::genesis::StreamId;

/// What kind of memory an upstream hands out.
enum class MemoryKind : std::uint8_t {
  kDevice,      ///< GPU memory (real CUDA or simulated)
  kPinnedHost,  ///< page-locked host memory usable by DMA
  kHost,        ///< ordinary pageable host memory
};

const char* memory_kind_name(MemoryKind kind) noexcept;

/// Free and total bytes of the memory an upstream draws from.
struct MemInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

/// Interface of every upstream resource. Public non-virtual entry points call
/// private virtual hooks (the RMM pattern) so that checks live in one place.
///
/// Thread safety: implementations must be safe to call from several threads.
class UpstreamResource {
 public:
  virtual ~UpstreamResource() = default;
  UpstreamResource() = default;
  UpstreamResource(const UpstreamResource&) = delete;
  UpstreamResource& operator=(const UpstreamResource&) = delete;

  /// Allocates `bytes` (> 0) aligned to at least alignment(). Returns nullptr
  /// when the memory is exhausted (the caching allocator then frees its cache
  /// and retries); throws CudaError / InvalidArgumentError for other failures.
  void* allocate(std::size_t bytes) { return do_allocate(bytes); }

  /// Returns memory obtained from allocate() with the same size. Never throws:
  /// destructors call it, possibly while CUDA is shutting down.
  void deallocate(void* ptr, std::size_t bytes) noexcept { do_deallocate(ptr, bytes); }

  virtual MemoryKind kind() const noexcept = 0;
  /// The device whose memory this is (CPU for host and pinned memory).
  virtual Device device() const noexcept = 0;
  /// A short name for messages and reports: "cuda:0", "pinned", "host", "sim:0".
  virtual std::string name() const = 0;
  /// Free and total bytes as the platform reports them.
  virtual MemInfo mem_info() const = 0;
  /// Guaranteed alignment of allocate() results; a power of two >= 512.
  virtual std::size_t alignment() const noexcept { return 512; }
  /// True when running out of this memory is a "CUDA OOM" for users.
  bool is_cuda() const noexcept { return device().is_cuda(); }

  // --- streams and events (see Note [Upstream layering]) -------------------
  /// Records an event on `stream` after the work queued so far.
  virtual EventId record_event(StreamId stream) { (void)stream; return 0; }
  /// True once the event's work has completed. Must not block.
  virtual bool event_done(EventId event) { (void)event; return true; }
  /// Blocks until the event has completed.
  virtual void wait_event(EventId event) { (void)event; }
  /// Makes work queued on `stream` from now on wait until the event's work
  /// has completed. Upstreams whose streams can wait on the device override
  /// it; waiting on the host first is always correct, and is the default.
  virtual void stream_wait_event(StreamId stream, EventId event) { (void)stream; wait_event(event); }
  /// Gives an event back (after it completed or when the allocator shuts down).
  virtual void release_event(EventId event) noexcept { (void)event; }
  /// Blocks until the work queued on `stream` so far has completed (used
  /// before unmapping pages, which is not stream-ordered).
  virtual void synchronize_stream(StreamId stream) { (void)stream; }
  /// True if the work queued on `stream` so far has completed. Must not
  /// block. The default asks an event recorded now, which is exact where
  /// events complete as soon as the work before them has (the simulated
  /// device); a CUDA event needs the device to reach it, so CUDA upstreams
  /// ask the stream.
  virtual bool stream_idle(StreamId stream) {
    const EventId e = record_event(stream);
    bool done = false;
    try {
      done = event_done(e);
    } catch (...) {
      release_event(e);
      throw;
    }
    release_event(e);
    return done;
  }

  // --- virtual memory (Note [Expandable segments]) --------------------------
  // An upstream that supports it lets the allocator reserve address ranges
  // without memory behind them and map / unmap physical pages inside them.
  /// True when the calls below work.
  virtual bool supports_virtual_memory() const noexcept { return false; }
  /// True when mapping a page costs about as little as a pool operation, so
  /// that expandable segments are the better default (Expandable::kAuto).
  /// False on CUDA: each physical page costs the driver ~30 us to map there (measured
  /// on an H200, 2026-11-21), which a training loop amortises but an
  /// allocation-heavy program with ever-new sizes does not; it opts in.
  /// (A SimulatedDevice given CUDA's costs, SimulatedDevice::VmmCost, says
  /// false as well, so that it behaves like CUDA.)
  virtual bool cheap_page_mapping() const noexcept { return false; }
  /// Granularity of map_pages / unmap_pages (2 MiB on current GPUs).
  virtual std::size_t page_size() const noexcept { return std::size_t{2} << 20; }
  /// Reserves `bytes` (a multiple of page_size()) of address space; 0 if
  /// impossible.
  virtual std::uintptr_t reserve_address_range(std::size_t bytes) { (void)bytes; return 0; }
  /// Releases a range from reserve_address_range (all pages unmapped first).
  virtual void release_address_range(std::uintptr_t addr, std::size_t bytes) noexcept { (void)addr; (void)bytes; }
  /// Backs [addr, addr + bytes) (page aligned, inside a reserved range, not
  /// mapped yet) with physical memory, as chunks of `chunk` bytes (a multiple
  /// of page_size() that divides `bytes`): each chunk is one physical
  /// allocation (a handle on CUDA, whose driver costs are per handle, not
  /// per byte) and can only be unmapped whole. Returns false when the memory
  /// is exhausted (nothing stays mapped then); throws for other failures.
  virtual bool map_pages(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) {
    (void)addr, (void)bytes, (void)chunk;
    return false;
  }
  /// Unmaps and frees the physical memory of the chunks in a mapped
  /// page-aligned range; the range must not cut a chunk.
  virtual void unmap_pages(std::uintptr_t addr, std::size_t bytes) noexcept { (void)addr; (void)bytes; }

 private:
  virtual void* do_allocate(std::size_t bytes) = 0;
  virtual void do_deallocate(void* ptr, std::size_t bytes) noexcept = 0;
};

}  // namespace genesis::memory
