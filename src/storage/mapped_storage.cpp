#include "genesis/storage/mapped_storage.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "genesis/core/error.h"
#include "genesis/storage/detail/nbytes.h"

namespace genesis::storage {

namespace {

// numpy.memmap's long names for the modes.
std::string_view short_mode(std::string_view mode) {
  if (mode == "readonly") return "r";
  if (mode == "readwrite") return "r+";
  if (mode == "write") return "w+";
  if (mode == "copyonwrite") return "c";
  return mode;
}

}  // namespace

MappedStorage::MappedStorage(std::string filename, std::vector<int64_t> shape, DType dtype,
                             std::string_view mode, int64_t offset)
    : filename_(std::move(filename)), shape_(std::move(shape)), dtype_(dtype), mode_(short_mode(mode)), offset_(offset) {
  GENESIS_CHECK(mode_ == "r" || mode_ == "r+" || mode_ == "w+" || mode_ == "c", "MappedStorage: unknown mode '",
                mode_, "': valid modes are 'r', 'r+', 'w+' and 'c' (or numpy.memmap's 'readonly', 'readwrite', ",
                "'write' and 'copyonwrite')");
  GENESIS_CHECK(offset_ >= 0, "MappedStorage: offset must be non-negative, got ", offset_);
  nbytes_ = detail::checked_nbytes(shape_, dtype_, "MappedStorage");
  const auto max_off = static_cast<std::size_t>(std::numeric_limits<off_t>::max());
  GENESIS_CHECK(nbytes_ <= max_off - static_cast<std::size_t>(offset_), "MappedStorage: offset ", offset_,
                " plus ", nbytes_, " bytes exceeds the largest file size");
  const std::size_t end = static_cast<std::size_t>(offset_) + nbytes_;

  // "c" opens read-only: MAP_PRIVATE pages are writable regardless, and the
  // file itself must never change.
  int flags = O_RDONLY;
  if (mode_ == "r+") flags = O_RDWR;
  if (mode_ == "w+") flags = O_RDWR | O_CREAT | O_TRUNC;
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer,
  // possibly forever, before the check below can refuse it. It changes
  // nothing for a regular file.
  const int fd = ::open(filename_.c_str(), flags | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    GENESIS_THROW_FILE(filename_, errno, "MappedStorage: cannot open '", filename_, "' in mode '", mode_, "'");
  }
  auto fail = [&](const std::string& msg, bool oom = false) {
    ::close(fd);
    if (oom) GENESIS_THROW(OutOfMemoryError, msg);
    GENESIS_THROW(InvalidArgumentError, msg);
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail(genesis::detail::str_cat("MappedStorage: fstat('", filename_, "') failed: ", std::strerror(errno)));
  }
  // Only a regular file maps as data: a directory's size is not its
  // contents (mmap then fails with an unhelpful "No such device"), a FIFO or
  // a device has no size to check, and "w+" cannot size either.
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? " (a directory)"
                       : S_ISFIFO(st.st_mode) ? " (a FIFO)"
                       : S_ISCHR(st.st_mode)  ? " (a character device)"
                       : S_ISBLK(st.st_mode)  ? " (a block device)"
                       : S_ISSOCK(st.st_mode) ? " (a socket)"
                                              : "";
    fail(genesis::detail::str_cat("MappedStorage: '", filename_, "' is not a regular file", kind,
                                  "; expected a file to map"));
  }
  // "w+" sizes the file it created; "r+" grows a short one with zeros, as
  // numpy.memmap does in both modes (a file is never shrunk).
  if (mode_ == "w+" || (mode_ == "r+" && static_cast<std::size_t>(st.st_size) < end)) {
    if (::ftruncate(fd, static_cast<off_t>(end)) != 0) {
      fail(genesis::detail::str_cat("MappedStorage: cannot size '", filename_, "' to ", end, " bytes: ",
                           std::strerror(errno)));
    }
  } else if (static_cast<std::size_t>(st.st_size) < end) {
    // Touching a mapped page past the end of the file raises SIGBUS, so a
    // short file must be refused up front.
    fail(genesis::detail::str_cat("MappedStorage: file '", filename_, "' has ", st.st_size, " bytes but offset ",
                                  offset_, " + ", nbytes_, " bytes needs ", end, " bytes"));
  }
  if (nbytes_ > 0) {
    // mmap's offset must be a multiple of the page size: map from the page
    // holding `offset` and point data_ past the leading slack.
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t slack = static_cast<std::size_t>(offset_) % page;
    const off_t aligned = static_cast<off_t>(static_cast<std::size_t>(offset_) - slack);
    const int prot = mode_ == "r" ? PROT_READ : (PROT_READ | PROT_WRITE);
    const int share = mode_ == "c" ? MAP_PRIVATE : MAP_SHARED;
    map_length_ = nbytes_ + slack;
    void* p = ::mmap(nullptr, map_length_, prot, share, fd, aligned);
    if (p == MAP_FAILED) {
      const int err = errno;
      fail(genesis::detail::str_cat("MappedStorage: mmap of '", filename_, "' (", nbytes_, " bytes at offset ", offset_,
                           ") failed: ", std::strerror(err)),
           err == ENOMEM);
    }
    map_base_ = p;
    data_ = static_cast<std::byte*>(p) + slack;
  }
  // The mapping keeps the file referenced; the descriptor is not needed.
  ::close(fd);
  closed_ = false;
}

