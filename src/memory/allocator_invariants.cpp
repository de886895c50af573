// Caching allocator: the debug check of its internal invariants.
//
// Note [Allocator invariants]: what check_invariants() verifies, per arena,
// under every arena's mutex. What the pool alone guards (always checked):
//   - segments tile their range exactly: the first block starts at the
//     segment, each block ends where the next begins, the last ends with the
//     segment; neighbour links agree both ways; every block names its
//     segment, pool, stream and arena; sizes are non-zero multiples of 512;
//     no block is dead, and no two free blocks are neighbours (they merge);
//   - the pointer map finds every block at its address and holds nothing
//     else; the free index holds exactly the free blocks, each under its own
//     size class and stream, with both bitmap levels exact (FreeIndex::check);
//   - reserved bytes are the classic segments' sizes plus the pages mapped in
//     expandable ones, whose page flags agree with mapped_bytes,
//     mapped_limit and holes, and under whose non-free blocks every page is
//     mapped;
//   - bytes out of the pool (allocated or in a thread cache) are the sizes of
//     the blocks in those states; pending bytes those of pending blocks, each
//     with as many outstanding events as the pending list names; the
//     inactive-split counters those of the free blocks counted as split;
//     segment counts the segments.
// With include_thread_caches (no other thread in the allocator), also:
//   - every thread cache holds only thread-cached blocks of its own arena, in
//     the list of their size and stream; the small-size mask is exact, the
//     lazy masks cover every non-empty list, the list counts and the cache's
//     byte counters match its blocks, and no block is cached twice;
//   - every byte is accounted for: allocated + cached-free + thread-cached +
//     pending = the segments' bytes (= reserved with classic segments), and
//     the statistics' allocated bytes and live allocations are those of the
//     allocated blocks.
// The hot path changes a block between allocated and thread-cached without
// the mutex, so only their sum is checked while other threads may run.
#include <algorithm>
#include <string>
#include <unordered_set>
#include <vector>

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

using genesis::detail::format_address;
using detail::Block;
using detail::BlockState;
using detail::Segment;
using detail::ThreadCache;

namespace {


const char* state_name(BlockState s) {
  switch (s) {
    case BlockState::kFree: return "free";
    case BlockState::kAllocated: return "allocated";
    case BlockState::kThreadCached: return "thread-cached";
    case BlockState::kPending: return "pending";
    case BlockState::kDead: return "dead";
  }
  return "unknown";
}

// Throws with the arena and what broke.
[[noreturn]] void broken(int arena, const std::string& what) {
  throw Error("caching allocator invariant broken in arena " + std::to_string(arena) + ": " + what, __FILE__,
              __LINE__);
}

// Sums per pool, of block sizes by state.
struct Tally {
  std::int64_t by_state[5][detail::kNumPools] = {};
  std::int64_t count[5][detail::kNumPools] = {};
  std::int64_t split_bytes[detail::kNumPools] = {}, split_count[detail::kNumPools] = {};
  std::int64_t segment_bytes[detail::kNumPools] = {}, reserved[detail::kNumPools] = {};
  std::int64_t segments[detail::kNumPools] = {};
  std::size_t blocks = 0;
  std::int64_t bytes(BlockState s, int p) const { return by_state[static_cast<int>(s)][p]; }
};

// One thread's cache: its lists, masks and counters (owner not running).
void check_thread_cache(int arena, std::uint8_t arena_index, const ThreadCache& tc,
                        std::unordered_set<const Block*>& seen, std::int64_t (&cached)[detail::kNumPools]) {
  const std::string who = "thread cache of thread " + std::to_string(tc.thread_number);
  std::int64_t own[detail::kNumPools] = {};
  auto walk = [&](const detail::BlockList& list, std::size_t size, StreamId stream, const char* what) {
    std::uint32_t n = 0;
    for (const Block* b = list.head; b != nullptr; b = b->cache_next) {
      if (++n > list.count) broken(arena, who + ": a " + what + " list holds more blocks than its count");
      if (b->load_state() != BlockState::kThreadCached)
        broken(arena, who + ": holds the " + state_name(b->load_state()) + " block " + format_address(b->addr));
      if (b->arena != arena_index) broken(arena, who + ": holds a block of arena " + std::to_string(b->arena));
      if (b->size != size || b->stream != stream)
        broken(arena, who + ": block " + format_address(b->addr) + " of " + std::to_string(b->size) + " bytes in the list of " +
                          std::to_string(size));
      if (!seen.insert(b).second) broken(arena, who + ": block " + format_address(b->addr) + " is cached twice");
      own[b->pool] += static_cast<std::int64_t>(b->size);
    }
    if (n != list.count) broken(arena, who + ": a " + what + " list holds fewer blocks than its count");
  };
  for (const detail::StreamCache* sc : tc.streams) {
    if (sc == nullptr) continue;
    for (std::size_t i = 0; i < sc->small.size(); ++i) {
      const bool bit = ((sc->small_mask[i >> 6] >> (i & 63)) & 1) != 0;
      if (bit != (sc->small[i].count != 0))
        broken(arena, who + ": small mask bit " + std::to_string(i) + " disagrees with its list");
      if (sc->small_mask[i >> 6] != 0 && ((sc->small_words >> (i >> 6)) & 1) == 0)
        broken(arena, who + ": small mask word " + std::to_string(i >> 6) + " is not marked in small_words");
      walk(sc->small[i], i << detail::kAlignShift, sc->stream, "small");
    }
    std::uint32_t large = 0;
    for (std::size_t i = 0; i < sc->large.size(); ++i) {
      const detail::LargeSlot& slot = sc->large[i];
      if (slot.list.count != 0 && ((sc->large_mask >> i) & 1) == 0)
        broken(arena, who + ": large slot " + std::to_string(i) + " holds blocks but is not marked");
      walk(slot.list, slot.size, sc->stream, "large");
      large += slot.list.count;
    }
    if (large != sc->large_blocks)
      broken(arena, who + ": large_blocks is " + std::to_string(sc->large_blocks) + " but " + std::to_string(large) +
                        " large blocks are cached");
  }
  for (int p = 0; p < detail::kNumPools; ++p) {
    if (tc.cached_bytes[p].get() != own[p])
      broken(arena, who + ": counts " + std::to_string(tc.cached_bytes[p].get()) + " cached bytes in pool " +
                        std::to_string(p) + " but holds " + std::to_string(own[p]));
    cached[p] += own[p];
  }
}

}  // namespace

