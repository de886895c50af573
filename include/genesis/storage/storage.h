// Storage: a refcounted buffer on one device.
//
// Note [Storage ownership]: a Storage is a handle to one StorageImpl, which
// owns {pointer, bytes, device, deleter} plus the shape and dtype the buffer
// was made for. Copying a handle adds a reference (an atomic increment);
// the memory is released when the last strong reference goes. Pooled
// storages (the usual kind, Storage::empty) hand their block back to the
// device's caching allocator at that moment, so "freeing" costs the
// allocator's hot path, not a driver call.
//
// Weak references (StorageTracker, caches) keep the StorageImpl object but
// not the memory: they can tell whether the storage is still alive and
// upgrade to a strong reference while it is. The object itself is deleted
// when both counts reach zero, the same scheme as std::shared_ptr and
// c10::intrusive_ptr, kept intrusive so that one heap object per storage is
// all it costs (bindings hold the raw pointer and call incref/decref).
//
// Note [Read-only memory]: a storage made over memory that must not be
// written (a read-only NumPy array, one over `bytes`, a PROT_READ mapping,
// a DLPack tensor flagged read-only) is marked read-only with the name of its
// source. Reads work as usual; every write into it (Storage::copy_,
// copy_storage, and on tensors copy_, fill_, in-place operations, out=
// arguments, index assignment, through any view) fails with
// InvalidArgumentError saying that the source is read-only and to pass a
// writable copy, instead of crashing on a PROT_READ page or silently
// changing an immutable object. Exports keep the flag (NumPy arrays are
// non-writable, DLPack capsules carry the read-only flag). The mark is made
// before the storage is shared and never removed.
//
// Memory in use by an asynchronous copy is never released early: pooled
// blocks are marked with record_stream (the allocator delays reuse until the
// stream's work is done) and other memory is kept alive by the copy engine
// until an event on the stream completes (storage/copy.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis {

using memory::StreamId;

/// Sentinel for "the current stream of the storage's device": what
/// every storage operation uses unless a stream is passed explicitly.
inline constexpr StreamId kCurrentStream = ~StreamId{0};

/// Releases a non-pooled buffer. Called once, with the buffer's pointer,
/// when the last strong reference goes. Must not throw.
using StorageDeleter = std::function<void(void*)>;

/// The refcounted object behind a Storage. Created only through Storage's
/// factories; never on the stack.
class StorageImpl {
 public:
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }
  DType dtype() const noexcept { return dtype_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  /// The caching allocator the block came from; nullptr when not pooled.
  memory::CachingAllocator* allocator() const noexcept { return allocator_; }
  /// The allocator block behind a pooled storage (data() may lie inside it,
  /// see aligned()); nullptr otherwise.
  void* block() const noexcept { return base_; }
  /// The stream the block was allocated on (pooled storages).
  StreamId stream() const noexcept { return stream_; }
  /// What the memory came from when it must not be written ("NumPy array"),
  /// nullptr when writable (Note [Read-only memory]).
  const char* read_only_source() const noexcept { return read_only_source_; }

  std::int64_t use_count() const noexcept { return strong_.load(std::memory_order_acquire); }

  /// Manual reference counting for bindings and C callers. decref()
  /// releases the memory at zero and may delete the object: the caller's
  /// pointer is dangling after its last decref.
  void incref() noexcept { strong_.fetch_add(1, std::memory_order_relaxed); }
  void decref() noexcept;
  void incref_weak() noexcept { weak_.fetch_add(1, std::memory_order_relaxed); }
  void decref_weak() noexcept;
  /// Takes a strong reference if the storage is still alive (for weak
  /// holders); false once the memory has been released.
  bool try_incref() noexcept;

 private:
  friend class Storage;
  StorageImpl() = default;
  void release_memory() noexcept;

  // Strong references; the weak count holds one extra reference on behalf of
  // all strong ones, so the object outlives its memory until both are gone.
  std::atomic<std::int64_t> strong_{1};
  std::atomic<std::int64_t> weak_{1};
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_{};
  DType dtype_ = DType::kUInt8;
  std::vector<std::int64_t> shape_;
  memory::CachingAllocator* allocator_ = nullptr;  // pooled: free through it
  void* base_ = nullptr;                           // pooled: the block (data_ may be aligned inside)
  StreamId stream_ = 0;
  StorageDeleter deleter_;                         // not pooled: how to free
  const char* read_only_source_ = nullptr;         // non-null: read-only (static string); set once, before sharing
};

