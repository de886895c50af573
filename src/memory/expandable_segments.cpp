// Expandable segments of an arena, on virtual memory (detail/expandable_segments.h).
//
// Note [Expandable segments]: with classic segments a freed block can only be
// reused for requests that fit inside it, and a segment goes back to the
// device only when every block in it is free: a training step that frees
// many mid-sized tensors leaves gigabytes "reserved but unusable". Here each
// pool and stream gets one address range as large as the device (address
// space is plentiful), and physical pages (2 MiB) are mapped under blocks
// only while something needs them:
//   - an allocation takes the best-fitting free range of addresses and maps
//     the pages it touches that are not mapped yet;
//   - free blocks merge with free neighbours as usual and keep their pages
//     mapped (the cache);
//   - when mapping would push reserved memory above its high-water mark, the
//     pages lying wholly inside free blocks are unmapped first, so the peak
//     grows only when the live data needs more pages than ever before, and
//     between peaks nothing is unmapped or mapped again (no churn in a
//     steady training loop);
//   - compact() and empty_cache() unmap every free page at once; on out of
//     memory they are unmapped before the request fails.
// "Reserved" counts mapped pages. Unmapping is not stream-ordered, so the
// segment's stream is synchronised before pages are unmapped.
// With sizes that never settle (64 live random sizes) pages are still mapped
// and unmapped in steady state: best fit places a request by size, the pages
// it needs are not all mapped, and at the high-water mark as many free pages
// elsewhere are unmapped. With CUDA's driver costs (Note [Simulated mapping
// costs]) that is ~1 us per pair. A fixed slack of free mapped memory above
// the mark stops it, but even 32 MiB of slack raised the GPT-2 trace's
// reserved/live, and preferring wholly mapped blocks did not reduce it (see
// bench/RESULTS.md); where mapping is expensive a bounded room that only a
// cycling loop earns is kept instead (Note [A loop that cycles at the
// mark]), and classic segments stay the default there.
//
// Note [New peaks empty the thread caches]: a block parked in a thread cache
// is free memory that no other request can see and that cannot merge with
// its free neighbours, so the pages under it stay mapped. Reserved memory is
// judged at its peak, and a cache of any size is full at that moment: on
// KV-cache serving (small blocks of a new size every token) the caches held
// a fifth of the live bytes when the pool reached its high-water mark. So
// before the pool maps pages past the mark, every thread's cache goes back
// to the pool (every pool and stream: their pages are released alike), and
// only then are free pages unmapped to make room. A growing program refills
// its caches while it grows, and a steady loop reaches no new peak; but with
// sizes that never settle (`mixed`) the mark is reached in steady state, and
// there this costs about two thirds more instructions per pair. Emptying
// the caches only when the pool's own free pages fell short cost as much
// and kept more memory; so did a cache of a few megabytes instead of this
// (bench/RESULTS.md). On the recorded corpus the default thread cache then
// reserves about what no thread cache does (bench/RESULTS.md, "The trace
// corpus").
//
// Note [Physical chunks]: the CUDA driver charges per physical allocation,
// not per byte: ~7 us to create and map one, ~22 us to set its access rights
// (even when one call covers many), ~22 us to unmap and release it, whether
// it is 2 MiB or 128 MiB (bench/vmm_bench.cpp, H200). With a handle per 2 MiB
// page the GPT-2 replay mapped ~8,200 handles: 29 us per event on the GPU,
// against PyTorch's 1.5 (its expandable segments: 4.1, with 20 MiB handles).
// So pages are mapped in chunks, one handle each (chunk_pages, 64 on CUDA):
//   - the pages a block lies wholly over become chunks of up to chunk_pages;
//     a page it shares with a neighbour becomes a chunk of its own;
//   - a chunk is unmapped whole, so release_free_pages and compact take the
//     chunks wholly inside free blocks;
//   - so that a chunk never holds both live data and free pages that could
//     be released (which would keep them reserved for as long as the data
//     lives: with plain large chunks the GPT-2 trace reserved up to 1.11x its
//     live bytes), a block taken from free memory that covers part of a chunk
//     splits it first (split_chunks): the chunk backs nothing but that block,
//     which holds no data yet, and free blocks, so it is unmapped whole, and
//     the block's own pages are mapped again as chunks of their own.
// Invariant: a chunk of several pages lies inside one block's whole pages,
// except for the pages chunk_strand_pages lets a chunk keep past a block
// (Note [Stranded pages]); a page shared by two blocks is a chunk alone.
// Measured on the GPT-2 trace
// (simulated device with CUDA's costs, bench/RESULTS.md): the same 1.005x
// reserved/live as a handle per page, with 2,740 chunks mapped instead of
// 8,174. chunk_strand_pages trades a little memory for fewer splits.
// Where mapping is cheap (the simulated device without costs) a chunk is one
// page: nothing to save, and none of the splitting work.
//
// Note [Stranded pages]: splitting a chunk costs an unmap and one to three
// maps (~50 us each on an H200), and its freed pages usually come back as
// more maps when the next block lands on them. Leaving the chunk whole
// instead strands its pages outside the block: free, but unreleasable until
// the block goes. Whether that costs memory depends on the workload: on
// bert_dynamic (dynamic padding: every step's sizes differ) never splitting
// cut the driver calls 8x at the same peak reserved; on llm_serve (a KV
// cache grown token by token) and long_run it reserved 1.05-1.10x the live
// bytes instead of 1.016. A fixed allowance of pages did not scale: one
// page is a quarter of a percent of llm_serve's 770 MB and nothing on a
// 14 GB job, where four pages still cost nothing. So where mapping is
// costly the allowance is one page or 0.3% of the highest allocated bytes
// so far, whichever is more, for each chunk a block would split (a chunk
// spans at most chunk_pages pages). On the recorded corpus with
// CUDA's costs simulated: the same peak reserved per live byte on every
// trace (one lower), 1.7x fewer driver calls in geometric mean (3.1x on
// bert_dynamic; 2.7x on the GPT-2 trace, at 1.015 instead of 1.014); at
// 0.8% multi_stream passed 1.02 and the GPT-2 trace reached 1.029; at 0.2%
// 18% more calls were left. On an H200 the corpus replay took 1.9x less
// time per event, and BERT and GPT-2 training mapped 3-4x fewer chunks
// (bench/RESULTS.md). What strands still counts as reserved, and goes when
// the block does.
//
// Note [Settled segments]: unmapping is not stream-ordered, so before pages
// of free blocks are unmapped the segment's stream is synchronised: work
// queued before a block was freed may still use its memory, and the host
// stalls until the stream drains. One wait covers every block that was free
// at that moment, so a segment remembers it (Segment::settled) until a block
// of it goes back to the pool (Pool::give_back); until then unmaps need no
// new wait. On the corpus this halves the waits of chunk splits and
// releases (GPT-2 replay: 1,446 -> 724). It did not change the step rate of
// GPT-2 or ResNet-50 training on an H200 (bench/RESULTS.md, "Genesis as
// PyTorch's allocator"): there the driver's map and unmap calls are the cost.
//
// Note [A loop that cycles at the mark]: a training loop that repeats the
// same step still maps and unmaps pages every step. At the step's peak the
// pages of blocks that were free at that moment go, to keep reserved memory
// at the mark; after the peak, blocks placed by size land on some of those
// pages again and map them, and the next peak unmaps them once more. The
// pages a step touches over its whole length exceed those it holds at its
// peak by about 1-2% (ResNet-50 under PyTorch on an H200: 2,958 chunks
// mapped in 43 steps, 0.74x the step rate of PyTorch's own allocator). So
// the mark may stand above the highest allocated bytes by a room that each
// release at the mark earns with what it gave back, up to release_slack of
// the allocated peak (auto: 1.5% where mapping is expensive, none where it
// is cheap, as on the simulated device without costs, whose replays it
// would only make larger). The room may always reach a page per segment:
// below ~130 MB allocated 1.5% is less than one 2 MiB page, and a loop that
// takes a 64 MiB block from one pool and a 1 MiB one from another (two
// segments, whose pages are not shared) unmapped the 64 MiB chunk to map
// the small pool's page and mapped it again for the large block, twice per
// iteration for ever (~230 us per iteration at CUDA's simulated costs);
// with a page of room it maps twice in all. Reserved memory stays within
// max(the strict mark, the allocated peak + the room's cap); room is earned
// only by releases at the mark, so a program that only grows keeps none.
// On the same ResNet-50 job with 1% room: 1,809 chunks mapped, 0.84-0.90x
// PyTorch's step rate, 1.010 reserved per requested byte (PyTorch's
// expandable segments: 1.017); the loop settled only once threads no longer
// cached blocks (Note [Thread caches over costly mappings]).
// The rest of the churn is chunk splits (Note [Physical chunks]); leaving
// chunks whole while there is room made the recorded corpus replay 40%
// faster on the simulated device but left pages no release could reach
// (1.046 reserved per live byte on epochs_eval), and bounding them by the
// room took the speed back.
//
// Note [Thread caches over costly mappings]: a loop settles only if every
// step places its blocks as the step before did: then the pages it touches
// are those it touched before, and nothing is mapped or unmapped. Blocks
// that threads hold in their caches break that. Under PyTorch the forward
// pass allocates on the program's thread and the backward pass on the
// autograd engine's; a large block parked in one thread's cache (Note
// [Parked large blocks]) is invisible to the other until a search or a new
// peak sends it back, and when that happens depends on the threads' timing,
// so the next step lands elsewhere and maps again. ResNet-50 training on
// an H200 (bench/RESULTS.md): with the thread cache, 1,949 chunks mapped in
// 63 steps at 0.85x the step rate of PyTorch's own allocator; without it
// (or without parking) 709, all in the first steps, at 0.99-1.00x, with
// 1.013 reserved per requested byte (PyTorch's expandable segments: 1.017).
// Replayed on one thread the same requests settle either way: the timing
// is the cause. So where mapping is costly, thread_cache auto means off
// over expandable segments: what the cache saves (tens of nanoseconds a
// call) is less than one mapping (~50 us). Turning off parking alone kept
// the cache's small blocks but reserved 1.025 of the live bytes on the
// llm_serve trace (simulated device at CUDA's costs) against 1.016 without
// the cache. The room settled at 1.3% above the allocated peak there,
// more than 1% (which kept 1,261 chunk maps, 0.93x), hence release_slack
// auto of 1.5% where mapping is costly.
#include <algorithm>
#include <bit>
#include <cstring>

