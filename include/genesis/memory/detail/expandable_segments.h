// Expandable segments of one arena (Note [Expandable segments] and Note
// [Physical chunks] in expandable_segments.cpp): per pool and stream one
// address range as large as the device, whose pages are mapped, in chunks,
// under the blocks that need them and unmapped when free. This class keeps
// the ranges and their page flags and does the reserving, mapping and
// unmapping; the arena it is given keeps the books (reserved bytes, events,
// the memory cap) and recovers from out of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/memory/allocator_options.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory::detail {

class Arena;

// Guarded by the arena's mutex.
class ExpandableSegments {
 public:
  /// Resolves the options against the upstream: on (kOn, or kAuto where
  /// pages map cheaply) or off, the page size and the chunk size. Throws
  /// InvalidArgumentError for kOn on an upstream without virtual memory and
  /// for a bad page size.
  void configure(const UpstreamResource& upstream, const AllocatorOptions& options);
  bool on() const noexcept { return on_; }
  /// On over an upstream whose page mappings cost the driver real time
  /// (CUDA): the auto settings that trade memory for fewer mappings apply.
  bool costly() const noexcept { return costly_; }
  std::size_t page_size() const noexcept { return page_size_; }
  std::size_t page_floor(std::size_t off) const noexcept { return off >> page_shift_; }
  std::size_t page_ceil(std::size_t off) const noexcept { return (off + page_size_ - 1) >> page_shift_; }
  const std::vector<Segment*>& segments() const noexcept { return segments_; }

  /// The segment of (pool, stream), its range reserved on first use; null
  /// when the upstream gives no range (the caller falls back to classic
  /// segments).
  Segment* segment_for(Arena& a, PoolId pool, StreamId stream);
  /// Maps the pages block b (just taken, `bytes` asked for) lies on. True if
  /// any were mapped; on failure b goes back to the pool and
  /// OutOfMemoryError is thrown. Inline: once warm most slow-path
  /// allocations on an expandable segment end at its first check.
  bool ensure_mapped(Arena& a, Block* b, std::size_t bytes);
  /// The bytes of the pages under the first `size` bytes of free block b
  /// (of an expandable segment) that are not mapped.
  std::size_t unmapped_under(const Block* b, std::size_t size) const noexcept;
  /// True if mapping `need` more bytes for a block of `size` would take
  /// reserved memory past the mark, so that free pages would be unmapped
  /// first (Note [Expandable segments]).
  bool passes_mark(const Arena& a, std::size_t need, std::size_t size) const noexcept;
  /// Unmaps pages wholly inside free blocks, highest first, until at least
  /// `at_least` bytes (SIZE_MAX: every such page). Returns the bytes.
  std::size_t release_free_pages(Arena& a, std::size_t at_least = SIZE_MAX);
  /// Unmaps the free pages of segments idle since idle_before_ns (garbage
  /// collection). Returns the bytes.
  std::size_t release_idle_pages(Arena& a, std::uint64_t idle_before_ns);
  /// Unmaps pages [first, end) of seg (whole chunks only). Returns the bytes.
  std::size_t unmap_range(Arena& a, Segment* seg, std::size_t first, std::size_t end);
  /// The mapped bytes under block b.
  std::size_t mapped_in(const Block* b) const noexcept;
  /// seg is released: no longer listed.
  void forget(Segment* seg);

 private:
  // Shrinks the page range [first, end) to the whole chunks inside it.
  static void whole_chunks(const Segment* seg, std::size_t& first, std::size_t& end) noexcept;
  bool straddles_chunk(const Block* b) const noexcept;  // a chunk reaches across one of b's edges
  void split_chunks(Arena& a, Block* b);                // unmaps those chunks (they hold no data)
  bool map_block_pages(Arena& a, Block* b, std::size_t bytes);  // ensure_mapped past its inline check
  // Maps pages [first, end) of b's segment as chunks of `chunk` pages; throws OOM.
  void map_chunk(Arena& a, Block* b, std::size_t bytes, std::size_t first, std::size_t end, std::size_t chunk);

  bool on_ = false;              // resolved from options + upstream support
  bool costly_ = false;          // on_ over an upstream without cheap page mapping
  std::size_t page_size_ = 0;    // upstream page size when on
  int page_shift_ = 0;           // log2(page_size_): page numbers by shifts, not 64-bit divisions
  std::size_t chunk_pages_ = 1;  // options' chunk_pages resolved (Note [Physical chunks])
  std::size_t strand_pages_ = 0;  // options' chunk_strand_pages, or the floor of the auto rule
  bool strand_auto_ = false;      // chunk_strand_pages auto where mapping is costly (Note [Stranded pages])
  // Pages a chunk may leave outside a block it is not split under.
  std::size_t strand_allowance() const noexcept;
  // The most room a cycling loop may earn (Note [A loop that cycles at the mark]).
  std::int64_t room_cap() const noexcept;
  std::vector<Segment*> segments_;
  struct ReleaseCandidate {
    std::uintptr_t start;  // address of page `first`: the release order's key, computed once
    Segment* seg;
    std::size_t first, end;  // pages wholly inside a free block
  };
  std::vector<ReleaseCandidate> candidates_;  // scratch of release_free_pages
  std::int64_t high_water_ = 0;  // highest reserved total so far (Note [Expandable segments])
  // Note [A loop that cycles at the mark]:
  double slack_fraction_ = 0;               // options' release_slack resolved
  std::int64_t allocated_high_ = 0;         // highest allocated bytes seen when pages were mapped
  std::int64_t room_ = 0;  // invariant: 0 <= room_ <= room_cap() (when it grew)
};

// Inline: once warm most slow-path allocations on an expandable segment end
// at this check (GPT-2 replay: 32k of 42k calls), and as a call
// the out-of-line function's register saves cost more than the check.
inline bool ExpandableSegments::ensure_mapped(Arena& a, Block* b, std::size_t bytes) {
  const Segment* seg = b->segment;
  if (chunk_pages_ > 1 && straddles_chunk(b)) split_chunks(a, b);
  if (page_ceil(b->addr + b->size - seg->addr) <= seg->mapped_limit && seg->holes == 0) return false;
  return map_block_pages(a, b, bytes);
}

// Inline: ensure_mapped asks on every pool allocation from an expandable
// segment, and almost always no chunk straddles (Note [Physical chunks]).
inline bool ExpandableSegments::straddles_chunk(const Block* b) const noexcept {
  const Segment* seg = b->segment;
  // A chunk straddles the boundary before page q when q is mapped but does
  // not begin a chunk.
  auto cut = [seg](std::size_t q) { return q < seg->mapped_limit && seg->mapped[q] && !seg->head[q]; };
  const std::size_t s = b->addr - seg->addr, e = s + b->size;
  const std::size_t mask = page_size_ - 1;
  // At an edge inside a page, that page (shared with the neighbour) must be
  // a chunk of its own: no chunk may cross either of its boundaries.
  return cut(s >> page_shift_) || ((s & mask) != 0 && cut((s >> page_shift_) + 1)) || cut(e >> page_shift_) ||
         ((e & mask) != 0 && cut((e >> page_shift_) + 1));
}

}  // namespace genesis::memory::detail