/// A strong reference to a StorageImpl. A default-constructed Storage is
/// null (defined() is false); every accessor but defined() then throws
/// InvalidArgumentError.
class Storage {
 public:
  Storage() noexcept = default;
  Storage(const Storage& o) noexcept : impl_(o.impl_) { if (impl_) impl_->incref(); }
  Storage(Storage&& o) noexcept : impl_(std::exchange(o.impl_, nullptr)) {}
  Storage& operator=(const Storage& o) noexcept { Storage(o).swap(*this); return *this; }
  Storage& operator=(Storage&& o) noexcept { Storage(std::move(o)).swap(*this); return *this; }
  ~Storage() { if (impl_) impl_->decref(); }
  void swap(Storage& o) noexcept { std::swap(impl_, o.impl_); }

  // ------------------------------------------------------------ factories --
  /// Uninitialised memory for `shape` x `dtype` from `device`'s caching
  /// allocator (host allocator for "cpu"; pinned pool when `pinned`, which
  /// needs CUDA), allocated on `stream` (CUDA; kCurrentStream = the current
  /// stream). Zero bytes allocate nothing (data() is nullptr).
  /// Throws InvalidArgumentError for a negative dimension, a size that
  /// overflows, a CUDA device that does not exist; OutOfMemoryError.
  static Storage empty(std::vector<std::int64_t> shape, DType dtype, Device device,
                       StreamId stream = kCurrentStream, bool pinned = false);
  /// As empty(), then filled with zero bytes (on the stream for CUDA).
  static Storage zeros(std::vector<std::int64_t> shape, DType dtype, Device device,
                       StreamId stream = kCurrentStream);
  /// Like empty() with the data pointer aligned to `alignment` bytes (a
  /// power of two; see aligned_storage). Throws InvalidArgumentError
  /// otherwise.
  static Storage aligned(std::vector<std::int64_t> shape, DType dtype, Device device,
                         std::size_t alignment = 64);
  /// Takes ownership of memory the caller allocated: `deleter(data)` runs when
  /// the last reference goes. `nbytes` must equal shape x dtype.
  static Storage from_blob(void* data, std::vector<std::int64_t> shape, DType dtype, Device device,
                           StorageDeleter deleter);
  /// Refers to memory the caller keeps alive for the storage's lifetime
  /// (nothing is freed).
  static Storage borrow(void* data, std::vector<std::int64_t> shape, DType dtype, Device device);
  /// Adopts a reference obtained by release() (or incref()). Null is allowed.
  static Storage adopt(StorageImpl* impl) noexcept { Storage s; s.impl_ = impl; return s; }
  /// Gives up this handle's reference without dropping it (for bindings).
  StorageImpl* release() noexcept { return std::exchange(impl_, nullptr); }

  // ------------------------------------------------------------- queries --
  bool defined() const noexcept { return impl_ != nullptr; }
  explicit operator bool() const noexcept { return defined(); }
  StorageImpl* impl() const noexcept { return impl_; }
  void* data_ptr() const { return checked().data(); }
  template <typename T>
  T* data() const { return static_cast<T*>(data_ptr()); }
  std::size_t nbytes() const { return checked().nbytes(); }
  Device device() const { return checked().device(); }
  DType dtype() const { return checked().dtype(); }
  const std::vector<std::int64_t>& shape() const { return checked().shape(); }
  /// Number of elements: product of the shape.
  std::int64_t numel() const;
  std::size_t itemsize() const { return dtype_size(dtype()); }
  bool is_pooled() const { return checked().allocator() != nullptr; }
  /// Note [Read-only memory].
  bool is_read_only() const { return checked().read_only_source() != nullptr; }
  /// Marks the memory read-only; `source` names where it came from in error
  /// messages ("NumPy array") and must outlive the storage (a literal). Call
  /// right after creating the storage, before it is shared; never undone.
  void set_read_only(const char* source);
  /// InvalidArgumentError "<what>: cannot write to a read-only ... the source
  /// <source> is read-only ..." when the storage is read-only.
  void check_writable(const char* what) const;
  /// True for host memory that is page-locked (DMA-capable).
  bool is_pinned() const;
  std::int64_t use_count() const noexcept { return impl_ ? impl_->use_count() : 0; }

