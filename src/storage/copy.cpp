// The copy engine: dispatch on the pair of devices (Note [Copy paths]) and
// the keep-alive list for queued copies (Note [Copy completion]).
#include "genesis/storage/copy.h"

#include "genesis/cuda/async_errors.h"

#include <cstring>
#include <list>
#include <mutex>
#include <utility>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/memops.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "host_memcpy.h"
#include "staged_copy.h"
#include "storage_internal.h"

namespace genesis {
namespace {

std::mutex g_staging_mutex;
StagingOptions g_staging;

bool ranges_overlap(const void* a, const void* b, std::size_t n) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + n && y < x + n;
}

// ------------------------------------------------------------ keep-alive ---
// Storages held for copies still queued, each batch behind one CUDA event.
struct PendingCopy {
  std::uintptr_t event;
  std::vector<Storage> refs;
};

struct KeepAlive {
  std::mutex mutex;
  std::list<PendingCopy> pending;
  cuda::EventPool events;
};

KeepAlive& keep_alive() {
  static auto* k = new KeepAlive();  // leaked: storages may be released during static destruction
  return *k;
}

// A blocking copy is a synchronisation point: errors that kernels of the
// device recorded surface here (Note [Asynchronous kernel errors]).
void sync_stream(StreamId s, int device) {
  cuda::synchronize_stream(s);
  cuda::raise_async_errors(device);
}

void copy_cuda(void* dst, Device dd, const void* src, Device sd, std::size_t n, StreamId stream, bool non_blocking) {
  using storage_detail::resolve_stream;
  if (sd.is_cpu()) {  // host -> device
    cuda::DeviceGuard guard(dd.index());
    const StreamId s = resolve_stream(dd, stream);
    if (memory::is_pinned(src)) {
      cuda::memcpy_async(dst, src, n, cuda::CopyKind::kHostToDevice, s);
      if (!non_blocking) sync_stream(s, dd.index());
    } else {
      storage_detail::staged_host_to_device(dst, src, n, dd.index(), s);
    }
    return;
  }
  if (dd.is_cpu()) {  // device -> host
    cuda::DeviceGuard guard(sd.index());
    const StreamId s = resolve_stream(sd, stream);
    if (memory::is_pinned(dst)) {
      cuda::memcpy_async(dst, src, n, cuda::CopyKind::kDeviceToHost, s);
      if (!non_blocking) sync_stream(s, sd.index());
    } else {
      storage_detail::staged_device_to_host(dst, src, n, sd.index(), s);
      cuda::raise_async_errors(sd.index());
    }
    return;
  }
  if (sd == dd) {  // one device
    cuda::DeviceGuard guard(dd.index());
    const StreamId s = resolve_stream(dd, stream);
    cuda::memcpy_async(dst, src, n, cuda::CopyKind::kDeviceToDevice, s);
    if (!non_blocking) sync_stream(s, dd.index());
    return;
  }
  // GPU -> GPU. The copy runs on the destination's stream, after the work
  // queued on the source's current stream (which may still be producing the
  // data), and the source's stream waits for it before touching src again.
  // Peer access where the pair supports it; otherwise the driver stages the
  // peer copy through the host, which is correct, only slower.
  if (cuda::can_access_peer(dd.index(), sd.index())) cuda::enable_peer_access(dd.index(), sd.index());
  const StreamId ds = resolve_stream(dd, stream);
  const StreamId ss = resolve_stream(sd, kCurrentStream);
  cuda::EventPool& ev = keep_alive().events;
  auto order = [&ev](int after_device, StreamId after, int before_device, StreamId before) {
    const std::uintptr_t e = ev.record(after_device, after);
    try {
      ev.wait(e, before_device, before);
    } catch (...) {
      ev.release(e);
      throw;
    }
    ev.release(e);
  };
  order(sd.index(), ss, dd.index(), ds);  // the data is ready
  {
    cuda::DeviceGuard guard(dd.index());
    cuda::memcpy_peer_async(dst, dd.index(), src, sd.index(), n, ds);
  }
  order(dd.index(), ds, sd.index(), ss);  // the source is free again
  if (!non_blocking) {
    cuda::DeviceGuard guard(dd.index());
    sync_stream(ds, dd.index());
  }
}

// The GPU whose stream a copy between these devices runs on (Note [Copy paths]).
Device stream_device(Device dst, Device src) { return dst.is_cuda() ? dst : src; }

}  // namespace

