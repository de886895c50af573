#include "genesis/storage/shared_storage.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "genesis/core/error.h"
#include "genesis/storage/detail/nbytes.h"
#include "shm_space.h"
#include "shm_watcher.h"

namespace genesis::storage {

namespace {

std::atomic<unsigned long long> g_name_counter{0};

}  // namespace

void SharedStorage::validate_name(const std::string& name) {
  GENESIS_CHECK(!name.empty() && name[0] == '/', "SharedStorage: invalid shared memory name '", name,
                "': it must start with '/'");
  GENESIS_CHECK(name.size() > 1, "SharedStorage: invalid shared memory name '", name,
                "': it needs at least one character after '/'");
  GENESIS_CHECK(name.find('/', 1) == std::string::npos, "SharedStorage: invalid shared memory name '",
                name, "': only the leading character may be '/'");
  GENESIS_CHECK(name.size() <= 255, "SharedStorage: invalid shared memory name (", name.size(),
                " characters): at most 255 are allowed");
  GENESIS_CHECK(name.find('\0') == std::string::npos,
                "SharedStorage: invalid shared memory name: it contains a NUL character");
  // On Linux the name is a file in /dev/shm: "." and ".." would be directories.
  GENESIS_CHECK(name != "/." && name != "/..", "SharedStorage: invalid shared memory name '", name, "'");
}

bool SharedStorage::open_and_map(bool create, bool soft) {
  const int flags = create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR;
  const int fd = ::shm_open(name_.c_str(), flags, 0600);
  if (fd < 0) {
    const int err = errno;
    if (soft && ((create && err == EEXIST) || (!create && err == ENOENT))) return false;
    if (create && err == EEXIST) {
      GENESIS_THROW(InvalidArgumentError, "SharedStorage::create: shared memory '", name_,
                    "' already exists (attach to it, or unlink it first)");
    }
    if (!create && err == ENOENT) {
      GENESIS_THROW(InvalidArgumentError, "SharedStorage::attach: shared memory '", name_,
                    "' does not exist");
    }
    GENESIS_THROW(InvalidArgumentError, "SharedStorage: shm_open('", name_, "') failed: ", std::strerror(err));
  }
  // From here on every failure closes fd and, if we created the name, removes
  // it again so that a failed create leaves nothing behind.
  auto fail = [&](const std::string& msg, bool oom = false) {
    ::close(fd);
    if (create) ::shm_unlink(name_.c_str());
    if (oom) GENESIS_THROW(OutOfMemoryError, msg);
    GENESIS_THROW(InvalidArgumentError, msg);
  };
  if (create) {
    // Sized and reserved before anyone can attach at the right size, so that
    // no process ever maps pages /dev/shm cannot give (Note [Reserving shared
    // memory]). A zero-byte segment needs neither.
    if (nbytes_ > 0) {
      if (auto err = detail::size_and_reserve_shm(fd, nbytes_, name_)) fail(err->message, err->out_of_space);
    }
  } else {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      fail(genesis::detail::str_cat("SharedStorage: fstat('", name_, "') failed: ", std::strerror(errno)));
    }
    if (static_cast<std::size_t>(st.st_size) != nbytes_) {
      fail(genesis::detail::str_cat("SharedStorage::attach: shared memory '", name_, "' has ", st.st_size,
                           " bytes but shape and dtype ", dtype_, " need ", nbytes_, " bytes"));
    }
  }
  if (nbytes_ > 0) {
    // mmap rejects a length of 0, so a zero-byte storage maps nothing.
    void* p = ::mmap(nullptr, nbytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      fail(genesis::detail::str_cat("SharedStorage: mmap of '", name_, "' (", nbytes_, " bytes) failed: ",
                           std::strerror(err)),
           err == ENOMEM);
    }
    data_ = p;
  }
  // The mapping keeps the object alive; the descriptor is no longer needed.
  ::close(fd);
  closed_ = false;
  is_owner_ = create;
  creator_pid_ = create ? static_cast<int>(::getpid()) : 0;
  return true;
}

