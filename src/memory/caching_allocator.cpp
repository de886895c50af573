// Caching allocator: construction, the allocation and free slow paths, the
// pool (best fit, split, coalesce) and stream-ordered reuse.
//
// Note [Statistics]: statistics are always on, and the hot path may not touch
// shared cache lines. So the pool keeps its own counters under the mutex, each
// thread cache keeps owned counters (plain moves), and stats() adds them up.
// The pool counts a block as "out" when it is allocated or in a thread cache;
// allocated = out - (bytes in thread caches). A peak of a sum of per-thread
// values cannot be kept exactly without a shared write, so each allocation
// computes the candidate  out - (bytes cached by *this* thread) , which equals
// the true allocated bytes when one thread allocates and exceeds it by at most
// what other threads hold cached otherwise. The reported peak is the largest
// candidate: never below the true peak. Allocated and requested bytes and
// live allocations rise only in allocations, which note their candidates, so
// the slow free path notes only what a free can raise (note_peaks_free).
#include "genesis/memory/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <thread>

#include "genesis/memory/detail/allocator_registry.h"

namespace genesis::memory {

using detail::Block;
using detail::BlockState;
using detail::PoolId;
using detail::Segment;
using detail::ThreadCache;

namespace {

constexpr std::size_t kSmallSegment = std::size_t{2} << 20;   // 2 MiB
constexpr std::size_t kLargeSegment = std::size_t{20} << 20;  // 20 MiB
constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;
constexpr std::size_t kBlockChunk = 1024;

std::size_t round_up(std::size_t x, std::size_t m) { return (x + m - 1) / m * m; }

PoolId pool_for(std::size_t rounded) noexcept {
  return rounded <= detail::kSmallLimit ? detail::kSmallPool : detail::kLargePool;
}

std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, v);
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction

CachingAllocator::CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options)
    : CachingAllocator(std::move(upstream), options, nullptr, 0) {}

CachingAllocator::CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options,
                                   CachingAllocator* root, std::uint8_t index)
    : upstream_(std::move(upstream)),
      options_(options),
      root_(root != nullptr ? root : this),
      arena_index_(index),
      asymmetric_(detail::asymmetric_fence_available()) {
  GENESIS_CHECK(upstream_ != nullptr, "CachingAllocator needs an upstream resource, got null");
  GENESIS_CHECK(upstream_->alignment() >= detail::kAlignment && (upstream_->alignment() & (upstream_->alignment() - 1)) == 0,
                "upstream '", upstream_->name(), "' aligns to ", upstream_->alignment(),
                " bytes; the caching allocator needs a power of two >= 512");
  GENESIS_CHECK(options_.memory_fraction > 0.0 && options_.memory_fraction <= 1.0,
                "memory_fraction must be in (0, 1], got ", options_.memory_fraction);
  GENESIS_CHECK(options_.thread_cache_small_count > 0 && options_.thread_cache_large_count > 0,
                "thread cache counts must be positive");
  GENESIS_CHECK(options_.arenas <= kMaxArenas, "arenas must be at most ", kMaxArenas,
                " (0: one per hardware thread), got ", options_.arenas);
  if (root == nullptr) {
    const std::uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
    // Auto: device memory is shared by one pool (Note [Arenas]).
    const std::uint32_t auto_arenas = upstream_->kind() == MemoryKind::kDevice ? 1u : std::min(kMaxArenas, hw);
    arena_limit_ = options_.arenas != 0 ? options_.arenas : auto_arenas;
    arena_ptrs_[0].store(this, std::memory_order_relaxed);
  } else {
    arena_limit_ = root->arena_limit_;
    family_reserved_ = &root->family_reserved_storage_;
  }
  total_capacity_ = upstream_->mem_info().total_bytes;
  using Expandable = AllocatorOptions::Expandable;
  GENESIS_CHECK(options_.expandable_segments != Expandable::kOn || upstream_->supports_virtual_memory(),
                "expandable segments need an upstream with virtual memory support; '", upstream_->name(),
                "' has none (use Expandable::kAuto to fall back to classic segments)");
  expandable_ = upstream_->supports_virtual_memory() &&
                (options_.expandable_segments == Expandable::kOn ||
                 (options_.expandable_segments == Expandable::kAuto && upstream_->cheap_page_mapping()));
  if (expandable_) {
    page_size_ = upstream_->page_size();
    GENESIS_CHECK(page_size_ >= detail::kAlignment && (page_size_ & (page_size_ - 1)) == 0,
                  "upstream page size must be a power of two >= 512, got ", page_size_);
    page_shift_ = std::countr_zero(page_size_);
    chunk_pages_ = options_.chunk_pages != 0 ? options_.chunk_pages : upstream_->cheap_page_mapping() ? 1 : 64;
  }
  large_park_ = options_.thread_cache_large_park;
  // Near fits only over classic segments (Note [Near fits]).
  if (const std::uint32_t n = expandable_ ? 0 : options_.thread_cache_near_fit; n != 0)
    near_mul_ = ((std::uint64_t{1} << 32) + n - 1) / n;
  if (options_.memory_fraction < 1.0 && total_capacity_ > 0)
    memory_limit_ = static_cast<std::size_t>(options_.memory_fraction * static_cast<double>(total_capacity_));
  std::size_t tc_limit = options_.thread_cache_bytes;
  if (tc_limit == 0) {
    tc_limit = std::size_t{2} << 30;
    if (total_capacity_ > 0) tc_limit = std::min(tc_limit, total_capacity_ / 32);
  }
  if (options_.cache_size_limit != SIZE_MAX) tc_limit = std::min(tc_limit, options_.cache_size_limit / 4);
  tc_byte_limit_.store(tc_limit, std::memory_order_relaxed);
  recording_.store(options_.record_events, std::memory_order_relaxed);
  if (options_.record_events) shared_ring_ = std::make_unique<detail::EventRing>(options_.event_capacity_per_thread);
  if (root == nullptr) {
    generation_ = detail::AllocatorRegistry::instance().attach(this, &slot_);
  } else {
    // An arena finds its threads' caches in the root's thread-local slot
    // (each cache names its arena), and the root hands them back at thread
    // exit: it takes no slot of its own (Note [Arenas]).
    slot_ = root->slot_;
    generation_ = root->generation_;
  }
}