MappedStorage::MappedStorage(MappedStorage&& other) noexcept
    : filename_(std::move(other.filename_)),
      shape_(std::move(other.shape_)),
      dtype_(other.dtype_),
      mode_(std::move(other.mode_)),
      offset_(other.offset_),
      nbytes_(other.nbytes_),
      map_base_(std::exchange(other.map_base_, nullptr)),
      map_length_(std::exchange(other.map_length_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      closed_(std::exchange(other.closed_, true)) {}

MappedStorage& MappedStorage::operator=(MappedStorage&& other) noexcept {
  if (this != &other) {
    release();
    filename_ = std::move(other.filename_);
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    mode_ = std::move(other.mode_);
    offset_ = other.offset_;
    nbytes_ = other.nbytes_;
    map_base_ = std::exchange(other.map_base_, nullptr);
    map_length_ = std::exchange(other.map_length_, 0);
    data_ = std::exchange(other.data_, nullptr);
    closed_ = std::exchange(other.closed_, true);
  }
  return *this;
}

MappedStorage::~MappedStorage() { release(); }

const void* MappedStorage::data() const {
  GENESIS_CHECK(!closed_, "MappedStorage '", filename_, "' is closed");
  return data_;
}

void* MappedStorage::mutable_data() {
  GENESIS_CHECK(!closed_, "MappedStorage '", filename_, "' is closed");
  GENESIS_CHECK(mode_ != "r", "MappedStorage '", filename_,
                "' is read-only (mode 'r'); open it with mode 'r+', 'w+' or 'c' to write");
  return data_;
}

void MappedStorage::flush() {
  GENESIS_CHECK(!closed_, "MappedStorage '", filename_, "' is closed");
  if (mode_ != "r+" && mode_ != "w+") return;
  if (map_base_ == nullptr) return;
  if (::msync(map_base_, map_length_, MS_SYNC) != 0) {
    const int err = errno;
    GENESIS_THROW(InvalidArgumentError, "MappedStorage: msync of '", filename_, "' failed: ", std::strerror(err));
  }
}

int MappedStorage::release() noexcept {
  if (closed_) return 0;
  int err = 0;
  if (map_base_ != nullptr) {
    if ((mode_ == "r+" || mode_ == "w+") && ::msync(map_base_, map_length_, MS_SYNC) != 0) err = errno;
    ::munmap(map_base_, map_length_);
  }
  map_base_ = nullptr;
  map_length_ = 0;
  data_ = nullptr;
  closed_ = true;
  return err;
}

void MappedStorage::close() {
  const int err = release();
  if (err != 0) {
    GENESIS_THROW(InvalidArgumentError, "MappedStorage: flushing '", filename_, "' on close failed: ",
                  std::strerror(err));
  }
}

}  // namespace genesis::storage
