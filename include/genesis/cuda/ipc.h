// CUDA IPC: share device memory with another process on the same machine.
//
// Note [IPC of allocator blocks]: cudaIpcGetMemHandle names a whole cudaMalloc
// allocation, but what users share is a block that the caching allocator cut
// out of a larger segment. So a handle carries the segment's
// cudaIpcMemHandle_t plus the block's offset and size: the exporter finds the
// segment base with the driver's cuMemGetAddressRange, the importer maps the
// segment and adds the offset. Several blocks of one segment therefore share
// one CUDA handle, and CUDA lets a process open a given handle only once: the
// importer keeps a process-wide table of opened segments with a reference
// count, so any number of IpcMappings of blocks in the same segment work and
// the segment is unmapped when the last one closes.
//
// Memory made with the virtual-memory API (cuMemCreate/cuMemMap: the caching
// allocator's expandable segments) and cudaMallocAsync pools cannot be
// exported this way; export_ipc_handle says so instead of failing later.
//
// Like runtime.h this header includes no CUDA header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace genesis::cuda {

/// Everything another process needs to map a range of this process's device
/// memory. Plain data: copy it, compare it, print it with to_string() and send
/// it through a pipe, a socket or an environment variable.
struct IpcHandle {
  std::array<std::uint8_t, 64> handle{};  ///< the cudaIpcMemHandle_t bytes of the segment
  std::size_t offset = 0;                 ///< of the shared range from the segment base
  std::size_t nbytes = 0;                 ///< size of the shared range
  int device = 0;                         ///< the exporter's device index (informational)
  std::array<std::uint8_t, 16> device_uuid{};  ///< the GPU, found by UUID in the importer
  std::uint64_t exporter = 0;             ///< random per-process id of the exporter

  /// "genesis-ipc-v1:<device>:<uuid hex>:<exporter hex>:<offset>:<nbytes>:<handle hex>",
  /// printable ASCII without spaces. Never throws except std::bad_alloc.
  std::string to_string() const;

  /// Parses to_string() output (surrounding whitespace is ignored). Throws
  /// InvalidArgumentError saying what is wrong for anything else: wrong
  /// prefix or version, missing or extra fields, bad hex or decimal, lengths,
  /// offset + nbytes overflowing.
  static IpcHandle from_string(std::string_view text);

  friend bool operator==(const IpcHandle&, const IpcHandle&) = default;
};

/// Exports `nbytes` of device memory starting at `ptr`, which may lie inside a
/// larger cudaMalloc allocation (Note [IPC of allocator blocks]). Throws
/// CudaError without a GPU or when CUDA fails; InvalidArgumentError when ptr
/// is null, not device memory (host, pinned, managed), when [ptr, ptr +
/// nbytes) leaves its allocation, or when the allocation cannot be shared
/// with cudaIpcGetMemHandle (virtual-memory / expandable-segment memory,
/// cudaMallocAsync pools). Thread-safe.
IpcHandle export_ipc_handle(const void* ptr, std::size_t nbytes);

/// The random id that marks handles exported by this process.
std::uint64_t ipc_process_id() noexcept;

/// A mapping of another process's memory: move-only RAII. The exporter must
/// keep the memory allocated while any process has it mapped, and must not
/// free it before the importer closed (CUDA's rule, not Genesis's).
///
/// Thread safety: different IpcMapping objects may be opened and closed from
/// any threads (the segment table is locked); one object is not shared.
class IpcMapping {
 public:
  IpcMapping() = default;

  /// Maps the segment of `handle` (cudaIpcOpenMemHandle with
  /// cudaIpcMemLazyEnablePeerAccess) on the local device with the handle's
  /// GPU UUID, or reuses this process's existing mapping of it. Throws
  /// InvalidArgumentError when the handle was exported by this process (CUDA
  /// cannot open those: use the pointer itself), or its GPU is not visible
  /// here; CudaError without a GPU or when CUDA refuses (exporter exited or
  /// freed the memory, different machine, ...).
  static IpcMapping open(const IpcHandle& handle);

  ~IpcMapping();
  IpcMapping(IpcMapping&& other) noexcept;
  IpcMapping& operator=(IpcMapping&& other) noexcept;
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;

  /// Mapped segment base + the handle's offset; null when not open.
  void* data() const noexcept;
  std::size_t nbytes() const noexcept { return nbytes_; }
  /// The local device index the memory was mapped on; -1 when not open.
  int device() const noexcept { return device_; }
  bool is_open() const noexcept { return base_ != nullptr; }

  /// Unmaps (when this was the last mapping of the segment in this process).
  /// Idempotent; never throws: a failure (CUDA shutting down) is ignored.
  void close() noexcept;

 private:
  void* base_ = nullptr;
  std::size_t offset_ = 0;
  std::size_t nbytes_ = 0;
  int device_ = -1;
  std::array<std::uint8_t, 64> key_{};  // the segment's CUDA handle: key of the segment table
};

}  // namespace genesis::cuda