CachingAllocator::~CachingAllocator() {
  // After detach no exiting thread touches our caches (the registry lock
  // orders us after any retire in progress).
  if (root_ == this) detail::AllocatorRegistry::instance().detach(slot_, generation_);
  // The other arenas first: each detaches and returns its own segments.
  for (auto& a : arena_owned_) a.reset();
  Lock lock(mutex_);
  for (ThreadCache* tc : caches_) delete tc;
  caches_.clear();
  for (auto& p : pending_) upstream_->release_event(p.event);
  pending_.clear();
  while (segments_ != nullptr) {
    Segment* seg = segments_;
    segments_ = seg->next_seg;
    if (seg->expandable) {
      // Run by run of mapped pages: each is made of whole chunks.
      for (std::size_t i = 0; i < seg->mapped_limit;) {
        if (!seg->mapped[i]) {
          ++i;
          continue;
        }
        std::size_t j = i + 1;
        while (j < seg->mapped_limit && seg->mapped[j]) ++j;
        upstream_->unmap_pages(seg->addr + i * page_size_, (j - i) * page_size_);
        i = j;
      }
      upstream_->release_address_range(seg->addr, seg->size);
    } else {
      upstream_->deallocate(reinterpret_cast<void*>(seg->addr), seg->size);
    }
    delete seg;
  }
  // Blocks live in block_chunks_ and go with it.
  for (auto& chunk : block_chunks_)
    for (std::size_t i = 0; i < kBlockChunk; ++i) delete chunk[i].stream_uses;
}

// ---------------------------------------------------------------------------
// Thread caches

ThreadCache* CachingAllocator::thread_cache_slow() noexcept {
  if (root_ != this) return root_->thread_cache_slow();  // the root deals threads out (Note [Arenas])
  if (!options_.thread_cache || generation_ == detail::AllocatorRegistry::kNoSlot) return nullptr;
  ThreadCache* tc = nullptr;
  try {
    CachingAllocator* arena = arena_limit_ > 1 ? arena_for_new_thread() : this;
    tc = new ThreadCache(detail::this_thread_number(), arena);
    tc->at_root = arena == this;  // this is the root here
    Lock lock(arena->mutex_);
    if (arena->recording_.load(std::memory_order_relaxed)) {
      tc->ring_owner = std::make_unique<detail::EventRing>(options_.event_capacity_per_thread);
      tc->ring.store(tc->ring_owner.get(), std::memory_order_release);
    }
    arena->caches_.push_back(tc);
    // Note [Biased pool lock]: an arena of one thread is locked by it without
    // atomic read-modify-writes; a second thread ends that for good.
    if (arena->caches_.size() == 1) arena->mutex_.bias_to_caller();
    else arena->mutex_.end_bias();
  } catch (...) {
    delete tc;
    return nullptr;  // no cache: this thread uses the slow path
  }
  detail::tls_slots[slot_] = detail::TlsSlot{generation_, tc};
  detail::AllocatorRegistry::ensure_thread_exit_hook();
  return tc;
}

void CachingAllocator::retire_thread_cache(ThreadCache* tc) {
  if (tc->owner != this) return tc->owner->retire_thread_cache(tc);  // a thread of another arena
  Lock lock(mutex_);
  // The owner is exiting, so no handshake is needed.
  flush_thread_cache(tc);
  for (int p = 0; p < detail::kNumPools; ++p) {
    retired_allocs_[p] += tc->num_allocs[p].get();
    retired_frees_[p] += tc->num_frees[p].get();
    retired_requested_[p] += tc->requested_delta[p].get();
    retired_total_allocated_[p] += tc->total_allocated[p].get();
  }
  for (int i = 0; i < 3; ++i) {
    peaks_.allocated[i] = std::max(peaks_.allocated[i], tc->peak_candidate[i].get());
    peaks_.requested[i] = std::max(peaks_.requested[i], tc->peak_requested_candidate[i].get());
    peaks_.allocations[i] = std::max(peaks_.allocations[i], tc->peak_count_candidate[i].get());
  }
  if (tc->ring_owner) retired_rings_.push_back(std::move(tc->ring_owner));
  caches_.erase(std::remove(caches_.begin(), caches_.end(), tc), caches_.end());
  mutex_.end_bias();  // its owner, if this thread was it, is gone
  update_peaks_locked();  // also moves the exited thread's share into the hot path's bases
  delete tc;
}

