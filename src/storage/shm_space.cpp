#include "shm_space.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "genesis/core/error.h"

namespace genesis::storage::detail {

namespace {

using genesis::detail::format_bytes;
using genesis::detail::str_cat;

// The part of every shortage message after "cannot reserve ...".
std::string shortage_text(std::size_t nbytes, const std::string& name, const char* why) {
  std::string free_text = "its free space could not be read";
  if (auto space = shm_space()) {
    free_text = str_cat("it has ", format_bytes(space->free_bytes), " (", space->free_bytes, " bytes) free of ",
                        format_bytes(space->total_bytes));
  }
  return str_cat("SharedStorage: cannot reserve ", format_bytes(nbytes), " (", nbytes,
                 " bytes) of shared memory for '", name, "' in ", kShmDirectory, " (", why, "): ", free_text,
                 ". Use a smaller storage, free space in ", kShmDirectory,
                 " (unlink segments nobody uses; see `ls -l ", kShmDirectory,
                 "`), or give it more room: in Docker `docker run --shm-size=<size>` (the default is 64 MiB), "
                 "in Kubernetes a memory-backed emptyDir mounted at ",
                 kShmDirectory, ", elsewhere `mount -o remount,size=<size> ", kShmDirectory, "`");
}

}  // namespace

std::optional<ShmSpace> shm_space() {
  struct statvfs vs {};
  if (::statvfs(kShmDirectory, &vs) != 0) return std::nullopt;
  return ShmSpace{static_cast<unsigned long long>(vs.f_bavail) * vs.f_frsize,
                  static_cast<unsigned long long>(vs.f_blocks) * vs.f_frsize};
}

std::optional<ShmSizeError> size_and_reserve_shm(int fd, std::size_t nbytes, const std::string& name) {
  int err = 0;
  // A signal during a large preallocation makes tmpfs give the pages back and
  // fail with EINTR; starting again is what the caller wants.
  do {
    err = ::posix_fallocate(fd, 0, static_cast<off_t>(nbytes));
  } while (err == EINTR);
  if (err == 0) return std::nullopt;
  if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
    return ShmSizeError{shortage_text(nbytes, name, std::strerror(err)), true};
  }
  if (err != EOPNOTSUPP && err != ENOSYS && err != EINVAL) {
    return ShmSizeError{str_cat("SharedStorage: cannot reserve ", nbytes, " bytes of shared memory for '", name,
                                "': posix_fallocate failed: ", std::strerror(err)),
                        false};
  }
  // No preallocation here: refuse what cannot fit now, then size the
  // segment sparsely (Note [Reserving shared memory]).
  if (auto space = shm_space(); space && space->total_bytes > 0 && nbytes > space->free_bytes) {
    return ShmSizeError{shortage_text(nbytes, name, "more than is free"), true};
  }
  if (::ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
    err = errno;
    return ShmSizeError{str_cat("SharedStorage: cannot size shared memory '", name, "' to ", nbytes,
                                " bytes: ", std::strerror(err)),
                        err == ENOSPC || err == ENOMEM || err == EFBIG};
  }
  return std::nullopt;
}

}  // namespace genesis::storage::detail
