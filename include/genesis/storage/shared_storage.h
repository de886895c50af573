// SharedStorage: a buffer in POSIX shared memory that several processes can
// map by name.
//
// Note [Shared memory ownership]: the object that *created* a name is its
// owner (is_owner()). Closing only unmaps this process's view; the name (and
// the memory behind it) lives until someone calls unlink() and every process
// has unmapped it. The destructor closes, and unlinks only when the object
// created the name AND auto-unlink is on. Auto-unlink defaults to true for
// unnamed storages (nobody else can know a generated name unless it is passed
// on, and a leaked /dev/shm entry outlives the process) and to false for
// named ones (a named segment is usually meant to outlive its creator until a
// consumer attaches; the caller decides when to unlink()). Auto-unlink only
// happens in the process that created the name: a fork()ed child that
// inherits the object and runs its destructor unmaps its copy but leaves the
// name alone. When the creator ends without running destructors (_exit, a
// signal, daemon threads at interpreter exit), a watcher process removes its
// unnamed names (Note [Shared memory watcher], src/storage/shm_watcher.h).
// A new segment takes its memory from /dev/shm when it is created, so that a
// shortage is an error there and not a SIGBUS at a later write (Note
// [Reserving shared memory], src/storage/shm_space.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "genesis/core/dtype.h"

namespace genesis::storage {

/// A shape*dtype buffer in POSIX shared memory (shm_open + mmap, MAP_SHARED).
/// Move-only; the mapping is released by close() or the destructor. Not
/// synchronised: do not close() while another thread uses data().
/// Operating-system failures are reported as InvalidArgumentError carrying
/// the name and strerror, except a lack of memory (not enough free space in
/// /dev/shm for a new segment, an mmap ENOMEM), which is OutOfMemoryError
/// saying what was asked, what is free and how to get more.
class SharedStorage {
 public:
  /// With no name: creates a fresh segment under a generated unique name
  /// ("/genesis-<pid>-<counter>"), owned, auto-unlinked on destruction or,
  /// failing that, by the watcher when this process ends.
  /// With a name: attaches if the name exists (sizes must match), otherwise
  /// creates it (owned, not auto-unlinked); a creation race with another
  /// process is resolved by attaching.
  /// Throws InvalidArgumentError for a negative dimension, a byte size that
  /// overflows, an invalid name, a size mismatch or a failing system call.
  SharedStorage(std::vector<int64_t> shape, DType dtype, std::optional<std::string> name = {});

  /// Creates the segment `name`; fails if it already exists. The result is
  /// the owner; with `auto_unlink` the destructor also removes the name.
  /// Throws InvalidArgumentError (bad name/shape, name exists, system error).
  static SharedStorage create(const std::string& name, std::vector<int64_t> shape, DType dtype,
                              bool auto_unlink = false);

  /// Attaches to the existing segment `name`, which must hold exactly
  /// shape*dtype bytes. Not the owner; never unlinks on destruction.
  /// Throws InvalidArgumentError if the name is invalid or missing, or if the
  /// existing size differs (the message states both sizes).
  static SharedStorage attach(const std::string& name, std::vector<int64_t> shape, DType dtype);

  /// Throws InvalidArgumentError unless `name` is a valid portable shm name:
  /// starts with '/', has no other '/', is not "/", "/." or "/..", has no NUL
  /// and is at most 255 characters long.
  static void validate_name(const std::string& name);

  SharedStorage(SharedStorage&& other) noexcept;
  SharedStorage& operator=(SharedStorage&& other) noexcept;
  SharedStorage(const SharedStorage&) = delete;
  SharedStorage& operator=(const SharedStorage&) = delete;

  /// Closes; unlinks only if owner and auto-unlink (Note [Shared memory
  /// ownership]). Never throws.
  ~SharedStorage();

  /// Start of the mapping; nullptr for a zero-byte storage (nothing is
  /// mapped). Throws InvalidArgumentError ("closed") after close().
  void* data() const;
  /// Size in bytes: product(shape) * dtype_size(dtype). Valid after close().
  std::size_t nbytes() const noexcept { return nbytes_; }
  const std::vector<int64_t>& shape() const noexcept { return shape_; }
  DType dtype() const noexcept { return dtype_; }
  /// The shm name, with its leading '/'. Valid after close() and unlink().
  const std::string& name() const noexcept { return name_; }
  /// True if this object created the name.
  bool is_owner() const noexcept { return is_owner_; }
  /// True if the destructor will unlink the name (owner with auto-unlink).
  bool auto_unlink() const noexcept { return auto_unlink_; }
  bool is_closed() const noexcept { return closed_; }

  /// Unmaps this process's view. Idempotent; never unlinks. Throws nothing.
  void close() noexcept;

  /// Removes the name so that no further attach can find it; memory stays
  /// valid for everyone still mapping it. Any holder may unlink (owner or
  /// not), also after close(). Returns true if this call removed the name,
  /// false if it was already gone (this object unlinked before, or another
  /// process did) -- a vanished name is not an error, since the goal is met.
  /// Throws InvalidArgumentError for other failures (e.g. EACCES).
  bool unlink();

 private:
  SharedStorage() = default;
  // Opens (creating with O_EXCL when `create`) and maps; returns false only
  // when `create` hit EEXIST or an attach hit ENOENT and `soft` is set, so
  // that the constructors can retry the other way.
  bool open_and_map(bool create, bool soft);
  // create() and attach(): a named segment, created or opened.
  static SharedStorage open_named(const std::string& name, std::vector<int64_t> shape, DType dtype, bool create);
  // What the destructor does: close, then unlink if owner with auto-unlink.
  void release() noexcept;

  std::string name_;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kUInt8;
  std::size_t nbytes_ = 0;
  void* data_ = nullptr;
  bool is_owner_ = false;
  bool auto_unlink_ = false;
  bool closed_ = true;
  bool unlinked_ = false;
  int creator_pid_ = 0;  // process that created the name (auto-unlink guard)
};

}  // namespace genesis::storage