void CachingAllocator::flush_thread_cache(ThreadCache* tc, int only_pool, const StreamId* only_stream) {
  if (tc->cached_total() == 0) return;
  // The counters move once per flush, not per block: nothing reads them
  // in between (the mutex is held and the owner is not in the hot path).
  std::int64_t flushed[detail::kNumPools] = {};
  auto drain = [&](detail::BlockList& list) {
    while (list.head != nullptr) {
      Block* b = list.head;
      list.head = b->cache_next;
      b->cache_next = nullptr;
      flushed[b->pool] += static_cast<std::int64_t>(b->size);
      return_to_pool(b, /*touch=*/false);  // parked since its free: not a new use
    }
    list.count = 0;
  };
  for (auto& sc : tc->streams) {
    if (!sc || (only_stream != nullptr && sc->stream != *only_stream)) continue;
    if (only_pool != detail::kLargePool) {
      for (std::size_t w = 0; w < sc->small_mask.size(); ++w) {
        for (std::uint64_t bits = sc->small_mask[w]; bits != 0; bits &= bits - 1) {
          const std::size_t i = w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
          if (sc->small[i].count) drain(sc->small[i]);
        }
        sc->small_mask[w] = 0;
      }
      sc->small_words = 0;
    }
    if (only_pool != detail::kSmallPool) {
      for (std::uint64_t bits = sc->large_mask; bits != 0; bits &= bits - 1) {
        auto& slot = sc->large[static_cast<std::size_t>(std::countr_zero(bits))];
        if (slot.list.count) drain(slot.list);
      }
      sc->large_mask = 0;
      sc->large_blocks = 0;
    }
    if (only_stream != nullptr) break;  // one cache per stream
  }
  for (int p = 0; p < detail::kNumPools; ++p) uncount_flushed(tc, static_cast<PoolId>(p), flushed[p]);
}

void CachingAllocator::uncount_flushed(ThreadCache* tc, PoolId pool, std::int64_t bytes) {
  if (bytes == 0) return;  // blocks are never empty: nothing was flushed
  tc->cached_bytes[pool].add(-bytes);
  out_bytes_pool_[pool].store(out_bytes_pool_[pool].load(std::memory_order_relaxed) - bytes, std::memory_order_relaxed);
  out_bytes_total_.store(out_bytes_total_.load(std::memory_order_relaxed) - bytes, std::memory_order_relaxed);
}

// Note [Flush until fit]: before the small pool grows, the thread's cached
// small blocks go back to it (Note [Thread caches and fragmentation]). All of
// them used to: in `mixed` (random small sizes) the small pool then ran
// out every ~570 pairs, each time a flush of ~100 blocks emptied the cache,
// and the next small requests all missed until it filled again: 14% of
// small requests took the lock. Now the blocks go back one at a time,
// largest first, until one merges into a free block that fits, which is
// then used (no second search); the rest stay cached. The pool still grows
// only after every cached block is back, so parked blocks still never make
// it take new memory. Measured on the dev box (2026-11-26, `mixed` on the host
// upstream): small thread-cache hits 85.9% -> 95.8%, instructions per pair
// 512 -> 460, reserved 636 -> 638 MiB (one 2 MiB small segment more); GPT-2
// replay classic 1.146 -> 1.147 reserved/live (+2 MiB of 16.5 GB), 366 -> 359
// instructions per event. The large pool keeps the whole flush and a best-fit
// search: it parks at most a few blocks (Note [Parked large blocks]), and
// taking the first merged fit there cost 6 MiB more on `mixed`.
Block* CachingAllocator::flush_small_until_fit(ThreadCache* tc, StreamId stream, std::size_t rounded) {
  detail::StreamCache* sc = nullptr;
  for (detail::StreamCache* s : tc->streams)
    if (s != nullptr && s->stream == stream) sc = s;
  if (sc == nullptr) return nullptr;
  std::int64_t flushed = 0;
  Block* fit = nullptr;
  // Largest sizes first: they fit alone most often, and the smaller sizes
  // that stay are the ones a thread asks for most.
  for (std::size_t w = sc->small_mask.size(); w-- > 0 && fit == nullptr;) {
    while (sc->small_mask[w] != 0 && fit == nullptr) {
      const int top = 63 - std::countl_zero(sc->small_mask[w]);
      detail::BlockList& list = sc->small[w * 64 + static_cast<std::size_t>(top)];
      while (list.head != nullptr && fit == nullptr) {
        Block* b = list.head;
        list.head = b->cache_next;
        b->cache_next = nullptr;
        --list.count;
        flushed += static_cast<std::int64_t>(b->size);
        Block* merged = return_to_pool(b, /*touch=*/false);  // parked since its free: not a new use
        if (merged->size >= rounded) fit = merged;
      }
      if (list.count == 0) sc->small_mask[w] &= ~(std::uint64_t{1} << top);  // the masks stay exact
    }
    if (sc->small_mask[w] == 0) sc->small_words &= ~(std::uint64_t{1} << w);
  }
  uncount_flushed(tc, detail::kSmallPool, flushed);
  return fit;
}