#include "genesis/memory/detail/expandable_segments.h"

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory::detail {

namespace {

// The first page in [i, end) whose mapped flag is `flag`, or end. The flags
// are only ever 0 or 1, so memchr finds either kind; it is vectorised, where
// the byte-by-byte run scans it replaces were most of ensure_mapped's
// instructions when it maps (a block of the GPT-2 replay spans ~16 pages).
std::size_t next_page_flagged(const std::uint8_t* mapped, std::size_t i, std::size_t end, int flag) noexcept {
  if (i >= end) return end;
  const void* p = std::memchr(mapped + i, flag, end - i);
  return p != nullptr ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(p) - mapped) : end;
}

// How far reserved memory would pass the mark if `need` more bytes were
// mapped while `allocated` bytes are out (Note [Expandable segments]; the
// mark may stand above the allocated peak by the room, Note [A loop that
// cycles at the mark]). Positive: free pages must be unmapped first.
std::int64_t past_mark(std::int64_t reserved, std::size_t need, std::int64_t allocated, std::int64_t high_water,
                       std::int64_t allocated_high, std::int64_t room) noexcept {
  return reserved + static_cast<std::int64_t>(need) - std::max(high_water, std::max(allocated_high, allocated) + room);
}

}  // namespace

void ExpandableSegments::configure(const UpstreamResource& upstream, const AllocatorOptions& options) {
  using Expandable = AllocatorOptions::Expandable;
  GENESIS_CHECK(options.expandable_segments != Expandable::kOn || upstream.supports_virtual_memory(),
                "expandable segments need an upstream with virtual memory support; '", upstream.name(),
                "' has none (use Expandable::kAuto to fall back to classic segments)");
  on_ = upstream.supports_virtual_memory() &&
        (options.expandable_segments == Expandable::kOn ||
         (options.expandable_segments == Expandable::kAuto && upstream.cheap_page_mapping()));
  costly_ = on_ && !upstream.cheap_page_mapping();
  strand_auto_ = options.chunk_strand_pages == AllocatorOptions::kAutoStrandPages && costly_;
  strand_pages_ = options.chunk_strand_pages == AllocatorOptions::kAutoStrandPages ? (costly_ ? 1 : 0)
                                                                                   : options.chunk_strand_pages;
  if (!on_) return;
  page_size_ = upstream.page_size();
  GENESIS_CHECK(page_size_ >= kAlignment && (page_size_ & (page_size_ - 1)) == 0,
                "upstream page size must be a power of two >= 512, got ", page_size_);
  page_shift_ = std::countr_zero(page_size_);
  chunk_pages_ = options.chunk_pages != 0 ? options.chunk_pages : costly_ ? 64 : 1;
  slack_fraction_ = options.release_slack >= 0 ? options.release_slack : costly_ ? 0.015 : 0.0;
}

