#include "genesis/memory/detail/pointer_map.h"

#include <bit>
#include <cstdlib>
#include <new>

namespace genesis::memory::detail {

namespace {
// 16K slots (256 KiB): a replaced table costs a grace period (a membarrier), so
// start large enough that a typical program never rebuilds it.
constexpr std::size_t kInitialCapacity = 1u << 14;
}

std::uintptr_t PointerMap::make_table(std::size_t capacity) {
  // 64-byte aligned, so that the low six bits of the address hold the shift.
  void* raw = std::aligned_alloc(64, capacity * sizeof(Slot));
  if (raw == nullptr) throw std::bad_alloc();
  auto* slots = static_cast<Slot*>(raw);
  for (std::size_t i = 0; i < capacity; ++i) new (&slots[i]) Slot();
  const int shift = 64 - std::countr_zero(capacity);
  return reinterpret_cast<std::uintptr_t>(slots) | static_cast<std::uintptr_t>(shift);
}

void PointerMap::free_table(std::uintptr_t word) noexcept {
  std::free(view(word).slots);  // Slot is trivially destructible (static_assert in the header)
}

PointerMap::PointerMap() : table_(make_table(kInitialCapacity)) {}

PointerMap::~PointerMap() {
  free_table(table_.load(std::memory_order_relaxed));
  free_retired();
}

void PointerMap::free_retired() noexcept {
  for (std::uintptr_t t : retired_) free_table(t);
  retired_.clear();
}

void PointerMap::rebuild(std::size_t capacity) {
  const std::uintptr_t old_word = table_.load(std::memory_order_relaxed);
  const View old = view(old_word);
  const std::uintptr_t fresh_word = make_table(capacity);
  const View fresh = view(fresh_word);
  for (std::size_t i = 0; i <= old.mask; ++i) {
    std::uintptr_t k = old.slots[i].key.load(std::memory_order_relaxed);
    if (k == kEmpty) continue;
    Block* b = old.slots[i].value.load(std::memory_order_relaxed);
    std::size_t j = hash(k, fresh.shift);
    while (fresh.slots[j].key.load(std::memory_order_relaxed) != kEmpty) j = (j + 1) & fresh.mask;
    fresh.slots[j].value.store(b, std::memory_order_relaxed);
    fresh.slots[j].key.store(k, std::memory_order_relaxed);
  }
  // Publishing with release makes the filled slots visible to readers that
  // load the table word with acquire.
  table_.store(fresh_word, std::memory_order_release);
  retired_.push_back(old_word);
}

}  // namespace genesis::memory::detail
