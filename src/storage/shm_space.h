// Reserving the memory of a new shared memory segment up front (not
// installed; used by SharedStorage).
//
// Note [Reserving shared memory]: ftruncate() only sets a segment's size; the
// pages come from /dev/shm (a tmpfs with a size limit: Docker's default is
// 64 MiB) when they are first touched. A segment larger than the free space
// is therefore created without complaint, and the first write past the free
// space kills the process with SIGBUS -- no exception, no message. So a new
// segment takes its memory at creation with posix_fallocate() and a shortage
// becomes an OutOfMemoryError that says what was asked, what /dev/shm has
// free and how to get more. Where the file system cannot preallocate
// (EOPNOTSUPP and friends), the free space that statvfs() reports is checked
// instead: that catches the common case (asking for more than there is) but
// cannot stop another process from taking the space before it is touched.
// The cost: the memory is committed (and zeroed) when the segment is made,
// as PyTorch's shared-memory tensors do, instead of page by page later.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace genesis::storage::detail {

/// Where POSIX shared memory objects live on Linux (glibc's shm_open).
inline constexpr const char* kShmDirectory = "/dev/shm";

/// Why a segment could not be given its size.
struct ShmSizeError {
  std::string message;  // what was asked, what is free, what to do
  bool out_of_space;    // true: not enough shared memory (OutOfMemoryError)
};

/// Sizes the freshly created, empty segment open as `fd` to `nbytes`
/// (nbytes > 0) and reserves its memory (Note [Reserving shared memory]).
/// Returns the failure, or nothing on success. `name` is for the message.
std::optional<ShmSizeError> size_and_reserve_shm(int fd, std::size_t nbytes, const std::string& name);

/// Free and total bytes of the file system holding shared memory objects, as
/// statvfs() reports them; nothing if it cannot be asked.
struct ShmSpace {
  unsigned long long free_bytes;
  unsigned long long total_bytes;
};
std::optional<ShmSpace> shm_space();

}  // namespace genesis::storage::detail
