#include "genesis/memory/detail/allocator_registry.h"

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

// Befriended by CachingAllocator so that the registry can hand a dying
// thread's cache back without making retire_thread_cache public.
struct ThreadExitHook {
  bool armed = false;
  ~ThreadExitHook() {
    if (armed) detail::AllocatorRegistry::instance().release_thread(detail::tls_slots);
  }
  static void retire(CachingAllocator* a, detail::ThreadCache* tc) { a->retire_thread_cache(tc); }
};

namespace detail {

namespace {
thread_local ThreadExitHook tls_exit_hook;
}

AllocatorRegistry& AllocatorRegistry::instance() {
  // Leaked on purpose: threads may exit after static destructors ran.
  static auto* registry = new AllocatorRegistry;
  return *registry;
}

std::uint64_t AllocatorRegistry::attach(CachingAllocator* allocator, int* slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < kMaxAllocatorSlots; ++i) {
    if (owners_[i] == nullptr) {
      owners_[i] = allocator;
      generations_[i] = next_generation_++;
      *slot = i;
      return generations_[i];
    }
  }
  *slot = 0;
  return kNoSlot;
}

void AllocatorRegistry::detach(int slot, std::uint64_t generation) {
  if (generation == kNoSlot) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (generations_[slot] == generation) {
    owners_[slot] = nullptr;
    generations_[slot] = 0;
  }
}

void AllocatorRegistry::ensure_thread_exit_hook() { tls_exit_hook.armed = true; }

void AllocatorRegistry::release_thread(TlsSlot* slots) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < kMaxAllocatorSlots; ++i) {
    TlsSlot& s = slots[i];
    if (s.generation != 0 && s.cache != nullptr && generations_[i] == s.generation && owners_[i] != nullptr) {
      ThreadExitHook::retire(owners_[i], s.cache);
    }
    s = TlsSlot{};
  }
}

}  // namespace detail
}  // namespace genesis::memory
