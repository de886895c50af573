// SimulatedDevice: a fake GPU for tests, the replay tool and CI machines
// without a GPU (see Note [Upstream layering]).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// A fake GPU of `capacity_bytes` that hands out addresses from a virtual
/// range without touching memory: the pointers it returns must never be
/// dereferenced. Everything it does is deterministic, so a trace replayed
/// through it always gives the same addresses and the same failures.
///
/// Address space: [base_address(), base_address() + capacity), with
/// base_address() = kBaseAddress + index * kAddressSpan. Requests are rounded
/// up to 512 bytes; results are 512-aligned, and 2 MiB-aligned for requests of
/// 2 MiB or more (as cudaMalloc does). Free ranges are kept coalesced and
/// chosen best-fit (smallest range that fits, lowest address on a tie).
/// allocate() returns nullptr when the rounded bytes in use would exceed the
/// capacity, when no contiguous free range fits (fragmentation), or when a
/// failure was injected with fail_next_allocations(); it throws
/// InvalidArgumentError for bytes == 0.
///
/// Streams and events model stream ordering without a GPU: each stream has a
/// count of submitted and of completed work; an event captures the submitted
/// count ("ticket") when recorded and is done once completed >= ticket.
///
/// device() is the CPU: UpstreamResource::is_cuda() must stay false so that
/// exhaustion is not reported as a real "CUDA OOM"; kind() is kDevice.
///
/// Thread safety: every member function may be called concurrently (one
/// mutex guards all state; this is a test double, not a fast path).
class SimulatedDevice final : public UpstreamResource {
 public:
  /// Far above the heap and below where Linux places mmap regions and
  /// stacks (0x7f.. with ASLR), so no real pointer of a normal process falls
  /// into a simulated range; see the source for why not 0x7e00'0000'0000.
  static constexpr std::uintptr_t kBaseAddress = 0x6000'0000'0000;
  /// Each index gets its own 1 TiB span, so simulated devices never overlap.
  static constexpr std::uintptr_t kAddressSpan = std::uintptr_t{1} << 40;
  /// Valid indices are 0 .. kMaxIndex.
  static constexpr int kMaxIndex = 15;
  static constexpr std::size_t kAlignment = 512;
  static constexpr std::size_t kLargeAlignment = std::size_t{2} << 20;

  /// What virtual-memory calls cost (Note [Simulated mapping costs]): the
  /// device spins for this long per chunk (one physical handle, as
  /// CudaDeviceResource maps them), so that the allocator's behaviour on a
  /// real GPU can be timed on a CPU. Zero (the default): free, as before.
  struct VmmCost {
    std::chrono::nanoseconds map{0};         ///< per chunk: cuMemCreate + cuMemMap
    std::chrono::nanoseconds set_access{0};  ///< per chunk: cuMemSetAccess
    std::chrono::nanoseconds unmap{0};       ///< per chunk: cuMemUnmap + cuMemRelease
    bool any() const noexcept { return map.count() > 0 || set_access.count() > 0 || unmap.count() > 0; }
    /// Measured per 2 MiB chunk on an H200 (bench/RESULTS.md, vmm_bench,
    /// 2026-11-21): 7.32 us create+map, 21.74 us set_access, 21.59 us unmap+release.
    static VmmCost cuda();
    /// "none", "cuda", or "MAP,SET_ACCESS,UNMAP" in microseconds per chunk
    /// (e.g. "7.3,21.7,21.6"). Throws InvalidArgumentError otherwise.
    static VmmCost parse(std::string_view text);
  };

  /// Throws InvalidArgumentError unless 0 < capacity_bytes <= kAddressSpan and
  /// 0 <= index <= kMaxIndex.
  explicit SimulatedDevice(std::size_t capacity_bytes, int index = 0);
  SimulatedDevice(std::size_t capacity_bytes, int index, VmmCost vmm_cost);

  MemoryKind kind() const noexcept override { return MemoryKind::kDevice; }
  Device device() const noexcept override { return Device(DeviceType::kCPU); }
  /// "sim:<index>".
  std::string name() const override;
  /// {capacity - bytes_in_use, capacity}.
  MemInfo mem_info() const override;
  std::size_t alignment() const noexcept override { return kAlignment; }

  // --- streams and events -------------------------------------------------
  /// Creates a stream and returns its id: 1, 2, ... (0, the default stream,
  /// always exists). Never fails short of std::bad_alloc.
  StreamId create_stream();
  /// Models launching a kernel on `stream`: one more unit of submitted work.
  /// Returns the new submitted count. Throws InvalidArgumentError for an
  /// unknown stream.
  std::uint64_t submit_work(StreamId stream);
  /// Completes all work submitted to `stream` so far. Throws like submit_work.
  void complete_work(StreamId stream);
  /// Completes all work on every stream.
  void complete_all();
  /// Work units submitted to / completed on `stream`. Throw like submit_work.
  std::uint64_t submitted_work(StreamId stream) const;
  std::uint64_t completed_work(StreamId stream) const;

