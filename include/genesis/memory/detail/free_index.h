// The pool's index of free blocks: segregated size classes with bitmaps.
//
// Note [Free index]: best fit over a balanced tree (PyTorch's std::set) costs
// a node allocation and O(log n) pointer chasing per insert and erase, and the
// slow path does several of each per request. Here each stream has an array
// of size classes, each an intrusive list, and two levels of bitmaps that say
// which classes hold blocks (the TLSF layout). Classes are exact below 32 KiB
// (every 512-byte size its own class) and 1/32 of a power of two wide above,
// so a block from the next non-empty class wastes at most ~3%, and within the
// request's own class a short scan picks the smallest block that fits (exact
// fits first): in practice the same choices as best fit, in O(1).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "genesis/memory/detail/block.h"

namespace genesis::memory::detail {

class FreeIndex {
 public:
  static constexpr int kExactClasses = 64;     // sizes 512 B .. 32 KiB - 512, one class each
  static constexpr int kSubBits = 5;           // 32 classes per power of two above
  static constexpr int kNumClasses = kExactClasses + (64 - 6) * (1 << kSubBits);
  static constexpr int kWords = (kNumClasses + 63) / 64;
  static constexpr int kScanLimit = 16;        // blocks examined in the request's class

  /// The class of a block or request of `size` bytes (a multiple of 512).
  static int size_class(std::size_t size) noexcept {
    const std::uint64_t u = size >> 9;
    if (u < kExactClasses) return static_cast<int>(u);
    const int fl = 63 - std::countl_zero(u);  // >= 6
    const int sl = static_cast<int>((u >> (fl - kSubBits)) & ((1u << kSubBits) - 1));
    return kExactClasses + (fl - 6) * (1 << kSubBits) + sl;
  }

  // Inline: the slow path makes about two of each per request, and as calls
  // they cost a tenth more instructions than their bodies (callgrind).
  void insert(Block* b) {
    PerStream* s = lookup(b->stream);
    if (s == nullptr) s = add_stream(b->stream);
    link(b, s);
  }
  /// insert() for a block of the same stream as one just erased, with what
  /// erase() returned for it (null: look the stream up): a split remainder,
  /// a block that absorbed a free neighbour. Skips the stream lookup.
  void insert_like(Block* b, void* erased_owner) {
    if (erased_owner == nullptr) return insert(b);
    link(b, static_cast<PerStream*>(erased_owner));
  }
  /// Unlinks b; returns its per-stream table for insert_like (null if b was
  /// not in the index).
  void* erase(Block* b) noexcept {
    auto* s = static_cast<PerStream*>(b->free_owner);
    if (s == nullptr) return nullptr;
    b->free_owner = nullptr;
    // Unsigned indices: the header stays quiet under -Wsign-conversion.
    const std::size_t c = b->free_class;
    if (b->free_prev != nullptr) b->free_prev->free_next = b->free_next;
    else s->heads[c] = b->free_next;
    if (b->free_next != nullptr) b->free_next->free_prev = b->free_prev;
    b->free_prev = b->free_next = nullptr;
    if (s->heads[c] == nullptr) {
      s->words[c >> 6] &= ~(std::uint64_t{1} << (c & 63));
      if (s->words[c >> 6] == 0) s->top &= ~(std::uint64_t{1} << (c >> 6));
    }
    --count_;
    return s;
  }
  /// The best block of at least `size` bytes on `stream`, or null. Does not
  /// remove it.
  Block* find(StreamId stream, std::size_t size) const noexcept;
  /// Largest free block (any stream), for reports. O(streams * classes).
  std::size_t largest() const noexcept;
  std::size_t count() const noexcept { return count_; }
  /// True if a stream other than `stream` has had free blocks here (a
  /// stream's table stays once made, empty or not).
  bool has_other_stream(StreamId stream) const noexcept {
    return streams_.size() > 1 || (streams_.size() == 1 && streams_[0]->stream != stream);
  }
  /// Debug check (CachingAllocator::check_invariants): both bitmap levels
  /// exact (a class bit set exactly when its list holds blocks, a word bit
  /// exactly when its word is not zero), every listed block filed under its
  /// own class and stream with consistent links, and count() the number
  /// listed. Returns what is wrong, or an empty string.
  std::string check() const;

  /// Calls fn(Block*) for every free block; fn must not insert or erase.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for_each_from_class(0, fn);
  }

  /// Calls fn(Block*) for the free blocks whose class can hold `min_size`
  /// bytes (every block of at least min_size, and some a little smaller:
  /// fn filters). The lower classes are skipped through the bitmaps, so a
  /// pool of small blocks costs nothing (the expandable segments' page
  /// release looks only at blocks that may span a whole page).
  template <typename Fn>
  void for_each_at_least(std::size_t min_size, Fn&& fn) const {
    for_each_from_class(size_class(min_size), fn);
  }

 private:
  struct PerStream;
  // insert's body, once the stream's table is known.
  void link(Block* b, PerStream* s) noexcept {
    const auto c = static_cast<std::size_t>(size_class(b->size));
    b->free_owner = s;
    b->free_class = static_cast<std::uint32_t>(c);
    Block*& head = s->heads[c];
    b->free_prev = nullptr;
    b->free_next = head;
    if (head != nullptr) head->free_prev = b;
    head = b;
    s->words[c >> 6] |= std::uint64_t{1} << (c & 63);
    s->top |= std::uint64_t{1} << (c >> 6);
    ++count_;
  }
  template <typename Fn>
  void for_each_from_class(int first, Fn& fn) const {
    if (first >= kNumClasses) return;
    const int w0 = first >> 6;
    for (const auto& s : streams_) {
      for (std::uint64_t top = s->top & (~std::uint64_t{0} << w0); top != 0; top &= top - 1) {
        const int w = std::countr_zero(top);
        std::uint64_t bits = s->words[static_cast<std::size_t>(w)];
        if (w == w0) bits &= ~std::uint64_t{0} << (first & 63);
        for (; bits != 0; bits &= bits - 1) {
          const int c = (w << 6) + std::countr_zero(bits);
          for (Block* b = s->heads[static_cast<std::size_t>(c)]; b != nullptr; b = b->free_next) fn(b);
        }
      }
    }
  }

  struct PerStream {
    StreamId stream = 0;
    std::uint64_t top = 0;                       // bit w set: words[w] != 0
    std::array<std::uint64_t, kWords> words{};   // bit c set: heads[c] != null
    std::array<Block*, kNumClasses> heads{};
  };
  static_assert(kWords <= 64, "two bitmap levels cover at most 4096 classes");

  PerStream* lookup(StreamId stream) const noexcept {
    for (const auto& s : streams_)
      if (s->stream == stream) return s.get();
    return nullptr;
  }
  PerStream* add_stream(StreamId stream);  // a new, empty per-stream table (out of line: rare)
  /// First non-empty class >= c, or -1.
  static int next_class(const PerStream& s, int c) noexcept;

  std::vector<std::unique_ptr<PerStream>> streams_;
  std::size_t count_ = 0;
};

}  // namespace genesis::memory::detail
