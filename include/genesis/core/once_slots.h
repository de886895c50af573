// OnceSlots: a fixed array of objects, each created once on first use and
// then read without a lock.
//
// Note [Lock-free lookup of process-wide objects]: the process-wide caching
// allocators are found on every Storage::empty. The allocator itself is
// lock-free on its hot path, so a mutex taken just to find it would be the
// one point every allocating thread serialises on. Each slot is an atomic
// pointer: creation happens once, under the caller's mutex (which also
// orders it with fork handlers and listings), and publishes the object with
// a release store; lookups are one acquire load, which also makes the
// object's construction visible to the reader. Objects are never replaced,
// so a pointer once read stays valid for the life of the OnceSlots.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>

#include "genesis/core/error.h"

namespace genesis {

template <typename T, std::size_t N>
class OnceSlots {
 public:
  static constexpr std::size_t kCapacity = N;

  OnceSlots() = default;
  ~OnceSlots() {
    for (auto& slot : slots_) delete slot.load(std::memory_order_acquire);
  }
  OnceSlots(const OnceSlots&) = delete;
  OnceSlots& operator=(const OnceSlots&) = delete;

  /// The object of slot `i`, or nullptr when it was not created yet (or `i`
  /// is out of range). Lock-free and wait-free: one acquire load.
  T* get(std::size_t i) const noexcept { return i < N ? slots_[i].load(std::memory_order_acquire) : nullptr; }

  /// The object of slot `i`, created by `make()` (returning std::unique_ptr<T>)
  /// under `mutex` if no thread created it yet; `.second` is true for the one
  /// call that created it. Exactly one object is ever created per slot, however
  /// many threads race here. If `make` throws, nothing is stored and the
  /// exception propagates (a later call tries again). Throws
  /// InvalidArgumentError when `i` >= N.
  template <typename Make>
  std::pair<T*, bool> get_or_create(std::size_t i, std::mutex& mutex, Make&& make) {
    if (T* existing = get(i)) return {existing, false};
    std::lock_guard<std::mutex> lock(mutex);
    return get_or_create_locked(i, std::forward<Make>(make));
  }

  /// As get_or_create, for a caller that already holds the mutex that guards
  /// creation.
  template <typename Make>
  std::pair<T*, bool> get_or_create_locked(std::size_t i, Make&& make) {
    GENESIS_CHECK(i < N, "OnceSlots: slot ", i, " is out of range (there are ", N, ")");
    if (T* existing = slots_[i].load(std::memory_order_relaxed)) return {existing, false};  // the lock orders it
    std::unique_ptr<T> made = std::forward<Make>(make)();
    T* raw = made.release();
    slots_[i].store(raw, std::memory_order_release);
    return {raw, true};
  }

  /// Calls fn(index, T&) for every created object, in index order. Safe
  /// against concurrent creation (a slot created meanwhile may be missed).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (T* p = get(i)) fn(i, *p);
    }
  }

 private:
  std::array<std::atomic<T*>, N> slots_{};  // null until created; never changed afterwards
};

}  // namespace genesis
