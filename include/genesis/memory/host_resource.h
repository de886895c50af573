// HostResource: ordinary pageable host memory as an upstream resource.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// Pageable host memory, 512-byte aligned (the same alignment as device
/// blocks, so that the caching allocator's size classes line up).
///
/// Requests below kMmapThreshold come from the C heap (aligned_alloc); larger
/// ones are mapped directly with mmap, see Note [Host mmap] in the source.
/// allocate() returns nullptr when the system refuses or when the optional
/// capacity limit would be exceeded; it throws InvalidArgumentError for
/// bytes == 0. Events are complete at once (host memory has no streams).
///
/// Thread safety: all member functions may be called concurrently.
class HostResource final : public UpstreamResource {
 public:
  /// Requests of at least this many bytes are served by mmap.
  static constexpr std::size_t kMmapThreshold = std::size_t{2} << 20;
  static constexpr std::size_t kAlignment = 512;

  /// `capacity_limit` caps the bytes in use at once (0 = no limit), so that
  /// tests can make the resource run out deterministically. Never throws.
  explicit HostResource(std::size_t capacity_limit = 0) noexcept : capacity_limit_(capacity_limit) {}

  MemoryKind kind() const noexcept override { return MemoryKind::kHost; }
  Device device() const noexcept override { return Device(DeviceType::kCPU); }
  std::string name() const override { return "host"; }
  /// MemAvailable / MemTotal from /proc/meminfo (sysconf as a fallback),
  /// clamped to the capacity limit when there is one. Never throws.
  MemInfo mem_info() const override;
  std::size_t alignment() const noexcept override { return kAlignment; }

  /// The limit given at construction (0 = none).
  std::size_t capacity_limit() const noexcept { return capacity_limit_; }
  /// Sum of the sizes of the live allocations (as requested).
  std::size_t bytes_in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }

 private:
  void* do_allocate(std::size_t bytes) override;
  void do_deallocate(void* ptr, std::size_t bytes) noexcept override;

  const std::size_t capacity_limit_;
  std::atomic<std::size_t> in_use_{0};  // <= capacity_limit_ when the limit is set
};

namespace detail {

/// Available and total physical host memory: MemAvailable and MemTotal from
/// /proc/meminfo, or sysconf page counts where that file cannot be read.
/// Never throws. Shared by the host and pinned resources.
MemInfo host_mem_info() noexcept;

}  // namespace detail
}  // namespace genesis::memory