SharedStorage::SharedStorage(std::vector<int64_t> shape, DType dtype, std::optional<std::string> name)
    : shape_(std::move(shape)), dtype_(dtype) {
  nbytes_ = detail::checked_nbytes(shape_, dtype_, "SharedStorage");
  if (name) {
    validate_name(*name);
    name_ = std::move(*name);
    // Attach-or-create; loop because another process may create or unlink
    // the name between our two attempts.
    for (int attempt = 0; attempt < 16; ++attempt) {
      if (open_and_map(/*create=*/false, /*soft=*/true)) return;
      if (open_and_map(/*create=*/true, /*soft=*/true)) return;
    }
    GENESIS_THROW(InvalidArgumentError, "SharedStorage: could neither attach to nor create '", name_,
                  "' (it keeps appearing and disappearing)");
  }
  // The watcher runs before the first unnamed segment exists, so that none
  // outlives this process however it ends (Note [Shared memory watcher]).
  detail::ensure_shm_watcher();
  // A stale segment from a dead process with a recycled pid may hold a name:
  // skip such names instead of failing.
  const std::string prefix = "/" + detail::unnamed_shm_prefix();
  for (int attempt = 0; attempt < 64; ++attempt) {
    name_ = genesis::detail::str_cat(prefix, g_name_counter.fetch_add(1));
    if (open_and_map(/*create=*/true, /*soft=*/true)) {
      auto_unlink_ = true;
      return;
    }
  }
  GENESIS_THROW(InvalidArgumentError, "SharedStorage: could not find an unused shared memory name");
}

SharedStorage SharedStorage::open_named(const std::string& name, std::vector<int64_t> shape, DType dtype,
                                        bool create) {
  SharedStorage s;
  s.shape_ = std::move(shape);
  s.dtype_ = dtype;
  s.nbytes_ = detail::checked_nbytes(s.shape_, dtype, "SharedStorage");
  validate_name(name);
  s.name_ = name;
  s.open_and_map(create, /*soft=*/false);
  return s;
}

SharedStorage SharedStorage::create(const std::string& name, std::vector<int64_t> shape, DType dtype,
                                    bool auto_unlink) {
  SharedStorage s = open_named(name, std::move(shape), dtype, /*create=*/true);
  s.auto_unlink_ = auto_unlink;
  return s;
}

SharedStorage SharedStorage::attach(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  return open_named(name, std::move(shape), dtype, /*create=*/false);
}

SharedStorage::SharedStorage(SharedStorage&& other) noexcept
    : name_(std::move(other.name_)),
      shape_(std::move(other.shape_)),
      dtype_(other.dtype_),
      nbytes_(other.nbytes_),
      data_(std::exchange(other.data_, nullptr)),
      is_owner_(std::exchange(other.is_owner_, false)),
      auto_unlink_(std::exchange(other.auto_unlink_, false)),
      closed_(std::exchange(other.closed_, true)),
      unlinked_(other.unlinked_),
      creator_pid_(other.creator_pid_) {
  other.name_.clear();
}

SharedStorage& SharedStorage::operator=(SharedStorage&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    other.name_.clear();
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
    nbytes_ = other.nbytes_;
    data_ = std::exchange(other.data_, nullptr);
    is_owner_ = std::exchange(other.is_owner_, false);
    auto_unlink_ = std::exchange(other.auto_unlink_, false);
    closed_ = std::exchange(other.closed_, true);
    unlinked_ = other.unlinked_;
    creator_pid_ = other.creator_pid_;
  }
  return *this;
}

SharedStorage::~SharedStorage() { release(); }

void SharedStorage::release() noexcept {
  close();
  if (is_owner_ && auto_unlink_ && !unlinked_ && !name_.empty() && creator_pid_ == ::getpid()) {
    ::shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

void* SharedStorage::data() const {
  GENESIS_CHECK(!closed_, "SharedStorage '", name_, "' is closed");
  return data_;
}

void SharedStorage::close() noexcept {
  if (closed_) return;
  if (data_ != nullptr) ::munmap(data_, nbytes_);
  data_ = nullptr;
  closed_ = true;
}

bool SharedStorage::unlink() {
  if (unlinked_) return false;
  GENESIS_CHECK(!name_.empty(), "SharedStorage::unlink: this storage has no name (moved from)");
  if (::shm_unlink(name_.c_str()) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      unlinked_ = true;
      return false;
    }
    GENESIS_THROW(InvalidArgumentError, "SharedStorage::unlink('", name_, "') failed: ", std::strerror(err));
  }
  unlinked_ = true;
  return true;
}

}  // namespace genesis::storage