  // ---------------------------------------------------------- operations --
  /// A new storage on `device` with the same shape, dtype and contents; the
  /// same storage (another reference) when it is already there.
  Storage to(Device device) const;
  /// Copies `src` into this storage, converting the dtype when they differ.
  /// Shapes must have the same number of elements. Any pair of devices.
  /// Returns *this.
  Storage& copy_(const Storage& src, bool non_blocking = false);
  /// A new storage on the same device with the same contents.
  Storage clone() const;
  /// Synchronises the storage's stream (CUDA) so host reads see every copy
  /// queued so far; a no-op on the CPU.
  void synchronize() const;

  friend bool operator==(const Storage& a, const Storage& b) noexcept { return a.impl_ == b.impl_; }

 private:
  static StorageImpl* make_impl(std::vector<std::int64_t>&& shape, DType dtype, Device device, const char* who);
  const StorageImpl& checked() const;
  StorageImpl* impl_ = nullptr;
};

/// A weak reference (StorageTracker, caches): does not keep memory alive.
class WeakStorage {
 public:
  WeakStorage() noexcept = default;
  explicit WeakStorage(const Storage& s) noexcept : impl_(s.impl()) { if (impl_) impl_->incref_weak(); }
  WeakStorage(const WeakStorage& o) noexcept : impl_(o.impl_) { if (impl_) impl_->incref_weak(); }
  WeakStorage& operator=(WeakStorage o) noexcept { std::swap(impl_, o.impl_); return *this; }
  ~WeakStorage() { if (impl_) impl_->decref_weak(); }
  /// A strong reference while the storage lives; a null Storage afterwards.
  Storage lock() const noexcept;
  bool expired() const noexcept { return impl_ == nullptr || impl_->use_count() == 0; }
  /// Identity (stays valid while this weak reference exists).
  const StorageImpl* get() const noexcept { return impl_; }

 private:
  StorageImpl* impl_ = nullptr;
};

// ------------------------------------------------------ create_storage ---
namespace detail {
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::kUInt8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DType::kInt8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return DType::kInt16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
  else if constexpr (std::is_same_v<T, Half>) return DType::kFloat16;
  else if constexpr (std::is_same_v<T, BFloat16>) return DType::kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else static_assert(sizeof(T) == 0, "no Genesis dtype for this C++ type");
}
}  // namespace detail

/// create_storage: a storage on `device` holding `count` elements of
/// `src_dtype` read from host memory `data`, converted to `dtype` (default:
/// the source dtype). Shape {count}. Picks the CPU or CUDA storage from the
/// device; a device that does not exist is an InvalidArgumentError.
Storage create_storage(const void* data, std::size_t count, DType src_dtype, Device device,
                       std::optional<DType> dtype = std::nullopt);

template <typename T>
Storage create_storage(std::span<const T> data, Device device, std::optional<DType> dtype = std::nullopt) {
  return create_storage(data.data(), data.size(), detail::dtype_of<T>(), device, dtype);
}
template <typename T>
Storage create_storage(const std::vector<T>& data, Device device, std::optional<DType> dtype = std::nullopt) {
  return create_storage(std::span<const T>(data.data(), data.size()), device, dtype);
}

/// aligned_storage(shape, dtype, device, alignment=64): an empty storage whose
/// data pointer is aligned to `alignment` bytes (SIMD loads, O_DIRECT I/O).
inline Storage aligned_storage(std::vector<std::int64_t> shape, DType dtype, Device device,
                               std::size_t alignment = 64) {
  return Storage::aligned(std::move(shape), dtype, device, alignment);
}

/// convert_dtype: a new storage on the same device holding `src`
/// converted to `dtype` (Note [Cast semantics] in storage/convert.h).
Storage convert_dtype(const Storage& src, DType dtype);

}  // namespace genesis