void ExpandableSegments::forget(Segment* seg) {
  segments_.erase(std::remove(segments_.begin(), segments_.end(), seg), segments_.end());
}

// Expandable segments rarely become wholly free; their idle cache is the
// free pages inside, released when the segment has been idle long enough.
std::size_t ExpandableSegments::release_idle_pages(Arena& a, std::uint64_t idle_before_ns) {
  std::size_t released = 0;
  for (Segment* seg : std::vector<Segment*>(segments_)) {
    if (seg->last_used_ns > idle_before_ns) continue;
    a.pool_.free_index(seg->pool).for_each([&](Block* b) {
      if (b->segment != seg) return;
      std::size_t first = page_ceil(b->addr - seg->addr);
      std::size_t end = std::min(seg->mapped_limit, page_floor(b->addr + b->size - seg->addr));
      if (first >= end) return;
      whole_chunks(seg, first, end);
      if (first < end) released += unmap_range(a, seg, first, end);
    });
  }
  return released;
}

Segment* ExpandableSegments::segment_for(Arena& a, PoolId pool, StreamId stream) {
  for (Segment* seg : segments_)
    if (seg->pool == pool && seg->stream == stream) return seg;
  // As large as the device, so one range serves the whole pool. Address
  // space is finite too (the simulated device gives each index 4 TiB, a
  // process shares the GPU's with every library): a program with several
  // streams needs two ranges per stream, and when a device-sized one no
  // longer fits, a smaller one still serves that stream's pool, down to
  // 1/64 of the device. Below that, or when even that fails, the pool uses
  // classic segments (the caller grows), as it does for a request too large
  // for what is left of its range.
  const std::size_t total = a.total_capacity_ > 0 ? a.total_capacity_ : (std::size_t{64} << 30);
  std::size_t va = (total + page_size_ - 1) / page_size_ * page_size_;
  const std::size_t smallest = std::max(page_size_, va / 64);
  std::uintptr_t addr = a.upstream_->reserve_address_range(va);
  while (addr == 0 && va / 2 >= smallest) {
    va = va / 2 / page_size_ * page_size_;
    addr = a.upstream_->reserve_address_range(va);
  }
  if (addr == 0) return nullptr;  // caller falls back to classic segments
  Segment* seg = a.pool_.add_segment(addr, va, pool, stream, /*expandable=*/true);
  // seg->mapped grows with mapped_limit (ensure_mapped): a device-sized range
  // has up to a million pages, and clearing them all would cost the first
  // allocation ~0.1 ms.
  seg->mapped.reserve(64);
  seg->head.reserve(64);
  segments_.push_back(seg);
  a.stats_.note_segment_added(pool);
  return seg;
}