void CachingAllocator::reclaim_thread_caches(bool include_self) {
  ThreadCache* self = nullptr;
  if (!include_self) {
    const detail::TlsSlot& s = detail::tls_slots[slot_];
    if (s.generation == generation_) self = s.cache;
  }
  std::vector<ThreadCache*> targets;
  for (ThreadCache* tc : caches_)
    if (tc != self && tc->cached_total() != 0) targets.push_back(tc);
  if (targets.empty()) return;
  for (ThreadCache* tc : targets) tc->reclaim.store(1, std::memory_order_relaxed);
  detail::heavy_fence();
  for (ThreadCache* tc : targets) {
    // The owner is at most one short hot-path call away from noticing.
    while (tc->active.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    flush_thread_cache(tc);
    tc->reclaim.store(0, std::memory_order_release);
  }
}

void CachingAllocator::synchronize_readers() {
  detail::heavy_fence();
  for (ThreadCache* tc : caches_)
    while (tc->active.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  map_.free_retired();
}

std::int64_t CachingAllocator::thread_cached_total_locked() const {
  std::int64_t total = 0;
  for (const ThreadCache* tc : caches_) total += tc->cached_total();
  return total;
}

// Note [Near fits]: sizes are rounded to 512 bytes only, so a program whose
// small tensors vary in size (activations of varying sequence length, the
// `mixed` benchmark) rarely frees a block of exactly the size it asks for
// next, and the thread cache hit only ~17% of `mixed`'s allocations: the rest
// took the mutex, split a pool block and later merged it back. Most misses
// had a cached block just a little larger. So, on a miss in the small pool,
// the thread cache hands out its smallest block at most 1/N larger
// (thread_cache_near_fit, default 4: 25%), whole: no split, no lock, and the
// block keeps its size (it returns to the list of its own size when freed).
// Like the classic large pool's unsplit remainders, the slack counts as
// allocated (statistics stay exact); it is bounded per block and lives only
// in small-pool blocks, whose 2 MiB segments the pool flushes the cache into
// before growing (Note [Thread caches and fragmentation]). Large blocks are
// exempt: their cache is flushed before every large-pool search, so it holds
// about one block, and letting it keep more costs the memory the flush saves.
// Measured (2026-11-21, bench/RESULTS.md "Large near fits"), 1/8 near fits
// for large blocks with three flush rules: flushing unless the pool has a
// near fit of its own kept the GPT-2 replay at 1.146 but served only 6% of
// `mixed`'s large requests and was no faster; flushing only before growing
// served 76% of them but reserved 31% more on `mixed` (832 vs 634 MiB) and
// took the GPT-2 classic replay from 1.146 to 1.261; capping the parked bytes
// per thread (64 / 256 MiB) gave up most of the hits and still cost memory
// (thread-cache hits of all allocations 65% / 74%, against 60% without and
// 84% uncapped; +7% / +21% reserved on `mixed`; 170 instead of 155
// segments on GPT-2). Random
// large sizes find a near fit only when the cache parks about as many bytes
// as the large pool has live, which is the fragmentation the flush avoids.
// So are expandable segments: their small pool never runs out of address
// range, so it never flushes the cache, which keeps every size it has seen
// and hits exactly; there near fits only slowed `mixed_set` down (55.6 ->
// 63.5 ns on the dev box, 2026-11-21) by handing out blocks another size
// would have hit.
// The search (StreamCache::pop_small) covers the exact size and its near
// fits at once; the caller finishes a near fit like an exact hit.

// ---------------------------------------------------------------------------
// Blocks

Block* CachingAllocator::new_block_chunk() {
  block_chunks_.push_back(std::make_unique<Block[]>(kBlockChunk));
  Block* chunk = block_chunks_.back().get();
  for (std::size_t i = 0; i < kBlockChunk; ++i) {
    chunk[i].arena = arena_index_;
    chunk[i].cache_next = free_blocks_;
    free_blocks_ = &chunk[i];
  }
  return new_block();
}

std::size_t CachingAllocator::segment_size_for(PoolId pool, std::size_t rounded) const noexcept {
  if (pool == detail::kSmallPool) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return round_up(rounded, kRoundLarge);
}

Block* CachingAllocator::take_block(Block* b, std::size_t rounded) {
  void* owner = index_erase(b);  // the remainder goes to the same stream's table
  // Out of the index means out of the pool: a block still marked kFree here
  // would be merged into a neighbour that returns to the pool before the
  // caller is done with it (expandable segments' out-of-memory recovery
  // returns blocks while the taken one waits for its pages).
  b->set_state(BlockState::kAllocated);
  const std::size_t remaining = b->size - rounded;
  // Classic large segments keep small remainders attached (they could not
  // serve a large request); in an expandable segment the remainder's pages
  // can be unmapped, so always split.
  const bool split = b->pool == detail::kSmallPool || b->segment->expandable ? remaining >= detail::kAlignment
                                                                              : remaining > detail::kSmallLimit;
  if (split) {
    Block* rest = new_block();
    rest->addr = b->addr + rounded;
    rest->size = remaining;
    rest->segment = b->segment;
    rest->pool = b->pool;
    rest->stream = b->stream;
    rest->prev = b;
    rest->next = b->next;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    map_.insert(rest->addr, rest);
    index_insert(rest, owner);
  }
  return b;
}

Block* CachingAllocator::return_to_pool(Block* b, bool touch) {
  // Invariant: two free blocks are never neighbours, so at most one merge on
  // each side. A neighbour is of the same segment, hence stream: the merged
  // block goes to the table the neighbour left.
  void* owner = nullptr;
  if (Block* prev = b->prev; prev != nullptr && prev->load_state() == BlockState::kFree) {
    owner = index_erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next != nullptr) b->next->prev = prev;
    map_.erase(b->addr);
    delete_block(b);
    b = prev;
  }
  if (Block* next = b->next; next != nullptr && next->load_state() == BlockState::kFree) {
    if (void* o = index_erase(next); o != nullptr) owner = o;
    b->size += next->size;
    b->next = next->next;
    if (next->next != nullptr) next->next->prev = b;
    map_.erase(next->addr);
    delete_block(next);
  }
  index_insert(b, owner);
  if (touch) b->segment->last_used_ns = detail::coarse_now_ns();
  return b;
}

// Inline (moved here from allocator_stats.cpp): each has one caller below,
// and as calls their register saves were a fifth of their instructions.
// The slow path's peaks: the hot path's candidates (Note [Statistics]) for
// the pool that changed, from this thread's counters and the pool's own, in
// O(1): walking every thread cache on each call cost a tenth of a slow-path
// allocation. Exact for one thread, like the hot path; stats() and thread
// exits fold in exact sums (update_peaks_locked). Reserved bytes and
// segments only grow when the allocation did (`grew`), so otherwise their
// peaks are not looked at.
inline void CachingAllocator::note_peaks_slow(const ThreadCache* tc, detail::PoolId p, bool grew) {
  store_hot_bases(p);
  const int q = 1 - p;  // the other pool, unchanged by this call
  // This thread's own shares, read in one place (one test of tc, not one per
  // term: this function runs on every slow-path allocation).
  std::int64_t cached_p = 0, cached_q = 0, own_req_p = 0, own_req_q = 0, own_live_p = 0, own_live_q = 0;
  if (tc != nullptr) {
    cached_p = tc->cached_bytes[p].get();
    cached_q = tc->cached_bytes[q].get();
    own_req_p = tc->requested_delta[p].get();
    own_req_q = tc->requested_delta[q].get();
    own_live_p = tc->num_allocs[p].get() - tc->num_frees[p].get();
    own_live_q = tc->num_allocs[q].get() - tc->num_frees[q].get();
  }
  const std::int64_t alloc_p = out_bytes_pool_[p].load(std::memory_order_relaxed) - cached_p;
  const std::int64_t alloc_all = out_bytes_total_.load(std::memory_order_relaxed) - cached_p - cached_q;
  const std::int64_t req_p = base_requested_[p].load(std::memory_order_relaxed) + own_req_p;
  const std::int64_t req_q = base_requested_[q].load(std::memory_order_relaxed) + own_req_q;
  const std::int64_t live_p = base_live_[p].load(std::memory_order_relaxed) + own_live_p;
  const std::int64_t live_q = base_live_[q].load(std::memory_order_relaxed) + own_live_q;
  const std::int64_t res_p = counters_.reserved[p], res_all = counters_.reserved[0] + counters_.reserved[1];
  const std::int64_t pend_all = counters_.pending_bytes[0] + counters_.pending_bytes[1];
  auto bump = [](std::int64_t* peak, int i, std::int64_t v) {
    if (v > peak[i]) peak[i] = v;
  };
  bump(peaks_.allocated, 1 + p, alloc_p);
  bump(peaks_.allocated, 0, alloc_all);
  if (pend_all != 0) {  // else active == allocated, whose peak stats() reports as active's too
    bump(peaks_.active, 1 + p, alloc_p + counters_.pending_bytes[p]);
    bump(peaks_.active, 0, alloc_all + pend_all);
  }
  bump(peaks_.requested, 1 + p, req_p);
  bump(peaks_.requested, 0, req_p + req_q);
  bump(peaks_.allocations, 1 + p, live_p);
  bump(peaks_.allocations, 0, live_p + live_q);
  if (grew) {
    bump(peaks_.reserved, 1 + p, res_p);
    bump(peaks_.reserved, 0, res_all);
    bump(peaks_.segments, 1 + p, counters_.segments[p]);
    bump(peaks_.segments, 0, counters_.segments[0] + counters_.segments[1]);
  }
  bump(peaks_.cached, 1 + p, res_p - alloc_p);
  bump(peaks_.cached, 0, res_all - alloc_all);
  bump(peaks_.inactive_split, 1 + p, counters_.inactive_split_bytes[p]);
  bump(peaks_.inactive_split, 0, counters_.inactive_split_bytes[0] + counters_.inactive_split_bytes[1]);
}

// After a free (free_slow): allocated bytes, requested bytes and live
// allocations went down, and reserved bytes and segments did not change, so
// none of them can be a new peak (each rises only in an allocation, which
// notes its own candidate). What a free can raise: cached bytes, inactive
// split bytes, and active bytes (allocated + pending: a free with events
// moves bytes from the one to the other, and hot-path allocations do not
// note active peaks).
inline void CachingAllocator::note_peaks_free(const ThreadCache* tc, detail::PoolId p) {
  store_hot_bases(p);
  const std::int64_t alloc_p = out_bytes_pool_[p].load(std::memory_order_relaxed) -
                               (tc != nullptr ? tc->cached_bytes[p].get() : 0);
  const std::int64_t alloc_all = out_bytes_total_.load(std::memory_order_relaxed) -
                                 (tc != nullptr ? tc->cached_total() : 0);
  const std::int64_t res_p = counters_.reserved[p], res_all = counters_.reserved[0] + counters_.reserved[1];
  const std::int64_t pend_p = counters_.pending_bytes[p];
  const std::int64_t pend_all = counters_.pending_bytes[0] + counters_.pending_bytes[1];
  auto bump = [](std::int64_t* peak, int i, std::int64_t v) {
    if (v > peak[i]) peak[i] = v;
  };
  bump(peaks_.active, 1 + p, alloc_p + pend_p);
  bump(peaks_.active, 0, alloc_all + pend_all);
  bump(peaks_.cached, 1 + p, res_p - alloc_p);
  bump(peaks_.cached, 0, res_all - alloc_all);
  bump(peaks_.inactive_split, 1 + p, counters_.inactive_split_bytes[p]);
  bump(peaks_.inactive_split, 0, counters_.inactive_split_bytes[0] + counters_.inactive_split_bytes[1]);
}

// ---------------------------------------------------------------------------
// Allocation slow path

Block* CachingAllocator::allocate_slow(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  GENESIS_CHECK(bytes <= detail::kMaxRequest, "cannot allocate ", bytes,
                " bytes: requests are limited to 2^62 bytes (was a negative size converted to unsigned?)");
  // Before locking: creating a thread cache takes the mutex.
  return allocate_miss(thread_cache(), bytes, detail::round_size(bytes), stream);
}

Block* CachingAllocator::allocate_miss(ThreadCache* tc, std::size_t bytes, std::size_t rounded, StreamId stream) {
  const bool recording = recording_.load(std::memory_order_relaxed);
  const std::uint64_t t0 = recording ? detail::now_ns() : 0;
  const PoolId pool = pool_for(rounded);

  Lock lock(mutex_);
  if (!pending_.empty()) process_events();

  Block* b = nullptr;
  bool hit = true;
  const std::int64_t segments_before = counters_.segments[pool];  // a new expandable range counts as growth
  if (tc != nullptr && tc->current->stream != stream) {
    // Another stream than the hot path looked at: its cache may hold a block.
    // (For the current stream the hot path's pop missed already; a reclaim
    // that made it skip the pop has emptied the cache since.)
    if (detail::StreamCache* sc = tc->cache_for(stream); sc != nullptr) {
      tc->set_current(sc);
      b = sc->pop(rounded, tc->num_allocs[detail::kSmallPool]);
      if (b != nullptr) {
        note_alloc_hot(tc, b, bytes);
        if (map_.has_retired()) synchronize_readers();
        lock.unlock();
        if (recording) record_event_hot_alloc(tc, b, bytes);
        return b;
      }
    }
  }
  // Note [Thread caches and fragmentation]: blocks parked in a thread cache
  // are invisible to best fit and cannot merge with free neighbours, so a
  // pool search while they are parked picks worse blocks (on a GPT-2 training
  // trace: peak reserved 1.26x live instead of 1.15x when the cache kept
  // every large block until the pool had to grow). So a large-pool search
  // returns this thread's cached large blocks of the stream first, except a
  // few (Note [Parked large blocks]); and before either pool grows, all of
  // them return, so parked blocks never make the pool take new memory.
  // The small pool parks freely: its 2 MiB segments bound what parking can
  // cost, and small sizes repeat, so its thread cache earns its keep there.
  //
  // Note [Parked large blocks]: returning every cached large block before
  // every large-pool search made the cache serve large requests only between
  // two misses. A training step frees and allocates tensors of a few dozen
  // sizes in alternation (GPT-2: 59 sizes, 65% of the requests large), so a
  // freed block was usually flushed (merged into its neighbours) by the next
  // miss before its size was asked for again, and then split off again under
  // the lock. Keeping up to thread_cache_large_park (default 4) large blocks
  // parked per stream lets those come back as exact hits. Measured on the
  // dev box (2026-11-25; callgrind instructions per event of the GPT-2
  // replay, expandable on the simulated device): park 0: 410, 4: 389, 6:
  // 368, 8: 376; reserved/live 1.006 / 1.005 / 1.006 / 1.006 (classic 1.146
  // throughout, 1.261 with 32). `mixed` reserved 636 MiB at 0 and 638 at 4,
  // but 684 at 6 and 706 at 8 (random sizes rarely come back, so parking
  // there only holds memory): 4 is the most that costs no memory.
  // The limit also holds between searches: a free finds the cache full of
  // large blocks and goes to the pool (hot_free_path). A thread that frees
  // many large tensors and then waits (the backward pass's thread at the end
  // of a step) would otherwise keep them all until another thread's growth
  // reclaimed them, by which time that thread's searches had carved up the
  // rest of the pool around the gap (1.23x the live bytes reserved on an
  // autograd-like loop instead of 1.02x).
  // One branch on the whole test, not one per term: in `mixed` the pool is
  // a coin toss, and the short-circuit form cost 0.08 more mispredicts per
  // pair (callgrind's branch model).
  if (tc != nullptr && ((pool == detail::kLargePool) & (tc->cached_bytes[detail::kLargePool].get() != 0) &
                        ((tc->current->stream != stream) | (tc->current->large_blocks > large_park_))))
    flush_thread_cache(tc, pool, &stream);
  b = find_free_block(pool, rounded, stream);
  if (b == nullptr && tc != nullptr && tc->cached_bytes[pool].get() != 0) {
    // Before growing: merged, parked blocks may fit (Note [Flush until fit]).
    if (pool == detail::kSmallPool) {
      b = flush_small_until_fit(tc, stream, rounded);
    } else {
      flush_thread_cache(tc, pool, &stream);
      b = find_free_block(pool, rounded, stream);
    }
  }
  if (b == nullptr && thread_cached_total_locked() >= static_cast<std::int64_t>(rounded)) {
    reclaim_thread_caches(false);
    b = find_free_block(pool, rounded, stream);
  }
  if (b == nullptr && expandable_ && expandable_segment(pool, stream) != nullptr) {
    b = find_free_block(pool, rounded, stream);
  }
  if (b != nullptr) {
    b = take_block(b, rounded);
    // On failure ensure_mapped gives b back to the pool and throws.
    if (b->segment->expandable && ensure_mapped(b, bytes)) hit = false;
  } else {
    b = grow(pool, rounded, stream, bytes);  // throws OutOfMemoryError
    // grow's out-of-memory path may hand back a free block it found after all.
    if (b->segment->expandable) ensure_mapped(b, bytes);
    hit = false;
  }

  b->set_requested(bytes);
  b->set_location(detail::tls_allocation_context);
  b->set_taker(tc);  // Note [Cross-thread frees]
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  out_bytes_pool_[pool].store(out_bytes_pool_[pool].load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
  out_bytes_total_.store(out_bytes_total_.load(std::memory_order_relaxed) + size, std::memory_order_relaxed);
  ++counters_.num_allocs[pool];
  counters_.requested[pool] += static_cast<std::int64_t>(bytes);
  counters_.total_allocated[pool] += size;
  if (hit) ++counters_.num_hits; else ++counters_.num_misses;

  // A hit took no new segment and mapped no page.
  note_peaks_slow(tc, pool, /*grew=*/!hit || counters_.segments[pool] != segments_before);
  if (map_.has_retired()) synchronize_readers();
  if (recording) {
    b->alloc_time_ns.store(t0, std::memory_order_relaxed);
    record_event(tc, EventAction::kAlloc, b->addr, bytes, b->size, stream, detail::now_ns() - t0, hit);
  }
  return b;
}

Block* CachingAllocator::grow(PoolId pool, std::size_t rounded, StreamId stream, std::size_t bytes) {
  std::size_t seg_size = segment_size_for(pool, rounded);
  bool capped = false;
  auto try_upstream = [&](std::size_t n) -> void* {
    // The cap is on all arenas together (Note [Arenas]).
    const std::int64_t reserved = family_reserved_->load(std::memory_order_relaxed);
    if (memory_limit_ != SIZE_MAX && static_cast<std::size_t>(reserved) + n > memory_limit_) {
      capped = true;
      return nullptr;
    }
    void* p = upstream_->allocate(n);
    if (p == nullptr) ++counters_.num_upstream_failures;
    return p;
  };

  void* p = try_upstream(seg_size);
  if (p == nullptr) {
    // Out of memory: make everything cached reusable, then either a block fits
    // or the freed segments make room upstream.
    ++counters_.num_cache_flushes;
    wait_all_pending();
    reclaim_thread_caches(true);
    if (Block* b = find_free_block(pool, rounded, stream); b != nullptr) return take_block(b, rounded);
    // FreeIndex::find examines a bounded number of blocks per size class
    // (Note [Free index]) and can miss one that fits behind many smaller ones
    // of the same class. Growing is fine then, but failing is not: before
    // giving up, look at every free block of the stream once (best fit).
    Block* fit = nullptr;
    free_[pool].for_each([&](const Block* c) {
      if (c->stream == stream && c->size >= rounded && (fit == nullptr || c->size < fit->size))
        fit = const_cast<Block*>(c);
    });
    if (fit != nullptr) return take_block(fit, rounded);
    release_free_segments(UINT64_MAX, nullptr);
    p = try_upstream(seg_size);
    if (p == nullptr && arena_limit_ > 1 && release_other_arenas()) p = try_upstream(seg_size);
    if (p == nullptr && pool == detail::kLargePool && seg_size > round_up(rounded, kRoundLarge)) {
      seg_size = round_up(rounded, kRoundLarge);  // no room for a shared 20 MiB segment: take just enough
      p = try_upstream(seg_size);
    }
    if (p == nullptr) {
      throw_oom(bytes, stream,
                capped ? "the memory fraction cap (set_memory_fraction) would be exceeded"
                       : "the upstream has no contiguous range of that size left");
    }
  }

  Segment* seg = add_segment(reinterpret_cast<std::uintptr_t>(p), seg_size, pool, stream, /*expandable=*/false);
  Block* b = seg->first;
  add_reserved(pool, static_cast<std::int64_t>(seg_size));
  counters_.reserved_allocated[pool] += static_cast<std::int64_t>(seg_size);
  ++counters_.segments[pool];
  ++counters_.num_upstream_allocs;
  if (recording_.load(std::memory_order_relaxed)) {
    record_event(nullptr, EventAction::kSegmentAlloc, seg->addr, seg_size, seg_size, stream, 0, false);
  }
  return take_block(b, rounded);
}

Segment* CachingAllocator::add_segment(std::uintptr_t addr, std::size_t size, PoolId pool, StreamId stream,
                                      bool expandable) {
  auto* seg = new Segment;
  seg->addr = addr;
  seg->size = size;
  seg->pool = pool;
  seg->stream = stream;
  seg->expandable = expandable;
  seg->last_used_ns = detail::coarse_now_ns();
  seg->next_seg = segments_;
  if (segments_ != nullptr) segments_->prev_seg = seg;
  segments_ = seg;
  // One free block covers the new segment.
  Block* b = new_block();
  b->addr = addr;
  b->size = size;
  b->segment = seg;
  b->pool = pool;
  b->stream = stream;
  seg->first = b;
  map_.insert(b->addr, b);
  index_insert(b);
  return seg;
}

// ---------------------------------------------------------------------------
// Free slow path

void CachingAllocator::free_slow(Block* b, bool lookup_failed, void* ptr) {
  ThreadCache* tc = thread_cache();
  // Note [Arenas]: a block goes back to the arena that made it.
  if (GENESIS_UNLIKELY(arena_limit_ > 1 && !lookup_failed && b->arena != arena_index_)) return free_elsewhere(b, ptr);
  if (!free_in_arena(tc, b, lookup_failed, ptr, arena_limit_ == 1)) free_elsewhere(nullptr, ptr);
}

// A free that is not this arena's: the arena named by the block, or each
// other arena in turn, asked under its own mutex, one at a time.
void CachingAllocator::free_elsewhere(Block* b, void* ptr) {
  if (b != nullptr) {
    CachingAllocator* owner = root_->arena_ptrs_[b->arena].load(std::memory_order_acquire);
    if (owner != nullptr && owner->free_in_arena(nullptr, b, false, ptr, false)) return;
  }
  bool done = false;
  for_each_arena([&](CachingAllocator& a) {
    if (!done && &a != this) done = a.free_in_arena(nullptr, nullptr, true, ptr, false);
  });
  if (!done) report_bad_free(reinterpret_cast<std::uintptr_t>(ptr));
}

void CachingAllocator::report_bad_free(std::uintptr_t addr) const {
  bool inside = false;
  for_each_arena([&](CachingAllocator& a) {
    Lock lock(a.mutex_);
    for (const Segment* seg = a.segments_; seg != nullptr && !inside; seg = seg->next_seg)
      inside = addr > seg->addr && addr < seg->addr + seg->size;
  });
  GENESIS_CHECK(!inside, "cannot free ", hex(addr), ": it points inside a segment of allocator '", upstream_->name(),
                "' but is not the start of an allocation");
  GENESIS_CHECK(false, "cannot free ", hex(addr), ": this pointer was not allocated by the caching allocator of '",
                upstream_->name(), "'");
  std::abort();  // not reached: GENESIS_CHECK(false, ...) throws
}

// Always inlined: the common case (free_slow, a block of this arena) pays no
// call for it; free_elsewhere has the other copy.
[[gnu::always_inline]] inline bool CachingAllocator::free_in_arena(ThreadCache* tc, Block* b, bool lookup_failed,
                                                                  void* ptr, bool report) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  Lock lock(mutex_);
  // A record looked up without the lock (deallocate) or handed in by the
  // caller (free_block) may have been freed and recycled since by a racing
  // double free: trust it only if it still describes addr.
  if (lookup_failed || b->addr != addr) b = map_.find(addr);
  if (b == nullptr || b->load_state() == BlockState::kDead) {
    if (!report) return false;
    lock.unlock();  // report_bad_free locks every arena, this one included
    report_bad_free(addr);
  }
  const BlockState state = b->load_state();
  GENESIS_CHECK(state == BlockState::kAllocated, "double free of ", hex(b->addr), " (", b->size,
                " bytes) on allocator '", upstream_->name(), "': the block is already ",
                state == BlockState::kPending ? "freed (waiting for stream work)" : "free");

  // Record the stream events before changing anything: the upstream may throw
  // (an unknown stream, a CUDA error), and then the block must stay allocated
  // with every counter untouched, as deallocate() promises. Events recorded
  // before the failure are given back.
  std::vector<EventId> events;
  if (b->stream_uses != nullptr && !b->stream_uses->empty()) {
    try {
      events.reserve(b->stream_uses->size());
      for (StreamId s : *b->stream_uses) events.push_back(upstream_->record_event(s));
      pending_.reserve(pending_.size() + events.size());  // the push_backs below cannot throw
    } catch (...) {
      for (EventId e : events) upstream_->release_event(e);
      throw;
    }
  }

  const PoolId pool = b->pool;
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  if (recording_.load(std::memory_order_relaxed)) {
    const std::uint64_t born = b->alloc_time_ns.load(std::memory_order_relaxed);
    record_event(tc, EventAction::kFree, b->addr, b->get_requested(), b->size, b->stream,
                 born >= recording_since_ns_.load(std::memory_order_relaxed) && born != 0 ? detail::now_ns() - born : 0, false);
  }
  ++counters_.num_frees[pool];
  counters_.requested[pool] -= static_cast<std::int64_t>(b->get_requested());

  out_bytes_pool_[pool].store(out_bytes_pool_[pool].load(std::memory_order_relaxed) - size, std::memory_order_relaxed);
  out_bytes_total_.store(out_bytes_total_.load(std::memory_order_relaxed) - size, std::memory_order_relaxed);

  if (!events.empty()) {
    // Note: the block is reusable on its own stream only after the work on
    // the other streams completes, so each of them gets an event.
    b->set_state(BlockState::kPending);
    for (EventId e : events) {
      pending_.push_back(PendingEvent{e, b});
      ++b->pending_events;
    }
    delete b->stream_uses;
    b->stream_uses = nullptr;
    counters_.pending_bytes[pool] += size;
    process_events();
  } else {
    delete b->stream_uses;
    b->stream_uses = nullptr;
    return_to_pool(b);
  }
  // This thread's cache already parks the most large blocks it may (Note
  // [Parked large blocks]): they go to the pool with this one, as the next
  // large-pool search would have sent them.
  if (tc != nullptr && pool == detail::kLargePool) {
    detail::StreamCache* sc = tc->hot_stream_cache();
    if (sc->large_blocks != 0 && sc->large_blocks >= large_park_) flush_thread_cache(tc, pool, &sc->stream);
  }
  note_peaks_free(tc, pool);
  enforce_cache_limit();
  return true;
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  GENESIS_CHECK(ptr != nullptr, "record_stream: pointer is null");
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const bool live = with_live_block(addr, [&](Block& b) {
    if (stream == b.stream) return;  // its own stream orders the work already
    // Validate the stream now (an event on it must be recordable at free
    // time): an unusable stream is an error here, not a block that can never
    // be freed.
    upstream_->release_event(upstream_->record_event(stream));
    if (b.stream_uses == nullptr) b.stream_uses = new std::vector<StreamId>();
    if (std::find(b.stream_uses->begin(), b.stream_uses->end(), stream) == b.stream_uses->end())
      b.stream_uses->push_back(stream);
  });
  GENESIS_CHECK(live, "record_stream: ", hex(addr), " is not a live allocation of allocator '", upstream_->name(),
                "'");
}

void CachingAllocator::process_events() {
  std::size_t kept = 0;
  std::size_t i = 0;
  try {
    for (; i < pending_.size(); ++i) {
      PendingEvent pe = pending_[i];
      if (upstream_->event_done(pe.event)) {  // may throw (a failed CUDA launch)
        upstream_->release_event(pe.event);
        if (--pe.block->pending_events == 0) {
          counters_.pending_bytes[pe.block->pool] -= static_cast<std::int64_t>(pe.block->size);
          return_to_pool(pe.block);
        }
      } else {
        pending_[kept++] = pe;
      }
    }
  } catch (...) {
    // Keep the events not yet released (the one that threw among them), so
    // that pending_ never names a released event.
    for (; i < pending_.size(); ++i) pending_[kept++] = pending_[i];
    pending_.resize(kept);
    throw;
  }
  pending_.resize(kept);
}

void CachingAllocator::wait_all_pending() {
  for (const PendingEvent& pe : pending_) upstream_->wait_event(pe.event);
  process_events();
}

bool CachingAllocator::owns(const void* ptr) const noexcept {
  return with_live_block(reinterpret_cast<std::uintptr_t>(ptr), [](Block&) {});
}

std::size_t CachingAllocator::allocation_size(const void* ptr) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  std::size_t size = 0;
  GENESIS_CHECK(with_live_block(addr, [&](const Block& b) { size = b.size; }), "allocation_size: ", hex(addr),
                " is not a live allocation of allocator '", upstream_->name(), "'");
  return size;
}

}  // namespace genesis::memory
