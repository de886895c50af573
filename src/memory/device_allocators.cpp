#include "genesis/memory/device_allocators.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "genesis/core/bytes.h"
#include "genesis/core/fork.h"
#include "genesis/core/once_slots.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/detail/allocator_fork.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/pinned_resource.h"
#include "genesis/memory/publish.h"

namespace genesis::memory {

namespace {

// CUDA device indices with an allocator slot. One process sees the GPUs of
// one node (16 at most on today's machines); a larger index is refused.
constexpr std::size_t kMaxCudaDevices = 128;
constexpr std::size_t kHostSlot = 0;
constexpr std::size_t kPinnedSlot = 1;

// Lookups are lock-free (Note [Lock-free lookup of process-wide objects] in
// genesis/core/once_slots.h): allocator_for runs on every Storage::empty.
struct Registry {
  std::mutex mutex;  // creation of allocators, fork, listings
  OnceSlots<CachingAllocator, 2> host;  // kHostSlot, kPinnedSlot
  OnceSlots<CachingAllocator, kMaxCudaDevices> cuda;
  std::atomic<bool> pinned_for_transfers{false};
};

void prepare_fork();
void parent_after_fork();
void child_after_fork();
constexpr ForkHandlers kForkHandlers{&prepare_fork, &parent_after_fork, &child_after_fork};
// Installed at load, before any thread can take the locks (Note [Fork]).
[[maybe_unused]] const bool kForkRegistered = (register_fork_handlers(ForkRank::kAllocators, &kForkHandlers), true);

// Leaked on purpose: allocators must outlive every static object that may
// still free memory during exit, and CUDA may already be unloaded by then.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

// Note [Fork] (genesis/core/fork.h): the registry's lock, then every lock
// of every process-wide allocator (Note [Allocators across fork]), held
// across the fork. `forking` lists the allocators prepare locked; it is only
// touched by the forking thread between prepare and parent/child.
std::vector<CachingAllocator*> forking;

void prepare_fork() {
  Registry& r = registry();
  r.mutex.lock();
  forking.clear();
  r.host.for_each([](std::size_t, CachingAllocator& a) { forking.push_back(&a); });
  r.cuda.for_each([](std::size_t, CachingAllocator& a) { forking.push_back(&a); });
  AllocatorFork::prepare(forking.data(), forking.size());
}
void finish_fork(bool in_child) {
  AllocatorFork::finish(forking.data(), forking.size(), in_child);
  forking.clear();
  registry().mutex.unlock();
}
void parent_after_fork() { finish_fork(false); }
void child_after_fork() { finish_fork(true); }

}  // namespace

// The process-wide allocators are created below. A new one may start
// publishing (GENESIS_MEM_PUBLISH=1): after the registry's lock is released,
// since the publisher takes that lock to list the allocators.

CachingAllocator& cuda_allocator(int index) {
  Registry& r = registry();
  // The common case: one acquire load. A slot is filled only for a device
  // that was validated when its allocator was made.
  if (index >= 0) {
    if (CachingAllocator* a = r.cuda.get(static_cast<std::size_t>(index))) return *a;
  }
  cuda::validate_device(Device(DeviceType::kCUDA, index));
  GENESIS_CHECK(static_cast<std::size_t>(index) < kMaxCudaDevices, "cuda_allocator: device index ", index,
                " is beyond the ", kMaxCudaDevices, " CUDA devices Genesis keeps allocators for");
  // Asked for outside the registry's lock (lock order: alloc_conf_defaults.cpp).
  const AllocatorOptions options = cuda_allocator_options();
  const auto [a, created] = r.cuda.get_or_create(static_cast<std::size_t>(index), r.mutex, [&] {
    return std::make_unique<CachingAllocator>(std::make_shared<CudaDeviceResource>(index), options);
  });
  if (created) start_publishing_if_requested();
  return *a;
}

CachingAllocator& host_allocator() {
  Registry& r = registry();
  if (CachingAllocator* a = r.host.get(kHostSlot)) return *a;
  const auto [a, created] = r.host.get_or_create(kHostSlot, r.mutex, [] {
    return std::make_unique<CachingAllocator>(std::make_shared<HostResource>());
  });
  if (created) start_publishing_if_requested();
  return *a;
}

CachingAllocator& pinned_allocator() {
  Registry& r = registry();
  if (CachingAllocator* a = r.host.get(kPinnedSlot)) return *a;
  GENESIS_CHECK(cuda::is_available(), "pinned host memory needs a CUDA GPU",
                cuda::compiled_with_cuda() ? " and none is available" : " and Genesis was built without CUDA");
  const auto [a, created] = r.host.get_or_create(kPinnedSlot, r.mutex, [] {
    return std::make_unique<CachingAllocator>(std::make_shared<PinnedHostResource>());
  });
  if (created) start_publishing_if_requested();
  return *a;
}

CachingAllocator& allocator_for(Device device) {
  if (device.is_cpu()) return host_allocator();
  return cuda_allocator(device.index());
}

void* allocate_pinned(std::size_t bytes) { return pinned_allocator().allocate(bytes); }

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  pinned_allocator().deallocate(ptr);
}

bool is_pinned(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  return PinnedHostResource::is_pinned(ptr);
}

void set_pinned_host_memory(bool enabled) {
  if (enabled) (void)pinned_allocator();  // fail now, with a clear error, if impossible
  registry().pinned_for_transfers.store(enabled, std::memory_order_relaxed);
}

bool pinned_host_memory_enabled() noexcept {
  return registry().pinned_for_transfers.load(std::memory_order_relaxed);
}

CachingAllocator& host_allocator_for_transfers() {
  return pinned_host_memory_enabled() ? pinned_allocator() : host_allocator();
}

void set_cache_size(Device device, std::string_view size) { allocator_for(device).set_cache_size(parse_bytes(size)); }

void empty_all_caches() {
  std::vector<CachingAllocator*> all;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.host.for_each([&all](std::size_t, CachingAllocator& a) { all.push_back(&a); });
    r.cuda.for_each([&all](std::size_t, CachingAllocator& a) { all.push_back(&a); });
  }
  for (CachingAllocator* a : all) a->empty_cache();
}

std::vector<std::pair<std::string, CachingAllocator*>> existing_allocators() {
  std::vector<std::pair<std::string, CachingAllocator*>> out;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.cuda.for_each([&out](std::size_t i, CachingAllocator& a) { out.emplace_back(std::to_string(i), &a); });
  if (CachingAllocator* a = r.host.get(kHostSlot)) out.emplace_back("host", a);
  if (CachingAllocator* a = r.host.get(kPinnedSlot)) out.emplace_back("pinned", a);
  return out;
}

}  // namespace genesis::memory