// -------------------------------------------------------------- copies ---

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes,
                StreamId stream, bool non_blocking) {
  if (nbytes == 0) return;
  GENESIS_CHECK(dst != nullptr && src != nullptr, "copy_bytes: null ", dst == nullptr ? "destination" : "source",
                " pointer for ", nbytes, " bytes");
  storage_detail::check_device_usable(dst_device, "copy_bytes");
  storage_detail::check_device_usable(src_device, "copy_bytes");
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    GENESIS_CHECK(!ranges_overlap(dst, src, nbytes), "copy_bytes: the source and destination ranges overlap");
    storage_detail::memcpy_threads(dst, src, nbytes, 0);
    return;
  }
  copy_cuda(dst, dst_device, src, src_device, nbytes, stream, non_blocking);
}

void copy_storage_bytes(const Storage& src, Storage& dst, bool non_blocking) {
  dst.check_writable("copy_storage");
  GENESIS_CHECK(src.nbytes() == dst.nbytes(), "copy_storage: byte sizes differ (destination ", dst.nbytes(),
                ", source ", src.nbytes(), ")");
  if (src.nbytes() == 0 || src.data_ptr() == dst.data_ptr()) return;
  const Device sd = src.device();
  const Device dd = dst.device();
  if (sd.is_cpu() && dd.is_cpu()) {
    copy_bytes(dst.data_ptr(), dd, src.data_ptr(), sd, src.nbytes());
    return;
  }
  const Device gpu = stream_device(dd, sd);
  const StreamId stream = storage_detail::resolve_stream(gpu, kCurrentStream);
  copy_bytes(dst.data_ptr(), dd, src.data_ptr(), sd, src.nbytes(), stream, non_blocking);
  if (non_blocking) keep_alive_on_stream(gpu, stream, {src, dst});
}

// ---------------------------------------------------------- keep-alive ---

void keep_alive_on_stream(Device device, StreamId stream, std::initializer_list<Storage> storages) {
  if (device.is_cpu()) return;
  std::vector<Storage> held;
  for (const Storage& s : storages) {
    if (!s.defined() || s.nbytes() == 0) continue;
    StorageImpl* impl = s.impl();
    // A pooled block of this very device: the allocator already knows how to
    // delay reuse (record_stream); its own stream orders the work by itself.
    if (impl->allocator() != nullptr && s.device() == device) {
      if (impl->stream() != stream) impl->allocator()->record_stream(impl->block(), stream);
      continue;
    }
    held.push_back(s);
  }
  collect_completed_copies();
  if (held.empty()) return;
  KeepAlive& k = keep_alive();
  const std::uintptr_t event = k.events.record(device.index(), stream);
  std::lock_guard lock(k.mutex);
  k.pending.push_back({event, std::move(held)});
}

std::size_t collect_completed_copies() {
  KeepAlive& k = keep_alive();
  std::list<PendingCopy> done;
  std::size_t left = 0;
  {
    std::lock_guard lock(k.mutex);
    for (auto it = k.pending.begin(); it != k.pending.end();) {
      bool finished = true;
      try {
        finished = k.events.query(it->event);
      } catch (...) {
        finished = true;  // the stream failed: the copy will never run
      }
      if (finished) {
        k.events.release(it->event);
        auto next = std::next(it);
        done.splice(done.end(), k.pending, it);
        it = next;
      } else {
        ++it;
      }
    }
    left = k.pending.size();
  }
  return left;  // `done` drops its references here, outside the lock (deleters may run)
}

// ------------------------------------------------------------- options ---

void set_staging_options(const StagingOptions& options) {
  GENESIS_CHECK(options.chunk_bytes >= 4096, "set_staging_options: chunk_bytes must be at least 4096, got ",
                options.chunk_bytes);
  GENESIS_CHECK(options.buffers >= 1 && options.buffers <= 64, "set_staging_options: buffers must be in [1, 64], got ",
                options.buffers);
  GENESIS_CHECK(options.copy_threads >= 0 && options.copy_threads <= 256,
                "set_staging_options: copy_threads must be in [0, 256], got ", options.copy_threads);
  std::lock_guard lock(g_staging_mutex);
  g_staging = options;
}

StagingOptions staging_options() {
  std::lock_guard lock(g_staging_mutex);
  return g_staging;
}

}  // namespace genesis
