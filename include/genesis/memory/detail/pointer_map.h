// Address -> Block map with lock-free lookups.
//
// deallocate(ptr) must find the block of `ptr` without the allocator's mutex.
// Writers (block creation, split, merge) already hold that mutex; readers are
// the hot path. Open addressing with linear probing; a slot's value is written
// before its key (release), so a reader that sees a key sees its block, and a
// reader double-checks `block->addr == key` so that a slot reused for another
// key can never hand out the wrong block. Blocks are never returned to the
// system while the allocator lives, so a stale read is memory safe.
//
// Note [Pointer map deletion]: erase closes the hole it leaves by shifting
// the rest of the probe cluster back (no tombstones). With tombstones the
// table filled up with them under steady churn and had to be rebuilt: a new
// 256 KiB table, a rehash and a grace period (a membarrier) every ~30,000
// pairs of `mixed`. A reader racing a shift can miss a key that moves behind
// it; it never gets a wrong block (the addr check above). A miss only sends
// deallocate to the slow path, which looks the pointer up again under the
// mutex, where the table is consistent.
//
// Tables are replaced (grown) under the mutex; the old table is freed only
// after a grace period in which every thread that might be reading it has
// left its hot-path section (see Note [Thread cache handshake]); until then
// it stays on a retired list.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "genesis/memory/detail/block.h"

namespace genesis::memory::detail {

class PointerMap {
 public:
  PointerMap();
  ~PointerMap();
  PointerMap(const PointerMap&) = delete;
  PointerMap& operator=(const PointerMap&) = delete;

  /// Lock-free. Returns the block whose address is exactly `addr`, or null.
  Block* find(std::uintptr_t addr) const noexcept {
    const View t = view(table_.load(std::memory_order_acquire));
    std::size_t i = hash(addr, t.shift);
    for (;;) {
      const Slot& s = t.slots[i];
      std::uintptr_t k = s.key.load(std::memory_order_acquire);
      if (k == addr) {
        Block* b = s.value.load(std::memory_order_relaxed);
        return (b != nullptr && b->addr == addr) ? b : nullptr;
      }
      if (k == kEmpty) return nullptr;
      i = (i + 1) & t.mask;
    }
  }

  /// Writers: call with the allocator mutex held. Inline (a rebuild is out
  /// of line): every split and merge of the pool makes one of these.
  void insert(std::uintptr_t addr, Block* block) {
    View t = view(table_.load(std::memory_order_relaxed));
    // Keep the load under 1/2 so probes stay short.
    if ((count_ + 1) * 2 > t.mask + 1) {
      rebuild(2 * (t.mask + 1));
      t = view(table_.load(std::memory_order_relaxed));
    }
    std::size_t i = hash(addr, t.shift);
    for (;;) {
      const std::uintptr_t k = t.slots[i].key.load(std::memory_order_relaxed);
      if (k == addr) {  // re-insert of a live key: just update the value
        t.slots[i].value.store(block, std::memory_order_release);
        return;
      }
      if (k == kEmpty) break;
      i = (i + 1) & t.mask;
    }
    t.slots[i].value.store(block, std::memory_order_relaxed);
    t.slots[i].key.store(addr, std::memory_order_release);
    ++count_;
  }
  /// Note [Pointer map deletion].
  void erase(std::uintptr_t addr) noexcept {
    const View t = view(table_.load(std::memory_order_relaxed));
    std::size_t hole = hash(addr, t.shift);
    for (;;) {
      const std::uintptr_t k = t.slots[hole].key.load(std::memory_order_relaxed);
      if (k == addr) break;
      if (k == kEmpty) return;
      hole = (hole + 1) & t.mask;
    }
    // Every key after the hole up to the next empty slot whose home slot does
    // not lie cyclically in (hole, j] may move into the hole (its probe from
    // home passes the hole), which then moves to j.
    for (std::size_t j = (hole + 1) & t.mask;; j = (j + 1) & t.mask) {
      const std::uintptr_t k = t.slots[j].key.load(std::memory_order_relaxed);
      if (k == kEmpty) break;
      const std::size_t home = hash(k, t.shift);
      if (((j - home) & t.mask) >= ((j - hole) & t.mask)) {
        // Value first, then key (release), as in insert.
        t.slots[hole].value.store(t.slots[j].value.load(std::memory_order_relaxed), std::memory_order_relaxed);
        t.slots[hole].key.store(k, std::memory_order_release);
        hole = j;
      }
    }
    t.slots[hole].value.store(nullptr, std::memory_order_relaxed);
    t.slots[hole].key.store(kEmpty, std::memory_order_release);
    --count_;
  }
  std::size_t size() const noexcept { return count_; }

  /// True when a replaced table waits for a grace period before being freed.
  bool has_retired() const noexcept { return !retired_.empty(); }
  /// Frees retired tables. Call only after a grace period (see above).
  void free_retired() noexcept;

 private:
  static constexpr std::uintptr_t kEmpty = 0;

  struct Slot {
    std::atomic<std::uintptr_t> key{kEmpty};
    std::atomic<Block*> value{nullptr};
  };
  // Tables are freed with std::free (make_table/free_table) without running
  // destructors.
  static_assert(std::is_trivially_destructible_v<Slot>);
  // Note [Tagged table word]: the table is one word, the slot array's
  // address (64-byte aligned) with the hash shift in its low six bits, so a
  // lookup reads the slots straight from it: a table header in between made
  // every deallocate wait for one more dependent load, ~3 ns on the GPU
  // machines' CPUs (bench/RESULTS.md, machine_probe: an L1 pointer chase).
  // capacity = 2^(64 - shift), mask = ~0 >> shift.
  static constexpr std::uintptr_t kShiftBits = 63;
  struct View {
    Slot* slots;
    int shift;
    std::size_t mask;
  };
  static View view(std::uintptr_t word) noexcept {
    const int shift = static_cast<int>(word & kShiftBits);
    return View{reinterpret_cast<Slot*>(word & ~kShiftBits), shift, ~std::size_t{0} >> shift};
  }

  static std::size_t hash(std::uintptr_t addr, int shift) noexcept {
    // Fibonacci hashing of the 512-byte granule number.
    return static_cast<std::size_t>(((addr >> 9) * 0x9E3779B97F4A7C15ull) >> shift);
  }
  static std::uintptr_t make_table(std::size_t capacity);  // a tagged word
  static void free_table(std::uintptr_t word) noexcept;
  void rebuild(std::size_t capacity);

  std::atomic<std::uintptr_t> table_;  // Note [Tagged table word]
  std::size_t count_ = 0;              // live keys
  std::vector<std::uintptr_t> retired_;
};

}  // namespace genesis::memory::detail