std::size_t ExpandableSegments::mapped_in(const Block* b) const noexcept {
  const Segment* seg = b->segment;
  if (!seg->expandable) return b->size;
  const std::size_t first = page_floor(b->addr - seg->addr);
  const std::size_t end = std::min(seg->mapped_limit, page_ceil(b->addr + b->size - seg->addr));
  std::size_t n = 0;
  for (std::size_t i = first; i < end; ++i) n += seg->mapped[i];
  return std::min(b->size, n * page_size_);
}

void ExpandableSegments::whole_chunks(const Segment* seg, std::size_t& first, std::size_t& end) noexcept {
  // The tail of a chunk that begins below `first` stays.
  while (first < end && seg->mapped[first] && !seg->head[first]) ++first;
  // So does a chunk that runs on past `end`: back to its head (the pages in
  // between are mapped, being one chunk).
  if (end < seg->mapped_limit && seg->mapped[end] && !seg->head[end]) {
    while (end > first && !seg->head[end - 1]) --end;
    if (end > first) --end;
  }
  if (end < first) end = first;
}

std::size_t ExpandableSegments::unmap_range(Arena& a, Segment* seg, std::size_t first, std::size_t end) {
  std::size_t released = 0;
  bool synced = false;
  for (std::size_t i = next_page_flagged(seg->mapped.data(), first, end, 1); i < end;
       i = next_page_flagged(seg->mapped.data(), i, end, 1)) {
    const std::size_t j = next_page_flagged(seg->mapped.data(), i, end, 0);
    if (!synced && !seg->settled) {
      a.upstream_->synchronize_stream(seg->stream);  // no work may still touch these pages
      synced = true;
      seg->settled = true;
    }
    const std::uintptr_t addr = seg->addr + i * page_size_;
    const std::size_t bytes = (j - i) * page_size_;
    a.upstream_->unmap_pages(addr, bytes);
    std::fill(seg->mapped.begin() + static_cast<std::ptrdiff_t>(i), seg->mapped.begin() + static_cast<std::ptrdiff_t>(j),
              std::uint8_t{0});
    std::fill(seg->head.begin() + static_cast<std::ptrdiff_t>(i), seg->head.begin() + static_cast<std::ptrdiff_t>(j),
              std::uint8_t{0});
    seg->mapped_bytes -= bytes;
    a.add_reserved(seg->pool, -static_cast<std::int64_t>(bytes));
    a.stats_.counters.reserved_freed[seg->pool] += static_cast<std::int64_t>(bytes);
    ++a.stats_.counters.num_upstream_frees;
    if (a.events_.on())
      a.record_event(nullptr, EventAction::kSegmentFree, addr, bytes, bytes, seg->stream, 0, false);
    released += bytes;
    i = j;
  }
  seg->holes += released / page_size_;
  while (seg->mapped_limit > 0 && !seg->mapped[seg->mapped_limit - 1]) {
    --seg->mapped_limit;
    --seg->holes;
  }
  return released;
}