void CachingAllocator::check_invariants(bool include_thread_caches) const {
  const detail::ArenaSet::Locked view = arenas_.lock_all();
  for (const detail::Arena* a : view.arenas) a->check_arena_invariants(include_thread_caches);
}

void detail::Arena::check_arena_invariants(bool include_thread_caches) const {  // mutex_ held
  const int arena = arena_index_;
  Tally t;
  // Segments and their blocks.
  std::size_t expandable_seen = 0;
  for (const Segment* seg = pool_.segments(); seg != nullptr; seg = seg->next_seg) {
    const std::string where = "segment " + format_address(seg->addr);
    if (seg->next_seg != nullptr && seg->next_seg->prev_seg != seg) broken(arena, where + ": broken segment links");
    if (seg == pool_.segments() && seg->prev_seg != nullptr) broken(arena, where + ": the first segment has a predecessor");
    const int p = seg->pool;
    ++t.segments[p];
    t.segment_bytes[p] += static_cast<std::int64_t>(seg->size);
    const Block* b = seg->first;
    if (b == nullptr || b->prev != nullptr) broken(arena, where + ": no first block, or one with a predecessor");
    std::uintptr_t at = seg->addr;
    for (const Block* prev = nullptr; b != nullptr; prev = b, b = b->next) {
      const std::string blk = where + ", block " + format_address(b->addr);
      if (b->addr != at) broken(arena, blk + ": expected at " + format_address(at) + " (blocks must tile the segment)");
      if (b->prev != prev) broken(arena, blk + ": its prev link disagrees with its neighbour's next");
      if (b->segment != seg || b->pool != seg->pool || b->stream != seg->stream)
        broken(arena, blk + ": names another segment, pool or stream than the one holding it");
      if (b->arena != arena_index_) broken(arena, blk + ": names arena " + std::to_string(b->arena));
      if (b->size == 0 || b->size % detail::kAlignment != 0)
        broken(arena, blk + ": size " + std::to_string(b->size) + " is not a positive multiple of 512");
      const BlockState s = b->load_state();
      if (s == BlockState::kDead) broken(arena, blk + ": a dead block is linked into a segment");
      if (s == BlockState::kFree && prev != nullptr && prev->load_state() == BlockState::kFree)
        broken(arena, blk + ": two free neighbours were not merged");
      if ((s == BlockState::kFree) != (b->free_owner != nullptr))
        broken(arena, blk + ": " + state_name(s) + (b->free_owner != nullptr ? " but in" : " but not in") +
                          " the free index");
      if (s == BlockState::kPending && b->pending_events <= 0)
        broken(arena, blk + ": pending with no outstanding event");
      if (s != BlockState::kFree && b->split_counted) broken(arena, blk + ": counted as inactive split while " +
                                                                        std::string(state_name(s)));
      if (b->split_counted) {
        t.split_bytes[p] += static_cast<std::int64_t>(b->size);
        ++t.split_count[p];
      }
      if (pool_.map().find(b->addr) != b) broken(arena, blk + ": the pointer map does not find it");
      t.by_state[static_cast<int>(s)][p] += static_cast<std::int64_t>(b->size);
      ++t.count[static_cast<int>(s)][p];
      ++t.blocks;
      at = b->addr + b->size;
    }
    if (at != seg->addr + seg->size)
      broken(arena, where + ": blocks end at " + format_address(at) + ", the segment at " + format_address(seg->addr + seg->size));
    if (!seg->expandable) {
      t.reserved[p] += static_cast<std::int64_t>(seg->size);
      continue;
    }
    // Expandable: page flags, and every page under a block in use mapped.
    ++expandable_seen;
    if (std::find(expandable_.segments().begin(), expandable_.segments().end(), seg) == expandable_.segments().end())
      broken(arena, where + ": expandable but not listed as such");
    if (seg->mapped.size() < seg->mapped_limit || seg->head.size() != seg->mapped.size())
      broken(arena, where + ": page flag arrays shorter than mapped_limit or of different lengths");
    std::size_t mapped = 0, holes = 0;
    for (std::size_t i = 0; i < seg->mapped.size(); ++i) {
      const bool m = seg->mapped[i] != 0;
      if (i >= seg->mapped_limit && m) broken(arena, where + ": page " + std::to_string(i) + " mapped past mapped_limit");
      if (seg->head[i] != 0 && !m) broken(arena, where + ": page " + std::to_string(i) + " heads a chunk but is unmapped");
      if (m && seg->head[i] == 0 && (i == 0 || seg->mapped[i - 1] == 0))
        broken(arena, where + ": mapped page " + std::to_string(i) + " belongs to no chunk");
      mapped += m ? 1 : 0;
      holes += !m && i < seg->mapped_limit ? 1 : 0;
    }
    if (seg->mapped_limit > 0 && seg->mapped[seg->mapped_limit - 1] == 0)
      broken(arena, where + ": the page below mapped_limit is not mapped");
    if (mapped * expandable_.page_size() != seg->mapped_bytes)
      broken(arena, where + ": mapped_bytes is " + std::to_string(seg->mapped_bytes) + " but " +
                        std::to_string(mapped) + " pages are mapped");
    if (holes != seg->holes)
      broken(arena, where + ": holes is " + std::to_string(seg->holes) + " but " + std::to_string(holes) +
                        " pages below mapped_limit are unmapped");
    t.reserved[p] += static_cast<std::int64_t>(seg->mapped_bytes);
    for (const Block* x = seg->first; x != nullptr; x = x->next) {
      if (x->load_state() == BlockState::kFree) continue;
      const std::size_t first = expandable_.page_floor(x->addr - seg->addr), end = expandable_.page_ceil(x->addr + x->size - seg->addr);
      for (std::size_t i = first; i < end; ++i)
        if (i >= seg->mapped_limit || seg->mapped[i] == 0)
          broken(arena, where + ": page " + std::to_string(i) + " under the " + state_name(x->load_state()) +
                            " block " + format_address(x->addr) + " is not mapped");
    }
  }
  if (expandable_seen != expandable_.segments().size())
    broken(arena, "the list of expandable segments names segments that are not linked");
  if (t.blocks != pool_.map().size())
    broken(arena, "the pointer map holds " + std::to_string(pool_.map().size()) + " blocks, the segments " +
                      std::to_string(t.blocks));

  // The free index and the pool's counters.
  for (int p = 0; p < detail::kNumPools; ++p) {
    const std::string pool = p == detail::kSmallPool ? "small pool" : "large pool";
    if (std::string why = pool_.free_index(p).check(); !why.empty()) broken(arena, pool + " " + why);
    std::size_t listed = 0;
    bool stray = false;
    pool_.free_index(p).for_each([&](const Block* b) {
      ++listed;
      stray |= b->load_state() != BlockState::kFree || b->pool != p || b->segment == nullptr;
    });
    if (stray) broken(arena, pool + ": the free index lists a block that is not a free block of the pool");
    if (static_cast<std::int64_t>(listed) != t.count[static_cast<int>(BlockState::kFree)][p])
      broken(arena, pool + ": the free index lists " + std::to_string(listed) + " blocks, the segments hold " +
                        std::to_string(t.count[static_cast<int>(BlockState::kFree)][p]) + " free ones");
    auto expect = [&](const char* what, std::int64_t counted, std::int64_t actual) {
      if (counted != actual)
        broken(arena, pool + ": " + what + " counted " + std::to_string(counted) + ", actual " + std::to_string(actual));
    };
    expect("reserved bytes", stats_.counters.reserved[p], t.reserved[p]);
    expect("segments", stats_.counters.segments[p], t.segments[p]);
    expect("pending bytes", stats_.counters.pending_bytes[p], t.bytes(BlockState::kPending, p));
    expect("inactive split bytes", pool_.inactive_split().bytes[p], t.split_bytes[p]);
    expect("inactive split blocks", pool_.inactive_split().count[p], t.split_count[p]);
    expect("bytes out of the pool (allocated + thread-cached)", stats_.out_pool(p),
           t.bytes(BlockState::kAllocated, p) + t.bytes(BlockState::kThreadCached, p));
  }
  if (stats_.out_total() != stats_.out_pool(0) + stats_.out_pool(1))
    broken(arena, "bytes out of the pool: the total is not the sum of the pools");
  // Pending events name pending blocks, as many as each block waits for.
  std::vector<std::pair<const Block*, int>> waits;
  for (const PendingEvent& pe : pending_) {
    if (pe.block->load_state() != BlockState::kPending)
      broken(arena, "a pending event names the " + std::string(state_name(pe.block->load_state())) + " block " +
                        format_address(pe.block->addr));
    auto it = std::find_if(waits.begin(), waits.end(), [&](const auto& w) { return w.first == pe.block; });
    if (it == waits.end()) waits.emplace_back(pe.block, 1);
    else ++it->second;
  }
  for (const auto& [b, n] : waits)
    if (b->pending_events != n)
      broken(arena, "block " + format_address(b->addr) + " waits for " + std::to_string(b->pending_events) + " events, " +
                        std::to_string(n) + " are pending");

  if (!include_thread_caches) return;
  std::unordered_set<const Block*> seen;
  std::int64_t cached[detail::kNumPools] = {};
  for (const ThreadCache* tc : caches_) {
    if (tc->owner != this) broken(arena, "a thread cache of another arena is listed here");
    check_thread_cache(arena, arena_index_, *tc, seen, cached);
  }
  const MemoryStats s = stats_locked();
  for (int p = 0; p < detail::kNumPools; ++p) {
    const std::string pool = p == detail::kSmallPool ? "small pool" : "large pool";
    const std::int64_t in_caches = t.bytes(BlockState::kThreadCached, p);
    if (cached[p] != in_caches)
      broken(arena, pool + ": thread caches hold " + std::to_string(cached[p]) + " bytes, the segments " +
                        std::to_string(in_caches) + " thread-cached bytes");
    const std::int64_t allocated = t.bytes(BlockState::kAllocated, p), free = t.bytes(BlockState::kFree, p);
    const std::int64_t pending = t.bytes(BlockState::kPending, p);
    if (allocated + free + in_caches + pending != t.segment_bytes[p])
      broken(arena, pool + ": allocated " + std::to_string(allocated) + " + cached-free " + std::to_string(free) +
                        " + thread-cached " + std::to_string(in_caches) + " + pending " + std::to_string(pending) +
                        " != segment bytes " + std::to_string(t.segment_bytes[p]));
    if (expandable_.segments().empty() && t.segment_bytes[p] != stats_.counters.reserved[p])
      broken(arena, pool + ": classic segments hold " + std::to_string(t.segment_bytes[p]) + " bytes, reserved is " +
                        std::to_string(stats_.counters.reserved[p]));
    if (s.allocated_bytes[1 + p].current != allocated)
      broken(arena, pool + ": the statistics report " + std::to_string(s.allocated_bytes[1 + p].current) +
                        " allocated bytes, the blocks " + std::to_string(allocated));
    if (s.allocation_count[1 + p].current != t.count[static_cast<int>(BlockState::kAllocated)][p])
      broken(arena, pool + ": the statistics report " + std::to_string(s.allocation_count[1 + p].current) +
                        " live allocations, the blocks " +
                        std::to_string(t.count[static_cast<int>(BlockState::kAllocated)][p]));
  }
}

}  // namespace genesis::memory