  /// Captures (stream, submitted work) and returns a new event id (never 0).
  /// Throws InvalidArgumentError for an unknown stream.
  EventId record_event(StreamId stream) override;
  /// completed(stream) >= ticket. Throws InvalidArgumentError for an event that
  /// was never recorded or was already released.
  bool event_done(EventId event) override;
  /// Models cudaEventSynchronize: completes the event's stream up to its
  /// ticket (later work on that stream stays pending). Throws like event_done.
  void wait_event(EventId event) override;
  /// Forgets the event. Never throws; an unknown event counts as a misuse.
  void release_event(EventId event) noexcept override;
  /// Events recorded and not yet released (tests check that none leak).
  std::size_t outstanding_events() const;

  /// Models cudaStreamSynchronize: completes the stream's work. Counted:
  /// on a GPU each one stalls the host until the stream drains.
  void synchronize_stream(StreamId stream) override;
  std::size_t num_stream_syncs() const;

  // --- virtual memory (models cuMemAddressReserve / cuMemCreate+Map / Unmap) -
  // Reserved ranges come from their own 4 TiB span per index, below the
  // allocate() span (all 16 spans end at 0x5000'0000'0000, under both it
  // and the executable's heap); mapped pages count against the capacity
  // together with allocate()d bytes, as physical memory does on a GPU.
  static constexpr std::uintptr_t kVirtualBase = 0x1000'0000'0000;
  static constexpr std::uintptr_t kVirtualSpan = std::uintptr_t{1} << 42;
  static_assert(kVirtualBase + (kMaxIndex + 1) * kVirtualSpan <= kBaseAddress,
                "the reserved-range spans of every index lie below the allocate() spans");
  static constexpr std::size_t kPageSize = std::size_t{2} << 20;
  bool supports_virtual_memory() const noexcept override { return true; }
  /// True unless a VmmCost makes mapping as slow as on CUDA (then
  /// Expandable::kAuto picks classic segments, as it does on CUDA).
  bool cheap_page_mapping() const noexcept override { return !vmm_cost_.any(); }
  const VmmCost& vmm_cost() const noexcept { return vmm_cost_; }
  std::size_t page_size() const noexcept override { return kPageSize; }
  /// Returns 0 when `bytes` is not a positive multiple of the page size or the
  /// span is exhausted.
  std::uintptr_t reserve_address_range(std::size_t bytes) override;
  void release_address_range(std::uintptr_t addr, std::size_t bytes) noexcept override;
  /// Maps the range as chunks of `chunk` bytes. False (nothing mapped) when
  /// capacity would be exceeded or a failure was injected. Throws
  /// InvalidArgumentError for a range that is not page aligned, not inside
  /// one reserved range, or already (partly) mapped, or for a chunk size
  /// that is not a multiple of the page size dividing `bytes`.
  bool map_pages(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) override;
  /// Unmaps every chunk in the range. Unmapping pages that are not mapped,
  /// or part of a chunk (CUDA cannot), counts as a misuse; the pages named
  /// are unmapped all the same, and what is left of a cut chunk becomes a
  /// chunk of its own.
  void unmap_pages(std::uintptr_t addr, std::size_t bytes) noexcept override;
  /// Bytes of mapped pages (included in bytes_in_use()).
  std::size_t mapped_bytes() const;
  std::size_t num_map_calls() const;
  std::size_t num_unmap_calls() const;
  /// Pages mapped / unmapped so far.
  std::size_t num_pages_mapped() const;
  std::size_t num_pages_unmapped() const;
  /// Chunks (physical handles on CUDA) mapped / unmapped so far.
  std::size_t num_chunks_mapped() const;
  std::size_t num_chunks_unmapped() const;
  std::size_t num_reserved_ranges() const;

  // --- failure injection --------------------------------------------------
  /// The next `n` allocate() calls return nullptr (replacing any previous
  /// count), as if the device were out of memory.
  void fail_next_allocations(std::size_t n);