std::size_t ExpandableSegments::release_free_pages(Arena& a, std::size_t at_least) {
  if (segments_.empty()) return 0;
  // Free blocks can hold a whole mapped page only if reserved memory exceeds
  // what is out of the pool by a page: while a program grows (every new page
  // is a new peak) that is rarely so, and the scan below is skipped.
  const std::int64_t slack = a.stats_.reserved_total() - a.stats_.out_total() - a.stats_.counters.pending_bytes[0] -
                             a.stats_.counters.pending_bytes[1];
  if (slack < static_cast<std::int64_t>(page_size_)) return 0;
  // Pages wholly inside free blocks (their neighbours may use the pages at
  // either end of a block).
  std::vector<ReleaseCandidate>& candidates = candidates_;  // reused: no allocation per call
  candidates.clear();
  for (int p = 0; p < kNumPools; ++p) {
    const FreeIndex& index = a.pool_.free_index(p);
    // Only blocks of a page or more can hold a whole page.
    index.for_each_at_least(page_size_, [&](Block* b) {
      Segment* seg = b->segment;
      if (!seg->expandable) return;
      std::size_t first = page_ceil(b->addr - seg->addr);
      std::size_t end = std::min(seg->mapped_limit, page_floor(b->addr + b->size - seg->addr));
      if (first >= end) return;
      if (chunk_pages_ > 1) whole_chunks(seg, first, end);  // else every page is a chunk
      if (first < end) candidates.push_back(ReleaseCandidate{seg->addr + (first << page_shift_), seg, first, end});
    });
  }
  // Highest addresses first: best fit breaks ties towards low addresses, so
  // the cache near the bottom is the one most likely to be reused. Usually
  // one or two candidates cover what is needed (a new peak needs a few
  // pages), so the first few are picked by a linear scan for the highest,
  // moved to the end: building a heap of every candidate cost about half of
  // this function's instructions in the GPT-2 replay. A release that needs
  // more than kLinearPicks candidates heaps the rest, so a long release
  // stays O(n log n). The keys are distinct (the blocks do not overlap), so
  // the order is the same either way.
  constexpr int kLinearPicks = 4;
  auto lower = [](const ReleaseCandidate& x, const ReleaseCandidate& y) { return x.start < y.start; };
  const bool partial = at_least != SIZE_MAX;
  std::size_t released = 0;
  int picks = 0;
  for (auto top = candidates.end(); top != candidates.begin() && released < at_least;) {
    if (partial) {
      if (picks < kLinearPicks) {
        auto best = candidates.begin();
        for (auto it = best + 1; it != top; ++it)
          if (it->start > best->start) best = it;
        std::iter_swap(best, top - 1);
        if (++picks == kLinearPicks) std::make_heap(candidates.begin(), top - 1, lower);
      } else {
        std::pop_heap(candidates.begin(), top, lower);
      }
    }
    const ReleaseCandidate& c = *--top;
    std::size_t first = c.first;
    if (partial) {
      // Release the block's top mapped pages only, as many as still needed,
      // down to the head of the chunk that holds the lowest of them. Counted
      // as mapped pages, not as a span from the top: a free block may have
      // holes (its top pages unmapped by an earlier release), and a span
      // over them released nothing while the pages below stayed mapped.
      std::size_t pages = page_ceil(at_least - released);
      const std::uint8_t* mapped = c.seg->mapped.data();
      first = c.end;
      while (first > c.first && pages > 0) {
        if (!mapped[first - 1]) {  // skip a hole in one step: the last mapped page below it
          const void* p = memrchr(mapped + c.first, 1, first - c.first);
          if (p == nullptr) { first = c.first; break; }
          first = static_cast<std::size_t>(static_cast<const std::uint8_t*>(p) - mapped) + 1;
        }
        --first;
        --pages;
      }
      while (first > c.first && mapped[first] && !c.seg->head[first]) --first;
    }
    released += unmap_range(a, c.seg, first, c.end);
  }
  return released;
}

