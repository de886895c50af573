// The arenas of one caching allocator (Note [Arenas] in
// genesis/memory/detail/arena_set.h).
#include "genesis/memory/detail/arena_set.h"

#include <algorithm>
#include <thread>

namespace genesis::memory::detail {

std::uint32_t ArenaSet::limit_for(std::uint32_t requested, MemoryKind kind, std::uint32_t move_window) {
  GENESIS_CHECK(requested <= kMaxArenas, "arenas must be at most ", kMaxArenas,
                " (0: one per hardware thread), got ", requested);
  if (requested != 0) return requested;
  // Device memory starts as one pool (deals_all) and spreads only as far as
  // threads move out (Note [Threads that contend move out]).
  if (kind == MemoryKind::kDevice && move_window == 0) return 1;
  const std::uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
  return std::min(kMaxArenas, hw);
}

ArenaSet::~ArenaSet() { destroy_made(); }

void ArenaSet::destroy_made() {
  // Each arena returns its own segments; the root (arena 0) is not ours.
  for (std::uint32_t k = kMaxArenas; k-- > 1;) {
    if (!made_[k]) continue;
    ptrs_[k].store(nullptr, std::memory_order_release);
    made_[k].reset();
  }
}

std::uint32_t ArenaSet::in_use() const noexcept {
  std::uint32_t n = 0;
  for_each([&](Arena&) { ++n; });
  return n;
}

Arena& ArenaSet::deal() {
  const std::uint32_t k = threads_seen_.fetch_add(1, std::memory_order_relaxed) % deal_limit_;
  return made(k);
}

std::uint32_t ArenaSet::claim_quietest_other(std::uint32_t* threads) noexcept {
  while (true) {
    std::uint32_t best = 1;
    std::uint32_t fewest = UINT32_MAX;
    for (std::uint32_t k = 1; k < limit_ && fewest != 0; ++k) {
      const std::uint32_t n = residents_[k].load(std::memory_order_relaxed);
      if (n < fewest) best = k, fewest = n;
    }
    // Claimed only if nobody came or claimed meanwhile; else look again.
    if (residents_[best].compare_exchange_weak(fewest, fewest + 1, std::memory_order_relaxed)) {
      *threads = fewest;
      return best;
    }
  }
}

Arena& ArenaSet::made(std::uint32_t k) {
  Arena* root = this->root();
  if (k == 0) return *root;
  if (Arena* a = get(k); a != nullptr) return *a;
  std::lock_guard<std::mutex> guard(mutex_);
  if (!made_[k]) {
    AllocatorOptions o;
    bool recording = false;
    {
      Arena::Lock lock(root->mutex_);  // the root's options change under it (set_memory_fraction, set_cache_size)
      o = root->options_;
      recording = root->events_.on();
    }
    o.record_events = recording;
    auto arena = std::make_unique<Arena>(root->upstream_, o, static_cast<std::uint8_t>(k));
    arena->join(*this);
    made_[k] = std::move(arena);
    ptrs_[k].store(made_[k].get(), std::memory_order_release);
  }
  return *made_[k];
}

// Every arena's mutex, taken in arena order: a view of the whole family at
// one instant (a snapshot taken arena by arena could show a segment one
// arena released and another was given at the same address). No one holds an
// arena's mutex while waiting for another's (Arena::release_other_arenas
// only tries), so taking them in order cannot deadlock.
ArenaSet::Locked ArenaSet::lock_all() const {
  Locked view;
  for_each([&](Arena& a) {
    view.locks.emplace_back(a.mutex_);
    view.arenas.push_back(&a);
  });
  return view;
}

}  // namespace genesis::memory::detail