  // --- counters (read by tests and the replay tool) -------------------------
  std::size_t capacity() const noexcept { return capacity_; }
  int index() const noexcept { return index_; }
  std::uintptr_t base_address() const noexcept { return base_; }
  /// Successful allocate() calls.
  std::size_t num_allocs() const;
  /// deallocate() calls that freed a live allocation.
  std::size_t num_frees() const;
  /// allocate() calls that returned nullptr (capacity, fragmentation, injected).
  std::size_t num_failed_allocs() const;
  /// Bytes of live allocations, each rounded up to 512 (what they occupy).
  std::size_t bytes_in_use() const;
  /// Highest bytes_in_use() since construction or reset_peak().
  std::size_t peak_bytes_in_use() const;
  void reset_peak();
  /// Number of live allocations.
  std::size_t num_live_allocations() const;
  /// Size of the largest contiguous free range, and the number of free ranges
  /// (1 when nothing is allocated: frees coalesce).
  std::size_t largest_free_range() const;
  std::size_t num_free_ranges() const;
  /// Deallocations of unknown pointers or with a size other than the one
  /// allocated, and releases of unknown events. Such calls cannot throw (they
  /// are noexcept), so they are counted here; tests expect 0.
  std::size_t num_misuses() const;
  /// True when `ptr` lies inside this device's address range.
  bool owns(const void* ptr) const noexcept;

 private:
  void* do_allocate(std::size_t bytes) override;
  void do_deallocate(void* ptr, std::size_t bytes) noexcept override;

  struct Live {
    std::size_t requested;  // bytes passed to allocate()
    std::size_t size;       // requested rounded up to kAlignment
  };
  struct Stream {
    std::uint64_t submitted = 0;
    std::uint64_t completed = 0;  // completed <= submitted
  };
  struct Event {
    StreamId stream;
    std::uint64_t ticket;
  };

  // The work of map_pages / unmap_pages under mutex_, without the cost model.
  bool map_pages_locked(std::uintptr_t addr, std::size_t bytes, std::size_t chunk);
  std::size_t unmap_pages_locked(std::uintptr_t addr, std::size_t bytes) noexcept;  // pages unmapped

  // Caller holds mutex_.
  std::uintptr_t take_range(std::size_t size, std::size_t align);
  void add_free_range(std::uintptr_t addr, std::size_t size);
  void remove_free_range(std::map<std::uintptr_t, std::size_t>::iterator it);
  Stream& stream_locked(StreamId stream);
  const Stream& stream_locked(StreamId stream) const;
  Event& event_locked(EventId event, const char* what);

  const std::size_t capacity_;
  const int index_;
  const VmmCost vmm_cost_;
  const std::uintptr_t base_;

  mutable std::mutex mutex_;
  // Invariants (under mutex_):
  //   free_by_addr_ and free_by_size_ hold the same ranges; no two free ranges
  //   touch (coalesced); free ranges and live_ ranges tile
  //   [base_, base_ + capacity_ rounded down to 512) without overlap;
  //   bytes_in_use_ == sum of live_[*].size <= capacity_;
  //   peak_bytes_in_use_ >= bytes_in_use_.
  std::map<std::uintptr_t, std::size_t> free_by_addr_;             // address -> size
  std::set<std::pair<std::size_t, std::uintptr_t>> free_by_size_;  // (size, address)
  std::unordered_map<std::uintptr_t, Live> live_;
  std::size_t bytes_in_use_ = 0;
  std::size_t peak_bytes_in_use_ = 0;
  std::size_t num_allocs_ = 0;
  std::size_t num_frees_ = 0;
  std::size_t num_failed_allocs_ = 0;
  std::size_t num_misuses_ = 0;
  std::size_t fail_next_ = 0;

  // Virtual memory (under mutex_): reserved ranges with a flag per page;
  // mapped_bytes_ == kPageSize * (number of flags set).
  struct Range {
    std::size_t size = 0;
    std::vector<std::uint8_t> mapped;  // one flag per page
    std::vector<std::uint8_t> head;    // page begins a chunk (same length)
  };
  std::map<std::uintptr_t, Range> ranges_;
  // The reserved range holding [addr, addr + bytes), or null.
  Range* range_locked(std::uintptr_t addr, std::size_t bytes, std::uintptr_t* base);
  std::uintptr_t next_virtual_ = 0;
  std::size_t mapped_bytes_ = 0;
  std::size_t num_map_calls_ = 0;
  std::size_t num_unmap_calls_ = 0;
  std::size_t num_pages_mapped_ = 0;
  std::size_t num_pages_unmapped_ = 0;
  std::size_t num_chunks_mapped_ = 0;
  std::size_t num_chunks_unmapped_ = 0;
  std::size_t num_stream_syncs_ = 0;

  std::vector<Stream> streams_{1};  // index = StreamId; 0 is the default stream
  std::unordered_map<EventId, Event> events_;
  EventId next_event_ = 1;
};

}  // namespace genesis::memory
