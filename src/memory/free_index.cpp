#include "genesis/memory/detail/free_index.h"

#include <algorithm>
#include <string>

namespace genesis::memory::detail {

FreeIndex::PerStream* FreeIndex::add_stream(StreamId stream) {
  streams_.push_back(std::make_unique<PerStream>());
  PerStream* s = streams_.back().get();
  s->stream = stream;
  return s;
}

inline int FreeIndex::next_class(const PerStream& s, int c) noexcept {  // only find() calls it
  if (c >= kNumClasses) return -1;
  int w = c >> 6;
  std::uint64_t bits = s.words[w] & (~std::uint64_t{0} << (c & 63));
  if (bits != 0) return (w << 6) + std::countr_zero(bits);
  if (w + 1 >= 64) return -1;
  const std::uint64_t tops = s.top & (~std::uint64_t{0} << (w + 1));
  if (tops == 0) return -1;
  w = std::countr_zero(tops);
  return (w << 6) + std::countr_zero(s.words[w]);
}

Block* FreeIndex::find(StreamId stream, std::size_t size) const noexcept {
  const PerStream* s = lookup(stream);
  if (s == nullptr) return nullptr;
  const int c = size_class(size);
  // The request's own class holds blocks both smaller and larger than it
  // (above 32 KiB): take the smallest that fits among the first few.
  if (c >= kExactClasses) {
    Block* best = nullptr;
    int seen = 0;
    for (Block* b = s->heads[c]; b != nullptr && seen < kScanLimit; b = b->free_next, ++seen) {
      if (b->size >= size && (best == nullptr || b->size < best->size || (b->size == best->size && b->addr < best->addr))) {
        best = b;
        if (b->size == size) break;
      }
    }
    if (best != nullptr) return best;
  } else if (s->heads[c] != nullptr) {
    return s->heads[c];  // exact class: every block is exactly `size`
  }
  // Every block of a higher class fits; prefer the smallest of the first few
  // so that large blocks stay whole for large requests.
  const int n = next_class(*s, c + 1);
  if (n < 0) return nullptr;
  Block* best = nullptr;
  int seen = 0;
  for (Block* b = s->heads[n]; b != nullptr && seen < kScanLimit; b = b->free_next, ++seen)
    if (best == nullptr || b->size < best->size || (b->size == best->size && b->addr < best->addr)) best = b;
  return best;
}

std::size_t FreeIndex::largest() const noexcept {
  std::size_t best = 0;
  for (const auto& s : streams_) {
    for (int w = kWords - 1; w >= 0; --w) {
      if (s->words[w] == 0) continue;
      const int c = (w << 6) + 63 - std::countl_zero(s->words[w]);
      for (const Block* b = s->heads[c]; b != nullptr; b = b->free_next) best = std::max(best, b->size);
      break;
    }
  }
  return best;
}

std::string FreeIndex::check() const {
  std::size_t listed = 0;
  for (const auto& sp : streams_) {
    const PerStream& s = *sp;
    const std::string where = " (stream " + std::to_string(s.stream) + ")";
    for (int w = 0; w < kWords; ++w) {
      if (((s.top >> w) & 1) != (s.words[static_cast<std::size_t>(w)] != 0 ? 1u : 0u))
        return "free index: summary bit " + std::to_string(w) + " disagrees with its word" + where;
    }
    for (int c = 0; c < kNumClasses; ++c) {
      const Block* head = s.heads[static_cast<std::size_t>(c)];
      const bool bit = ((s.words[static_cast<std::size_t>(c >> 6)] >> (c & 63)) & 1) != 0;
      if (bit != (head != nullptr)) return "free index: class bit " + std::to_string(c) + " disagrees with its list" + where;
      const Block* prev = nullptr;
      for (const Block* b = head; b != nullptr; prev = b, b = b->free_next) {
        if (b->free_prev != prev) return "free index: broken links in class " + std::to_string(c) + where;
        if (b->free_owner != &s || b->stream != s.stream)
          return "free index: a block of another stream's table in class " + std::to_string(c) + where;
        if (static_cast<int>(b->free_class) != c || size_class(b->size) != c)
          return "free index: a block of " + std::to_string(b->size) + " bytes filed in class " + std::to_string(c) + where;
        ++listed;
      }
    }
  }
  if (listed != count_)
    return "free index: count() is " + std::to_string(count_) + " but " + std::to_string(listed) + " blocks are listed";
  return {};
}

}  // namespace genesis::memory::detail