std::size_t ExpandableSegments::unmapped_under(const Block* b, std::size_t size) const noexcept {
  const Segment* seg = b->segment;
  const std::size_t first = page_floor(b->addr - seg->addr);
  const std::size_t end = page_ceil(b->addr + size - seg->addr);
  const std::size_t mapped_end = std::min(end, seg->mapped_limit);
  std::size_t n = end - mapped_end;  // past the limit nothing is mapped
  if (first < mapped_end && seg->holes != 0)
    n += static_cast<std::size_t>(std::count(seg->mapped.begin() + static_cast<std::ptrdiff_t>(first),
                                             seg->mapped.begin() + static_cast<std::ptrdiff_t>(mapped_end),
                                             std::uint8_t{0}));
  return n * page_size_;
}

bool ExpandableSegments::passes_mark(const Arena& a, std::size_t need, std::size_t size) const noexcept {
  if (need == 0) return false;
  const std::int64_t allocated =
      a.stats_.out_total() - a.thread_cached_total_locked() + static_cast<std::int64_t>(size);
  return past_mark(a.stats_.reserved_total(), need, allocated, high_water_, allocated_high_, room_) > 0;
}

bool ExpandableSegments::map_block_pages(Arena& a, Block* b, std::size_t bytes) {
  Segment* seg = b->segment;
  const std::size_t first = page_floor(b->addr - seg->addr);
  const std::size_t end = page_ceil(b->addr + b->size - seg->addr);
  // ensure_mapped answered the common case (no holes, nothing past the limit).
  // With holes (after any unmap) every allocation checks its pages: one
  // vectorised scan for an unmapped page (memchr) answers the usual "all
  // mapped" case; a byte-by-byte count here was ~40% of ensure_mapped in the
  // GPT-2 replay (16 pages per call on average).
  if (end <= seg->mapped_limit && std::memchr(seg->mapped.data() + first, 0, end - first) == nullptr) return false;
  if (seg->mapped.size() < end) {
    const std::size_t n = std::max(end, 2 * seg->mapped.size());
    seg->mapped.resize(n, 0);
    seg->head.resize(n, 0);
  }
  const std::size_t need = unmapped_under(b, b->size);
  if (need == 0) return false;

  auto reserved_total = [&]() { return a.stats_.reserved_total(); };
  // Note [A loop that cycles at the mark]: the mark may stand above the
  // highest allocated bytes by the room a cycling loop earned.
  const std::int64_t thread_cached = a.thread_cached_total_locked();
  const std::int64_t allocated = a.stats_.out_total() - thread_cached + static_cast<std::int64_t>(b->size);
  allocated_high_ = std::max(allocated_high_, allocated);
  const std::int64_t over = past_mark(reserved_total(), need, allocated, high_water_, allocated_high_, room_);
  if (over > 0) {
    // A new peak: first give back just as many pages that back nothing (b is
    // out of the free index, so its own pages are safe). Only as many: the
    // other free pages are the cache that later requests reuse without
    // mapping; unmapping them all made a GPU remap them again and again.
    // Blocks parked in thread caches go back first (Note [New peaks empty
    // the thread caches]).
    if (a.options_.thread_cache_flush_at_peak && thread_cached != 0) a.reclaim_thread_caches(true);
    const std::size_t released = release_free_pages(a, static_cast<std::size_t>(over));
    room_ = std::min(room_cap(), room_ + static_cast<std::int64_t>(released));
  }
  // Note [Physical chunks]: the pages b lies wholly over become chunks of
  // up to chunk_pages; its first and last page, when it shares them with a
  // neighbour, become chunks of their own, so that when b is free again its
  // chunks lie wholly inside free memory and can be unmapped.
  const std::size_t inner_first = page_ceil(b->addr - seg->addr);
  const std::size_t inner_end = page_floor(b->addr + b->size - seg->addr);
  for (std::size_t i = next_page_flagged(seg->mapped.data(), first, end, 0); i < end;
       i = next_page_flagged(seg->mapped.data(), i, end, 0)) {
    const std::size_t j = next_page_flagged(seg->mapped.data(), i, end, 1);
    if (chunk_pages_ == 1) {
      map_chunk(a, b, bytes, i, j, 1);  // a page per chunk, the run in one call
      i = j;
      continue;
    }
    while (i < j) {
      const std::size_t e = i < inner_first || i >= inner_end ? i + 1 : std::min({j, i + chunk_pages_, inner_end});
      map_chunk(a, b, bytes, i, e, e - i);
      i = e;
    }
  }
  high_water_ = std::max(high_water_, reserved_total());
  return true;
}

