// Storage: reference counting, the factories and the whole-storage operations.
#include "genesis/storage/storage.h"

#include "genesis/cuda/async_errors.h"

#include <cstdio>
#include <cstring>
#include <exception>

#include "genesis/core/error.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/convert_cuda.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/detail/nbytes.h"
#include "storage_internal.h"

namespace genesis {

// ------------------------------------------------------------ refcounts ---

void StorageImpl::decref() noexcept {
  if (strong_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    release_memory();
    decref_weak();  // the reference the strong ones held together
  }
}

void StorageImpl::decref_weak() noexcept {
  if (weak_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

bool StorageImpl::try_incref() noexcept {
  std::int64_t n = strong_.load(std::memory_order_relaxed);
  while (n > 0) {
    if (strong_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
  }
  return false;
}

void StorageImpl::release_memory() noexcept {
  // Runs in destructors (and from Python's garbage collector): a failure here
  // cannot be reported to anyone who could act on it, so it is printed, and
  // the memory is given up rather than the process aborted.
  try {
    if (allocator_ != nullptr) {
      if (base_ != nullptr) allocator_->deallocate(base_);
    } else if (deleter_) {
      deleter_(data_);
    }
  } catch (const CudaError& e) {
    // CUDA already shut down (a storage released while the process exits,
    // after the runtime's own exit handlers): the memory is gone with the
    // context, nothing to report.
    constexpr int kCudartUnloading = 4, kDeviceUninitialized = 201, kContextIsDestroyed = 709;
    if (e.code() != kCudartUnloading && e.code() != kDeviceUninitialized && e.code() != kContextIsDestroyed) {
      std::fprintf(stderr, "genesis: releasing a %zu-byte storage on %s failed: %s\n", nbytes_,
                   device_.str().c_str(), e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "genesis: releasing a %zu-byte storage on %s failed: %s\n", nbytes_,
                 device_.str().c_str(), e.what());
  }
  deleter_ = nullptr;  // captured state goes now, not with the last weak reference
  data_ = nullptr;
  base_ = nullptr;
}

Storage WeakStorage::lock() const noexcept {
  if (impl_ != nullptr && impl_->try_incref()) return Storage::adopt(impl_);
  return Storage();
}

// ------------------------------------------------------------ factories ---

namespace storage_detail {

void check_device_usable(Device d, const char* who) {
  if (d.is_cpu()) return;
  GENESIS_CHECK(cuda::compiled_with_cuda(), who, ": device ", d.str(),
                " needs CUDA, but Genesis was built without CUDA support");
  cuda::validate_device(d);
}

}  // namespace storage_detail

StorageImpl* Storage::make_impl(std::vector<std::int64_t>&& shape, DType dtype, Device device, const char* who) {
  storage_detail::check_device_usable(device, who);
  const std::size_t nbytes = storage::detail::checked_nbytes(shape, dtype, who);
  auto* impl = new StorageImpl();
  impl->shape_ = std::move(shape);
  impl->dtype_ = dtype;
  impl->device_ = device;
  impl->nbytes_ = nbytes;
  return impl;
}

Storage Storage::empty(std::vector<std::int64_t> shape, DType dtype, Device device, StreamId stream, bool pinned) {
  GENESIS_CHECK(!pinned || device.is_cpu(), "Storage::empty: pinned memory is host memory; device must be cpu, got ",
                device.str());
  Storage s = adopt(make_impl(std::move(shape), dtype, device, "Storage::empty"));
  StorageImpl& impl = *s.impl_;
  memory::CachingAllocator& alloc = pinned ? memory::pinned_allocator() : memory::allocator_for(device);
  impl.allocator_ = &alloc;
  impl.stream_ = device.is_cuda() ? storage_detail::resolve_stream(device, stream) : 0;
  if (impl.nbytes_ > 0) {
    impl.base_ = alloc.allocate(impl.nbytes_, impl.stream_);
    impl.data_ = impl.base_;
  }
  return s;
}

Storage Storage::zeros(std::vector<std::int64_t> shape, DType dtype, Device device, StreamId stream) {
  Storage s = empty(std::move(shape), dtype, device, stream);
  if (s.nbytes() == 0) return s;
  if (device.is_cpu()) {
    std::memset(s.data_ptr(), 0, s.nbytes());
  } else {
    cuda::DeviceGuard guard(device.index());
    cuda::memset_async(s.data_ptr(), 0, s.nbytes(), s.impl_->stream_);
  }
  return s;
}

Storage Storage::aligned(std::vector<std::int64_t> shape, DType dtype, Device device, std::size_t alignment) {
  GENESIS_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0,
                "aligned_storage: alignment must be a power of two, got ", alignment);
  // Alignment is paid for in bytes (up to alignment - 512 more are taken):
  // past a GiB it is a mistake, not a layout (pages are 4 KiB to 2 MiB).
  constexpr std::size_t kMaxAlignment = std::size_t{1} << 30;
  GENESIS_CHECK(alignment <= kMaxAlignment, "aligned_storage: alignment ", alignment,
                " is larger than the largest supported, 1 GiB (", kMaxAlignment, " bytes)");
  // Pool blocks start on 512-byte boundaries (kMinBlockSize), so smaller
  // alignments are free; larger ones over-allocate and align inside the block.
  constexpr std::size_t kPoolAlignment = 512;
  if (alignment <= kPoolAlignment) return empty(std::move(shape), dtype, device);
  Storage s = adopt(make_impl(std::move(shape), dtype, device, "aligned_storage"));
  StorageImpl& impl = *s.impl_;
  GENESIS_CHECK(impl.nbytes_ <= SIZE_MAX - alignment, "aligned_storage: ", impl.nbytes_, " bytes aligned to ",
                alignment, " overflows");
  memory::CachingAllocator& alloc = memory::allocator_for(device);
  impl.allocator_ = &alloc;
  impl.stream_ = device.is_cuda() ? storage_detail::resolve_stream(device, kCurrentStream) : 0;
  impl.base_ = alloc.allocate(impl.nbytes_ + alignment - kPoolAlignment, impl.stream_);
  const auto base = reinterpret_cast<std::uintptr_t>(impl.base_);
  impl.data_ = reinterpret_cast<void*>((base + alignment - 1) & ~(alignment - 1));
  return s;
}

Storage Storage::from_blob(void* data, std::vector<std::int64_t> shape, DType dtype, Device device,
                           StorageDeleter deleter) {
  GENESIS_CHECK(static_cast<bool>(deleter), "Storage::from_blob: the deleter is empty (use Storage::borrow for "
                "memory the caller keeps)");
  Storage s = adopt(make_impl(std::move(shape), dtype, device, "Storage::from_blob"));
  GENESIS_CHECK(data != nullptr || s.impl_->nbytes_ == 0, "Storage::from_blob: data is null for ",
                s.impl_->nbytes_, " bytes");
  s.impl_->data_ = data;
  s.impl_->deleter_ = std::move(deleter);
  return s;
}

Storage Storage::borrow(void* data, std::vector<std::int64_t> shape, DType dtype, Device device) {
  Storage s = adopt(make_impl(std::move(shape), dtype, device, "Storage::borrow"));
  GENESIS_CHECK(data != nullptr || s.impl_->nbytes_ == 0, "Storage::borrow: data is null for ",
                s.impl_->nbytes_, " bytes");
  s.impl_->data_ = data;
  return s;
}

// -------------------------------------------------------------- queries ---

const StorageImpl& Storage::checked() const {
  GENESIS_CHECK(impl_ != nullptr, "Storage: use of a null (undefined) storage");
  return *impl_;
}

std::int64_t Storage::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : checked().shape()) n *= d;  // cannot overflow: checked_nbytes accepted it
  return n;
}

void Storage::set_read_only(const char* source) {
  GENESIS_CHECK(source != nullptr && *source != '\0', "Storage::set_read_only: the source name is empty");
  (void)checked();  // a null storage is an error
  impl_->read_only_source_ = source;
}

void Storage::check_writable(const char* what) const {
  const char* source = checked().read_only_source();
  if (GENESIS_LIKELY(source == nullptr)) return;
  GENESIS_THROW(InvalidArgumentError, what, ": cannot write to read-only memory: the source ", source,
                " is read-only (writing would crash or change data that must not change). Pass a writable copy "
                "instead: for NumPy genesis.from_numpy(array.copy()), for a tensor tensor.clone()");
}

bool Storage::is_pinned() const {
  const StorageImpl& impl = checked();
  return impl.device().is_cpu() && impl.nbytes() > 0 && memory::is_pinned(impl.data());
}

// ----------------------------------------------------------- operations ---

Storage Storage::to(Device device) const {
  if (checked().device() == device) return *this;
  Storage out = empty(shape(), dtype(), device);
  out.copy_(*this);
  return out;
}

Storage Storage::clone() const {
  Storage out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Storage& Storage::copy_(const Storage& src, bool non_blocking) {
  check_writable("Storage::copy_");
  const StorageImpl& d = checked();
  const StorageImpl& s = src.checked();
  GENESIS_CHECK(numel() == src.numel(), "Storage::copy_: element counts differ (destination ", numel(),
                ", source ", src.numel(), ")");
  if (d.dtype() == s.dtype()) {
    copy_storage_bytes(src, *this, non_blocking);
    return *this;
  }
  const auto count = static_cast<std::size_t>(numel());
  if (count == 0) return *this;
  if (s.device() == d.device()) {
    if (d.device().is_cpu()) {
      convert_dtype(s.data(), s.dtype(), d.data(), d.dtype(), count);
    } else {
      cuda::DeviceGuard guard(d.device().index());
      const StreamId stream = storage_detail::resolve_stream(d.device(), kCurrentStream);
      convert_dtype_cuda(s.data(), s.dtype(), d.data(), d.dtype(), count, stream);
      if (non_blocking) {
        keep_alive_on_stream(d.device(), stream, {src, *this});
      } else {
        cuda::synchronize_stream(stream);
        cuda::raise_async_errors(d.device().index());
      }
    }
    return *this;
  }
  // Different devices and dtypes: convert where the source lives, then move
  // the converted bytes.
  Storage converted = convert_dtype(src, d.dtype());
  copy_storage_bytes(converted, *this, non_blocking);
  return *this;
}

void Storage::synchronize() const {
  const StorageImpl& impl = checked();
  if (impl.device().is_cuda()) cuda::synchronize_device(impl.device().index());
}

// ------------------------------------------------------------ functions ---

Storage create_storage(const void* data, std::size_t count, DType src_dtype, Device device,
                       std::optional<DType> dtype) {
  GENESIS_CHECK(data != nullptr || count == 0, "create_storage: data is null for ", count, " elements");
  GENESIS_CHECK(count <= static_cast<std::size_t>(INT64_MAX), "create_storage: ", count, " elements is too many");
  const std::vector<std::int64_t> shape{static_cast<std::int64_t>(count)};
  // The caller's memory is only borrowed for the duration of the copy.
  Storage source = Storage::borrow(const_cast<void*>(data), shape, src_dtype, Device(DeviceType::kCPU));
  Storage out = Storage::empty(shape, dtype.value_or(src_dtype), device);
  out.copy_(source);
  return out;
}

Storage convert_dtype(const Storage& src, DType dtype) {
  Storage out = Storage::empty(src.shape(), dtype, src.device());
  out.copy_(src);
  return out;
}

}  // namespace genesis
