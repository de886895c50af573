#include "genesis/memory/detail/pointer_map.h"

#include <bit>

namespace genesis::memory::detail {

namespace {
// 16K slots (256 KiB): a replaced table costs a grace period (a membarrier), so
// start large enough that a typical program never rebuilds it.
constexpr std::size_t kInitialCapacity = 1u << 14;
}

PointerMap::Table* PointerMap::make_table(std::size_t capacity) {
  auto* t = new Table;
  t->mask = capacity - 1;
  t->shift = 64 - std::countr_zero(capacity);
  t->slots = std::make_unique<Slot[]>(capacity);
  return t;
}

PointerMap::PointerMap() : table_(make_table(kInitialCapacity)) {}

PointerMap::~PointerMap() {
  delete table_.load(std::memory_order_relaxed);
  free_retired();
}

void PointerMap::free_retired() noexcept {
  for (Table* t : retired_) delete t;
  retired_.clear();
}

void PointerMap::rebuild(std::size_t capacity) {
  Table* old = table_.load(std::memory_order_relaxed);
  Table* fresh = make_table(capacity);
  for (std::size_t i = 0; i <= old->mask; ++i) {
    std::uintptr_t k = old->slots[i].key.load(std::memory_order_relaxed);
    if (k == kEmpty) continue;
    Block* b = old->slots[i].value.load(std::memory_order_relaxed);
    std::size_t j = hash(k, fresh->shift);
    while (fresh->slots[j].key.load(std::memory_order_relaxed) != kEmpty) j = (j + 1) & fresh->mask;
    fresh->slots[j].value.store(b, std::memory_order_relaxed);
    fresh->slots[j].key.store(k, std::memory_order_relaxed);
  }
  // Publishing with release makes the filled slots visible to readers that
  // load the table pointer with acquire.
  table_.store(fresh, std::memory_order_release);
  retired_.push_back(old);
}

}  // namespace genesis::memory::detail