void ExpandableSegments::split_chunks(Arena& a, Block* b) {
  Segment* seg = b->segment;
  const std::size_t s = b->addr - seg->addr, e = s + b->size;
  const std::size_t mask = page_size_ - 1;
  std::size_t edges[4];
  int n = 0;
  edges[n++] = s >> page_shift_;
  if ((s & mask) != 0) edges[n++] = (s >> page_shift_) + 1;
  edges[n++] = e >> page_shift_;
  if ((e & mask) != 0) edges[n++] = (e >> page_shift_) + 1;
  for (int k = 0; k < n; ++k) {
    const std::size_t q = edges[k];
    if (q >= seg->mapped_limit || !seg->mapped[q] || seg->head[q]) continue;
    std::size_t h = q, t = q + 1;
    while (h > 0 && !seg->head[h]) --h;
    while (t < seg->mapped_limit && seg->mapped[t] && !seg->head[t]) ++t;
    // Only a chunk that backs nothing but b and free blocks may go: b has
    // no data yet, free blocks none that matters. (Chunks are made so that
    // this always holds; the check keeps a live neighbour's pages mapped if
    // it ever did not.)
    const std::uintptr_t lo = seg->addr + (h << page_shift_), hi = seg->addr + (t << page_shift_);
    bool safe = true;
    for (const Block* x = b->prev; safe && x != nullptr && x->addr + x->size > lo; x = x->prev)
      safe = x->load_state() == BlockState::kFree;
    for (const Block* x = b->next; safe && x != nullptr && x->addr < hi; x = x->next)
      safe = x->load_state() == BlockState::kFree;
    if (!safe) continue;
    // A chunk that reaches only a few pages past b stays whole: those pages
    // stay mapped until b is freed, which costs less than unmapping the
    // chunk now and mapping b's part again (chunk_strand_pages).
    // Pages b shares with a neighbour count as outside.
    const std::size_t b_first = (s + mask) >> page_shift_, b_end = e >> page_shift_;
    const std::size_t lo_in = std::max(h, b_first), hi_in = std::min(t, b_end);
    const std::size_t inside = hi_in > lo_in ? hi_in - lo_in : 0;
    if ((t - h) - inside <= strand_allowance()) continue;
    unmap_range(a, seg, h, t);
  }
}

std::int64_t ExpandableSegments::room_cap() const noexcept {
  if (slack_fraction_ <= 0) return 0;
  // Note [A loop that cycles at the mark]: a fraction of the allocated peak,
  // but never less than a page for each segment, or a small program would
  // never settle.
  const auto fraction = static_cast<std::int64_t>(slack_fraction_ * static_cast<double>(allocated_high_));
  return std::max(fraction, static_cast<std::int64_t>(page_size_ * segments_.size()));
}

