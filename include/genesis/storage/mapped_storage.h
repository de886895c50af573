// MappedStorage: a shape*dtype buffer backed by a memory-mapped file, with
// numpy.memmap's modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/core/dtype.h"

namespace genesis::storage {

/// Maps bytes [offset, offset + nbytes) of a file. Modes, as numpy.memmap:
///   "r"  read-only; the pages are PROT_READ, mutable_data() throws.
///   "r+" read/write an existing file; writes reach the file; a file
///        shorter than offset + nbytes grows, zero-filled.
///   "w+" create or truncate the file to offset + nbytes, read/write.
///   "c"  copy-on-write (MAP_PRIVATE): writable in memory, the file never
///        changes.
/// numpy.memmap's long names ("readonly", "readwrite", "write",
/// "copyonwrite") are taken too. The mode is a string rather than a char
/// because "r+" and "w+" are two characters. Move-only; close() or the destructor releases the mapping.
/// Every failure throws InvalidArgumentError (with the path and strerror for
/// system calls; a file that cannot be opened is a FileError carrying the
/// errno), except an mmap ENOMEM, which is OutOfMemoryError. Only
/// regular files map (a FIFO, device or directory is refused, never waited
/// on).
/// The file must not shrink while it is mapped: touching a page past its new
/// end raises SIGBUS, which ends the process, as with numpy.memmap or any
/// mmap. The size is checked when the file is opened; a later truncation by
/// another process cannot become an exception without a process-wide signal
/// handler, which a library must not install.
class MappedStorage {
 public:
  /// Opens and maps `filename`. `offset` need not be page aligned, nor a
  /// multiple of the element size (as in numpy); data() is then only as
  /// aligned as `offset`, so typed access needs memcpy.
  /// Throws InvalidArgumentError for an unknown mode (listing the valid
  /// ones), a negative offset or dimension, an overflowing size, a missing or
  /// unopenable file, or (modes r and c) a file shorter than offset + nbytes
  /// (the message states both sizes).
  MappedStorage(std::string filename, std::vector<int64_t> shape, DType dtype, std::string_view mode = "r",
                int64_t offset = 0);

  MappedStorage(MappedStorage&& other) noexcept;
  MappedStorage& operator=(MappedStorage&& other) noexcept;
  MappedStorage(const MappedStorage&) = delete;
  MappedStorage& operator=(const MappedStorage&) = delete;

  /// Flushes (r+, w+) and unmaps, ignoring errors: call close() first to see
  /// them. Never throws.
  ~MappedStorage();

  /// Read-only view of the mapped bytes; nullptr when nbytes() == 0.
  /// Throws InvalidArgumentError ("closed") after close().
  const void* data() const;
  /// Writable view; nullptr when nbytes() == 0. Throws InvalidArgumentError
  /// in mode "r" or after close().
  void* mutable_data();

  std::size_t nbytes() const noexcept { return nbytes_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  DType dtype() const noexcept { return dtype_; }
  const std::string& filename() const noexcept { return filename_; }
  /// "r", "r+", "w+" or "c".
  const std::string& mode() const noexcept { return mode_; }
  int64_t offset() const noexcept { return offset_; }
  bool is_closed() const noexcept { return closed_; }
  /// True if mutable_data() is allowed (every mode but "r").
  bool is_writable() const noexcept { return mode_ != "r"; }

  /// Writes dirty pages to the file and waits (msync MS_SYNC) in modes r+
  /// and w+; a no-op in "r" and "c", which have nothing to save.
  /// Throws InvalidArgumentError after close() or if msync fails.
  void flush();

  /// Flushes (r+, w+) so nothing written is lost, then unmaps. Idempotent.
  /// The mapping is released even when the flush fails; the failure is then
  /// thrown as InvalidArgumentError.
  void close();

 private:
  // Unmaps; returns the msync errno (0 if none) so close() can report it
  // after the mapping is already gone.
  int release() noexcept;

  std::string filename_;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kUInt8;
  std::string mode_;
  int64_t offset_ = 0;
  std::size_t nbytes_ = 0;
  void* map_base_ = nullptr;     // page-aligned start given to munmap/msync
  std::size_t map_length_ = 0;   // nbytes_ plus the offset's distance to the page start
  std::byte* data_ = nullptr;    // map_base_ + (offset_ - aligned offset)
  bool closed_ = true;
};

}  // namespace genesis::storage
