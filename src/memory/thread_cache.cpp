#include "genesis/memory/detail/thread_cache.h"

#include <algorithm>
#include <bit>

namespace genesis::memory::detail {

ThreadCache::ThreadCache(std::uint32_t thread_number_in)
    : thread_number(thread_number_in) {
  streams[0] = std::make_unique<StreamCache>();
  streams[0]->stream = 0;
  current = streams[0].get();
}

Block* StreamCache::pop_near(std::size_t rounded, std::size_t max_size) noexcept {
  // The marks are exact (StreamCache::small_mask): the first set bit in
  // range names the smallest non-empty list.
  const std::size_t first = (rounded >> kAlignShift) + 1;
  const std::size_t last = std::min(max_size, kSmallLimit) >> kAlignShift;  // inclusive
  for (std::size_t w = first >> 6; w <= (last >> 6); ++w) {
    std::uint64_t bits = small_mask[w];
    if (w == (first >> 6)) bits &= ~std::uint64_t{0} << (first & 63);
    if (w == (last >> 6) && (last & 63) != 63) bits &= (std::uint64_t{1} << ((last & 63) + 1)) - 1;
    if (bits != 0) {
      const std::size_t i = (w << 6) + static_cast<std::size_t>(std::countr_zero(bits));
      BlockList& list = small[i];
      Block* b = list.head;
      list.head = b->cache_next;
      if (--list.count == 0) small_mask[w] &= ~(std::uint64_t{1} << (i & 63));
      return b;
    }
  }
  return nullptr;
}

StreamCache* ThreadCache::cache_for(StreamId stream) {
  StreamCache* empty = nullptr;
  for (auto& sc : streams) {
    if (!sc) {
      // A new stream cache: ~34 KiB, made only when a thread uses a stream.
      sc = std::make_unique<StreamCache>();
      sc->stream = stream;
      return sc.get();
    }
    if (sc->stream == stream) return sc.get();
    if (empty == nullptr) {
      bool has_blocks = false;
      for (const auto& l : sc->small) has_blocks |= l.count != 0;
      for (const auto& l : sc->large) has_blocks |= l.list.count != 0;
      if (!has_blocks) empty = sc.get();
    }
  }
  // All slots taken: recycle one that holds no blocks (its bins are empty,
  // so re-labelling it cannot hand a block to the wrong stream).
  if (empty != nullptr) {
    empty->stream = stream;
    for (auto& l : empty->large) l.size = 0;
  }
  return empty;
}

}  // namespace genesis::memory::detail
