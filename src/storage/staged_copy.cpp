// Pageable host memory <-> GPU through pinned staging buffers.
//
// Note [Staged copies]: the DMA engines can only read and write page-locked
// memory, so a copy from pageable memory is really two copies: the CPU moves
// the bytes into a pinned buffer and the copy engine moves them over PCIe.
// cudaMemcpy does this itself with small buffers and one CPU thread, which is
// why PyTorch gets ~22 GB/s from pageable memory on a link that does ~55 GB/s
// from pinned memory. Here the copy is cut into chunks that rotate through a
// few pinned buffers: while the copy engine drains chunk i, several CPU
// threads (parallel_memcpy's pool) fill chunk i+1, so the two stages overlap
// and the slower of them sets the pace. A buffer is refilled only after the
// event recorded behind its last DMA has completed.
//
// The buffers come from the pinned caching allocator (so steady-state copies
// allocate nothing) and go back to it idle: the functions wait for their own
// last DMA before returning, which is also what makes the pageable source
// safe for the caller to reuse (Note [Copy completion] in storage/copy.h).
#include "staged_copy.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/memops.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/copy.h"
#include "host_memcpy.h"

namespace genesis::storage_detail {
namespace {

cuda::EventPool& staging_events() {
  static auto* pool = new cuda::EventPool();  // leaked: events may outlive static destruction order
  return *pool;
}

// The staging ring: K pinned buffers and the event behind each one's last DMA.
// The destructor waits for outstanding DMA before handing buffers back, so an
// exception half-way never lets the pool reuse a buffer the GPU still reads.
class StagingRing {
 public:
  StagingRing(std::size_t nbytes, int device) : device_(device) {
    const StagingOptions opt = staging_options();
    // A copy smaller than a few chunks would not overlap at all with full
    // chunks; quarter it instead (down to 1 MiB: below that the per-chunk
    // costs dominate and one straight pass is as good).
    const std::size_t quarter = ((nbytes / 4) + 65535) & ~std::size_t{65535};
    chunk_ = std::max<std::size_t>(std::min(opt.chunk_bytes, std::max<std::size_t>(quarter, 1 << 20)), 4096);
    const std::size_t chunks = (nbytes + chunk_ - 1) / chunk_;
    const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(std::max(opt.buffers, 1)), chunks);
    threads_ = opt.copy_threads > 0 ? opt.copy_threads : staging_threads();
    const std::size_t buffer_bytes = std::min(chunk_, nbytes);
    memory::CachingAllocator& pinned = memory::pinned_allocator();
    slots_.reserve(k);
    for (std::size_t i = 0; i < k; ++i) slots_.push_back({pinned.allocate(buffer_bytes), 0});
  }
  ~StagingRing() {
    for (Slot& s : slots_) {
      if (s.event != 0) {
        try {
          staging_events().synchronize(s.event);
        } catch (...) {
          // The stream failed: the DMA will never run, so the buffer is idle.
        }
        staging_events().release(s.event);
      }
      memory::free_pinned(s.buffer);
    }
  }
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  std::size_t chunk() const noexcept { return chunk_; }
  std::size_t size() const noexcept { return slots_.size(); }
  int threads() const noexcept { return threads_; }
  void* buffer(std::size_t k) const noexcept { return slots_[k].buffer; }

  // Blocks until the last DMA that used buffer k has finished.
  void wait(std::size_t k) {
    Slot& s = slots_[k];
    if (s.event == 0) return;
    const std::uintptr_t e = std::exchange(s.event, 0);
    staging_events().synchronize(e);
    staging_events().release(e);
  }
  // Marks buffer k busy until the work now queued on `stream` is done.
  void mark(std::size_t k, StreamId stream) { slots_[k].event = staging_events().record(device_, stream); }

 private:
  struct Slot {
    void* buffer;
    std::uintptr_t event;
  };
  int device_;
  std::size_t chunk_ = 0;
  int threads_ = 0;
  std::vector<Slot> slots_;
};

}  // namespace

void staged_host_to_device(void* dst, const void* src, std::size_t nbytes, int device, StreamId stream) {
  if (nbytes == 0) return;
  StagingRing ring(nbytes, device);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  std::size_t i = 0;
  for (std::size_t off = 0; off < nbytes; off += ring.chunk(), ++i) {
    const std::size_t len = std::min(ring.chunk(), nbytes - off);
    const std::size_t k = i % ring.size();
    ring.wait(k);
    memcpy_threads(ring.buffer(k), in + off, len, ring.threads());
    cuda::memcpy_async(out + off, ring.buffer(k), len, cuda::CopyKind::kHostToDevice, stream);
    ring.mark(k, stream);
  }
  for (std::size_t k = 0; k < ring.size(); ++k) ring.wait(k);
}

void staged_device_to_host(void* dst, const void* src, std::size_t nbytes, int device, StreamId stream) {
  if (nbytes == 0) return;
  StagingRing ring(nbytes, device);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  const std::size_t chunk = ring.chunk();
  const std::size_t chunks = (nbytes + chunk - 1) / chunk;
  auto enqueue = [&](std::size_t c) {
    const std::size_t k = c % ring.size();
    const std::size_t off = c * chunk;
    const std::size_t len = std::min(chunk, nbytes - off);
    cuda::memcpy_async(ring.buffer(k), in + off, len, cuda::CopyKind::kDeviceToHost, stream);
    ring.mark(k, stream);
  };
  for (std::size_t c = 0; c < std::min(chunks, ring.size()); ++c) enqueue(c);
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t k = c % ring.size();
    const std::size_t off = c * chunk;
    const std::size_t len = std::min(chunk, nbytes - off);
    ring.wait(k);
    memcpy_threads(out + off, ring.buffer(k), len, ring.threads());
    if (c + ring.size() < chunks) enqueue(c + ring.size());
  }
}

}  // namespace genesis::storage_detail