std::size_t ExpandableSegments::strand_allowance() const noexcept {
  if (!strand_auto_) return strand_pages_;
  // Note [Stranded pages]: 0.3% of the highest allocated bytes so far, in pages.
  const auto high_pages = static_cast<std::size_t>(allocated_high_ > 0 ? allocated_high_ : 0) >> page_shift_;
  return std::max(strand_pages_, high_pages * 3 / 1000);
}

void ExpandableSegments::map_chunk(Arena& a, Block* b, std::size_t bytes, std::size_t i, std::size_t j,
                                   std::size_t chunk) {
  Segment* seg = b->segment;
  const std::uintptr_t addr = seg->addr + i * page_size_;
  const std::size_t run = (j - i) * page_size_;
  const std::size_t chunk_bytes = chunk * page_size_;
  bool capped = false;
  auto fits_cap = [&]() {
    capped = a.memory_limit_ != SIZE_MAX &&  // all arenas together (Note [Arenas])
             static_cast<std::size_t>(a.family_reserved_->load(std::memory_order_relaxed)) + run > a.memory_limit_;
    return !capped;
  };
  bool ok = fits_cap() && a.upstream_->map_pages(addr, run, chunk_bytes);
  if (!ok) {
    if (!capped) ++a.stats_.counters.num_upstream_failures;
    // Out of memory: make every cached byte releasable, release it, retry.
    ++a.stats_.counters.num_cache_flushes;
    a.wait_all_pending();
    a.reclaim_thread_caches(true);
    release_free_pages(a);
    a.release_free_segments(UINT64_MAX, nullptr);
    ok = fits_cap() && a.upstream_->map_pages(addr, run, chunk_bytes);
    if (!ok && a.arena_limit_ > 1 && a.release_other_arenas()) ok = fits_cap() && a.upstream_->map_pages(addr, run, chunk_bytes);
    if (!ok && !capped && chunk > 1) {
      // One large physical allocation may fail where pages still fit: the
      // cache is already released, so just ask again a page per chunk.
      ok = a.upstream_->map_pages(addr, run, page_size_);
      if (ok) chunk = 1;
    }
    if (!ok) {
      if (!capped) ++a.stats_.counters.num_upstream_failures;
      const StreamId stream = b->stream;
      a.pool_.give_back(b);  // the request fails; pages mapped so far are free cache
      // Pages are mapped whole: name them, since the request may be smaller.
      const std::string pages = genesis::detail::format_bytes(run) + " of pages (" + std::to_string(j - i) + " x " +
                                genesis::detail::format_bytes(page_size_) + ") had to be mapped for it";
      a.throw_oom(bytes, stream,
                capped ? pages + ", which would take reserved memory past the memory fraction cap (set_memory_fraction)"
                       : pages + " and the device has no free physical memory for them");
    }
  }
  std::fill(seg->mapped.begin() + static_cast<std::ptrdiff_t>(i), seg->mapped.begin() + static_cast<std::ptrdiff_t>(j),
            std::uint8_t{1});
  if (chunk == 1) {
    std::fill(seg->head.begin() + static_cast<std::ptrdiff_t>(i), seg->head.begin() + static_cast<std::ptrdiff_t>(j),
              std::uint8_t{1});
  } else {
    for (std::size_t k = i; k < j; k += chunk) seg->head[k] = 1;
  }
  seg->mapped_bytes += run;
  // Pages of this run below the old limit were holes; new ones above it
  // leave holes between the old limit and i.
  if (i < seg->mapped_limit) {
    seg->holes -= std::min(j, seg->mapped_limit) - i;
  }
  if (j > seg->mapped_limit) {
    const std::size_t start = std::max(i, seg->mapped_limit);
    seg->holes += start - seg->mapped_limit;  // skipped pages between the old limit and this run
    seg->mapped_limit = j;
  }
  a.add_reserved(seg->pool, static_cast<std::int64_t>(run));
  a.stats_.counters.reserved_allocated[seg->pool] += static_cast<std::int64_t>(run);
  ++a.stats_.counters.num_upstream_allocs;
  if (a.events_.on())
    a.record_event(nullptr, EventAction::kSegmentAlloc, addr, run, run, seg->stream, 0, false);
}


}  // namespace genesis::memory::detail
