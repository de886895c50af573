// The arena of a caching allocator (detail/arena.h): construction, thread
// caches, the allocation and free slow paths (growth, out of memory) and
// stream-ordered reuse. The pool's own work (best fit, split, coalesce) is in
// pool.cpp.
//
// Statistics: Note [Statistics] in genesis/memory/detail/allocator_statistics.h.
#include "genesis/memory/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <thread>

#include "genesis/memory/detail/allocator_registry.h"

namespace genesis::memory {

using genesis::detail::format_address;
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

std::size_t round_up(std::size_t x, std::size_t m) { return (x + m - 1) / m * m; }

PoolId pool_for(std::size_t rounded) noexcept {
  return rounded <= detail::kSmallLimit ? detail::kSmallPool : detail::kLargePool;
}

// Checked while options_ is initialised: events_, initialised after it,
// sizes its rings from them.
const AllocatorOptions& checked(const AllocatorOptions& options) {
  validate_options(options);
  return options;
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction

detail::Arena::Arena(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options, std::uint8_t index)
    : upstream_(std::move(upstream)),
      options_(checked(options)),
      arena_index_(index),
      asymmetric_(detail::asymmetric_fence_available()),
      events_(options_.record_events, options_.event_capacity_per_thread),
      pool_(index) {
  GENESIS_CHECK(upstream_ != nullptr, "CachingAllocator needs an upstream resource, got null");
  GENESIS_CHECK(upstream_->alignment() >= detail::kAlignment && (upstream_->alignment() & (upstream_->alignment() - 1)) == 0,
                "upstream '", upstream_->name(), "' aligns to ", upstream_->alignment(),
                " bytes; the caching allocator needs a power of two >= 512");
  total_capacity_ = upstream_->mem_info().total_bytes;
  expandable_.configure(*upstream_, options_);
  large_park_ = options_.thread_cache_large_park;
  // Note [Thread caches over costly mappings].
  thread_cache_on_ = options_.thread_cache.resolve(!expandable_.costly());
  // Near fits only over classic segments (Note [Near fits]).
  if (const std::uint32_t n = expandable_.on() ? 0 : options_.thread_cache_near_fit; n != 0)
    near_mul_ = ((std::uint64_t{1} << 32) + n - 1) / n;
  if (options_.memory_fraction < 1.0 && total_capacity_ > 0)
    // At least a byte: a cap of 0 would read as "none" in MemoryStats.
    memory_limit_ = std::max<std::size_t>(
        1, static_cast<std::size_t>(options_.memory_fraction * static_cast<double>(total_capacity_)));
  std::size_t tc_limit = options_.thread_cache_bytes;
  if (tc_limit == 0) {
    tc_limit = std::size_t{2} << 30;
    if (total_capacity_ > 0) tc_limit = std::min(tc_limit, total_capacity_ / 32);
  }
  if (options_.cache_size_limit != SIZE_MAX) tc_limit = std::min(tc_limit, options_.cache_size_limit / 4);
  tc_byte_limit_.store(tc_limit, std::memory_order_relaxed);
}

void detail::Arena::join(ArenaSet& set) {
  set_ = &set;
  arena_limit_ = set.limit();
  move_window_ = set.moves() && arena_index_ == 0 ? options_.arena_move_window : 0;
  family_reserved_ = &set.reserved();
  events_.set_levels(&set.levels());
  if (arena_index_ != 0) {
    // An arena finds its threads' caches in the allocator's thread-local
    // slot (each cache names its arena), and the allocator hands them back at
    // thread exit: it takes no slot of its own (Note [Arenas]). Arena 0's
    // are set by the allocator once it holds the slot.
    slot_ = set.root()->slot_;
    generation_ = set.root()->generation_;
  }
}

void detail::Arena::record_hot_alloc(ThreadCache* tc, Block* b, std::size_t bytes) noexcept {
  events_.record_hot_alloc(tc, b, bytes);
}

void detail::Arena::record_hot_free(ThreadCache* tc, Block* b) noexcept { events_.record_hot_free(tc, b); }

void detail::Arena::record_event(ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
                                 std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit) {
  events_.record(tc, action, addr, size, block_size, stream, duration, hit);
}

void detail::Arena::record_free_event(ThreadCache* tc, const Block* b) {
  events_.record(tc, EventAction::kFree, b->addr, b->get_requested(), b->size, b->stream, events_.lifetime(*b), false);
}

detail::Arena::~Arena() {
  Lock lock(mutex_);
  for (ThreadCache* tc : caches_) delete tc;
  caches_.clear();
  for (auto& p : pending_) upstream_->release_event(p.event);
  pending_.clear();
  while (Segment* seg = pool_.pop_segment()) {
    if (seg->expandable) {
      // Run by run of mapped pages: each is made of whole chunks.
      for (std::size_t i = 0; i < seg->mapped_limit;) {
        if (!seg->mapped[i]) {
          ++i;
          continue;
        }
        std::size_t j = i + 1;
        while (j < seg->mapped_limit && seg->mapped[j]) ++j;
        upstream_->unmap_pages(seg->addr + i * expandable_.page_size(), (j - i) * expandable_.page_size());
        i = j;
      }
      upstream_->release_address_range(seg->addr, seg->size);
    } else {
      upstream_->deallocate(reinterpret_cast<void*>(seg->addr), seg->size);
    }
    delete seg;
  }
  // Block records go with pool_.
}

// ---------------------------------------------------------------------------
// Thread caches

ThreadCache* detail::Arena::thread_cache_slow() noexcept {
  if (Arena* root = set_->root(); root != this) return root->thread_cache_slow();  // it deals threads out (Note [Arenas])
  if (!thread_cache_on_ || generation_ == detail::AllocatorRegistry::kNoSlot) return nullptr;
  Arena* arena = this;
  try {
    if (arena_limit_ > 1) arena = &set_->deal();
  } catch (...) {
    return nullptr;  // no arena could be made: this thread uses the slow path
  }
  ThreadCache* tc = attach_thread(arena);
  if (tc != nullptr) set_->arrived(arena->arena_index_);
  return tc;
}

ThreadCache* detail::Arena::attach_thread(Arena* arena) noexcept {
  ThreadCache* tc = nullptr;
  try {
    tc = new ThreadCache(detail::this_thread_number(), arena);
    tc->at_root = arena == this;  // this is arena 0 here
    Lock lock(arena->mutex_);
    arena->events_.attach(*tc);
    arena->caches_.push_back(tc);
    // Note [Biased pool lock]: an arena of one thread is locked by it without
    // atomic read-modify-writes; a second thread ends that for good.
    if (arena->caches_.size() == 1) {
      arena->mutex_.bias_to_caller();
    } else {
      arena->mutex_.end_bias();
      arena->stats_.fold_threads();  // Note [Folding the threads' counters]
    }
  } catch (...) {
    delete tc;
    return nullptr;  // no cache: this thread uses the slow path
  }
  detail::tls_slots[slot_] = detail::TlsSlot{generation_, tc};
  detail::AllocatorRegistry::ensure_thread_exit_hook();
  return tc;
}

void detail::Arena::note_slow_lock(ThreadCache* tc) noexcept {
  ++tc->slow_locks;
  tc->slow_locks_waited += detail::tls_lock_waited ? 1u : 0u;
  if (tc->slow_locks < move_window_) return;
  // A quarter of the window waited, and another thread would stay behind.
  tc->move_out = tc->slow_locks_waited * 4 >= tc->slow_locks && caches_.size() > 1;
  tc->slow_locks = tc->slow_locks_waited = 0;
}

ThreadCache* detail::Arena::move_thread(ThreadCache* tc) {
  tc->move_out = false;
  // Only to an arena with fewer threads than this one keeps without the
  // mover: the last threads to contend here would otherwise trade places.
  std::uint32_t there = 0;
  const std::uint32_t k = set_->claim_quietest_other(&there);
  auto stays = [&] { return std::size_t{there} + 1 >= caches_.size(); };
  {
    Lock lock(mutex_);
    if (stays()) {
      set_->unclaim(k);
      return nullptr;
    }
  }
  Arena* to = nullptr;
  try {
    to = &set_->made(k);  // outside our lock: making an arena takes it to copy the options
  } catch (...) {
    set_->unclaim(k);
    return nullptr;  // no arena could be made: stay
  }
  {
    Lock lock(mutex_);
    if (stays()) {  // others left meanwhile
      set_->unclaim(k);
      return nullptr;
    }
    // As at thread exit, but the thread goes on: its cached blocks back to
    // this pool, its counters into this arena's bases.
    flush_thread_cache(tc);
    events_.retire(*tc);
    caches_.erase(std::remove(caches_.begin(), caches_.end(), tc), caches_.end());
    set_->left(arena_index_);
    mutex_.end_bias();  // if this thread held the bias (it no longer can: two threads were here)
    stats_.retire(*tc, caches_, pool_.inactive_split());
  }
  detail::tls_slots[slot_] = detail::TlsSlot{};  // no cache until the new one is in place
  delete tc;
  ThreadCache* moved = attach_thread(to);
  if (moved == nullptr) set_->unclaim(k);  // no cache there after all
  return moved;
}

void detail::Arena::retire_thread_cache(ThreadCache* tc) {
  if (tc->owner != this) return tc->owner->retire_thread_cache(tc);  // a thread of another arena
  set_->left(arena_index_);
  Lock lock(mutex_);
  // The owner is exiting, so no handshake is needed.
  flush_thread_cache(tc);
  events_.retire(*tc);
  caches_.erase(std::remove(caches_.begin(), caches_.end(), tc), caches_.end());
  mutex_.end_bias();  // its owner, if this thread was it, is gone
  stats_.retire(*tc, caches_, pool_.inactive_split());  // also moves the exited thread's share into the hot path's bases
  delete tc;
  release_if_deserted_locked();
}

void detail::Arena::release_if_deserted_locked() {
  // Note [Threads that contend move out]: an arena that movers left holds
  // no cache; the shared pool (arena 0) keeps its cache as ever.
  if (arena_index_ == 0 || !caches_.empty() || !set_->moves()) return;
  expandable_.release_free_pages(*this);
  release_free_segments(UINT64_MAX, nullptr);
}

void detail::Arena::flush_thread_cache(ThreadCache* tc, int only_pool, const StreamId* only_stream) {
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
      pool_.give_back(b, /*touch=*/false);  // parked since its free: not a new use
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
  for (int p = 0; p < detail::kNumPools; ++p) stats_.note_flushed(tc, static_cast<PoolId>(p), flushed[p]);
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
// it take new memory. On `mixed` this raised the small thread-cache hits
// from 86% to 96% and cut the instructions per pair by a tenth, for one 2 MiB
// small segment more; the GPT-2 replay kept its reserved/live ratio (see
// bench/RESULTS.md). The large pool keeps the whole flush and a best-fit
// search: it parks at most a few blocks (Note [Parked large blocks]), and
// taking the first merged fit there cost memory on `mixed`.
Block* detail::Arena::flush_small_until_fit(ThreadCache* tc, StreamId stream, std::size_t rounded) {
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
        Block* merged = pool_.give_back(b, /*touch=*/false);  // parked since its free: not a new use
        if (merged->size >= rounded) fit = merged;
      }
      if (list.count == 0) sc->small_mask[w] &= ~(std::uint64_t{1} << top);  // the masks stay exact
    }
    if (sc->small_mask[w] == 0) sc->small_words &= ~(std::uint64_t{1} << w);
  }
  stats_.note_flushed(tc, detail::kSmallPool, flushed);
  return fit;
}

void detail::Arena::reclaim_thread_caches(bool include_self) {
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
    stats_.fold_reclaimed(tc);  // Note [Folding the threads' counters]
    tc->reclaim.store(0, std::memory_order_release);
  }
}

void detail::Arena::synchronize_readers() {
  detail::heavy_fence();
  for (ThreadCache* tc : caches_)
    while (tc->active.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  pool_.map().free_retired();
}

std::int64_t detail::Arena::thread_cached_total_locked() const {
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
// Near fits for large blocks were measured with three flush rules (see
// bench/RESULTS.md, "Large near fits"): flushing unless the pool has a near
// fit of its own served few of `mixed`'s large requests and was no faster;
// flushing only before growing served most of them but reserved a third more
// on `mixed` and raised the GPT-2 classic replay's reserved/live from 1.15
// to 1.26; capping the parked bytes per thread gave up most of the hits and
// still cost memory. Random large sizes find a near fit only when the cache
// parks about as many bytes as the large pool has live, which is the
// fragmentation the flush avoids.
// So are expandable segments: their small pool never runs out of address
// range, so it never flushes the cache, which keeps every size it has seen
// and hits exactly; there near fits only slowed `mixed_set` down by handing
// out blocks another size would have hit.
// The search (StreamCache::pop_small) covers the exact size and its near
// fits at once; the caller finishes a near fit like an exact hit.

// ---------------------------------------------------------------------------
// Blocks


std::size_t detail::Arena::segment_size_for(PoolId pool, std::size_t rounded) const noexcept {
  if (pool == detail::kSmallPool) return kSmallSegment;
  if (rounded < kMinLargeAlloc) return kLargeSegment;
  return round_up(rounded, kRoundLarge);
}



// ---------------------------------------------------------------------------
// Allocation slow path

Block* detail::Arena::allocate_slow(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  GENESIS_CHECK(bytes <= detail::kMaxRequest, "cannot allocate ", bytes,
                " bytes: requests are limited to 2^62 bytes (was a negative size converted to unsigned?)");
  // Before locking: creating a thread cache takes the mutex.
  return allocate_miss(thread_cache(), bytes, detail::round_size(bytes), stream);
}

Block* detail::Arena::allocate_miss(ThreadCache* tc, std::size_t bytes, std::size_t rounded, StreamId stream) {
  if (GENESIS_UNLIKELY(tc != nullptr && tc->move_out)) {  // Note [Threads that contend move out]
    if (ThreadCache* moved = move_thread(tc); moved != nullptr) return moved->owner->allocate_miss(moved, bytes, rounded, stream);
    tc = thread_cache();  // stays here, or moved without a cache (null)
  }
  const bool recording = events_.on();
  const std::uint64_t t0 = recording ? detail::now_ns() : 0;
  const PoolId pool = pool_for(rounded);

  if (move_window_ != 0) detail::tls_lock_waited = false;
  Lock lock(mutex_);
  if (move_window_ != 0 && tc != nullptr) note_slow_lock(tc);
  if (!pending_.empty()) process_events();

  Block* b = nullptr;
  bool hit = true;
  const std::int64_t segments_before = stats_.counters.segments[pool];  // a new expandable range counts as growth
  if (tc != nullptr && tc->current->stream != stream) {
    // Another stream than the hot path looked at: its cache may hold a block.
    // (For the current stream the hot path's pop missed already; a reclaim
    // that made it skip the pop has emptied the cache since.)
    if (detail::StreamCache* sc = tc->cache_for(stream); sc != nullptr) {
      tc->set_current(sc);
      b = sc->pop(rounded, tc->num_allocs[detail::kSmallPool]);
      if (b != nullptr) {
        note_alloc_hot(tc, b, bytes);
        if (pool_.map().has_retired()) synchronize_readers();
        lock.unlock();
        if (recording) record_hot_alloc(tc, b, bytes);
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
  // the lock. Keeping up to thread_cache_large_park large blocks parked per
  // stream lets those come back as exact hits: fewer instructions per event
  // of the GPT-2 replay. Each parked block is memory the pool cannot place
  // requests in, though: on `mixed` (random sizes rarely come back) more
  // than 4 reserved more, and on the recorded corpus of real workloads 2 or
  // 4 reserved up to 3.4% more than 1 at the same speed (bench/RESULTS.md),
  // so the default is 1.
  // The limit holds at every free: a free that finds the cache at the limit
  // goes to the pool and takes the parked blocks with it (hot_free_path,
  // free_in_arena), so a search never finds more than the limit parked and
  // flushes only when the request is for another stream. A thread that frees
  // many large tensors and then waits (the backward pass's thread at the end
  // of a step) would otherwise keep them all until another thread's growth
  // reclaimed them, by which time that thread's searches had carved up the
  // rest of the pool around the gap (1.23x the live bytes reserved on an
  // autograd-like loop instead of 1.02x).
  // One branch on the whole test, not one per term: in `mixed` the pool is
  // a coin toss, and the short-circuit form cost 0.08 more mispredicts per
  // pair (callgrind's branch model).
  if (tc != nullptr && ((pool == detail::kLargePool) & (tc->cached_bytes[detail::kLargePool].get() != 0) &
                        (tc->current->stream != stream)))
    flush_thread_cache(tc, pool, &stream);
  b = pool_.find(pool, rounded, stream);
  if (b == nullptr && tc != nullptr && tc->cached_bytes[pool].get() != 0) {
    // Before growing: merged, parked blocks may fit (Note [Flush until fit]).
    if (pool == detail::kSmallPool) {
      b = flush_small_until_fit(tc, stream, rounded);
    } else {
      flush_thread_cache(tc, pool, &stream);
      b = pool_.find(pool, rounded, stream);
    }
  }
  if (b == nullptr && thread_cached_total_locked() >= static_cast<std::int64_t>(rounded)) {
    reclaim_thread_caches(false);
    b = pool_.find(pool, rounded, stream);
  }
  if (b == nullptr && expandable_.on() && expandable_.segment_for(*this, pool, stream) != nullptr) {
    b = pool_.find(pool, rounded, stream);
  }
  // Note [No new pages while caches hold blocks]: in an expandable segment
  // the search almost always finds room (the range is as large as the
  // device), so the flushes above, which wait for a failed search, rarely
  // run: a request that cached blocks would serve once merged landed on
  // unmapped pages instead, and the pool mapped more while caches held free
  // memory. Only the new-peak flush (Note [New peaks empty the thread
  // caches]) bounded that, and by then the blocks placed meanwhile had
  // spread over more pages: random sizes up to 1 MiB with random lifetimes
  // reserved 1.19x their peak live bytes with the cache and 1.06x without
  // on the simulated device. So before a block that needs new pages is
  // taken, the caches go back and the search runs again (1.07x there; the
  // recorded corpus unchanged or lower, bench/RESULTS.md). This costs only
  // requests that map pages, which are rare once a program is steady; with
  // sizes that never settle (`mixed` on the simulated device) it is 4% more
  // instructions per pair.
  const bool own_cached = tc != nullptr && tc->cached_bytes[pool].get() != 0;
  if (b != nullptr && b->segment->expandable && (own_cached || caches_.size() > 1) &&
      expandable_.unmapped_under(b, rounded) != 0) {
    if (own_cached) flush_thread_cache(tc, pool);
    if (caches_.size() > 1 && thread_cached_total_locked() >= static_cast<std::int64_t>(rounded))
      reclaim_thread_caches(false);
    b = pool_.find(pool, rounded, stream);
  }
  // Note [Borrowing across streams]: before pages are mapped past the mark
  // (which unmaps free pages elsewhere first) or the pool grows, a free block
  // of another stream may serve.
  Block* borrowed = nullptr;
  if (options_.stream_borrow) {
    if (b == nullptr) {
      // This thread's blocks parked for its other streams may be the ones to
      // lend (other threads' caches went back above if they held enough).
      if (tc != nullptr && tc->cached_bytes[pool].get() != 0) flush_thread_cache(tc, pool);
      if (pool_.free_index(pool).has_other_stream(stream)) borrowed = borrow(pool, rounded, stream, /*may_wait=*/false);
    } else if (b->segment->expandable && pool_.free_index(pool).has_other_stream(stream) &&
               expandable_.passes_mark(*this, expandable_.unmapped_under(b, rounded), rounded)) {
      borrowed = borrow(pool, rounded, stream, /*may_wait=*/true);
    }
  }
  if (borrowed != nullptr) {
    b = borrowed;
    if (b->segment->expandable) expandable_.ensure_mapped(*this, b, bytes);  // may split a chunk; maps nothing new
  } else if (b != nullptr) {
    b = pool_.take(b, rounded);
    // On failure ensure_mapped gives b back to the pool and throws.
    if (b->segment->expandable && expandable_.ensure_mapped(*this, b, bytes)) hit = false;
  } else {
    b = grow(pool, rounded, stream, bytes);  // throws OutOfMemoryError
    // grow's out-of-memory path may hand back a free block it found after all.
    if (b->segment->expandable) expandable_.ensure_mapped(*this, b, bytes);
    hit = false;
  }

  b->set_requested(bytes);
  b->set_location(detail::tls_allocation_context);
  b->set_taker(tc);  // Note [Cross-thread frees]
  stats_.note_alloc(pool, static_cast<std::int64_t>(b->size), bytes, hit);
  // A hit took no new segment and mapped no page.
  stats_.note_peaks_alloc(tc, pool, /*grew=*/!hit || stats_.counters.segments[pool] != segments_before,
                          pool_.inactive_split());
  if (pool_.map().has_retired()) synchronize_readers();
  if (recording) {
    b->alloc_time_ns.store(t0, std::memory_order_relaxed);
    record_event(tc, EventAction::kAlloc, b->addr, bytes, b->size, stream, detail::now_ns() - t0, hit);
  }
  return b;
}

Block* detail::Arena::allocate_at_arena(std::uintptr_t addr, std::size_t size, std::size_t requested) {
  const bool recording = events_.on();
  const std::uint64_t t0 = recording ? detail::now_ns() : 0;
  Lock lock(mutex_);
  Segment* seg = pool_.segments();
  while (seg != nullptr && (addr < seg->addr || addr - seg->addr >= seg->size)) seg = seg->next_seg;
  if (seg == nullptr) return nullptr;
  GENESIS_CHECK(!seg->expandable, "allocate_at: ", format_address(addr),
                " lies in an expandable segment; blocks are re-created at given addresses only in classic segments");
  GENESIS_CHECK(size > 0 && size % detail::kAlignment == 0 && (addr - seg->addr) % detail::kAlignment == 0 &&
                    size <= seg->addr + seg->size - addr,
                "allocate_at: ", size, " bytes at ", format_address(addr), " do not fit a block of the segment at ",
                format_address(seg->addr), " (", seg->size, " bytes; sizes are multiples of ", detail::kAlignment, ")");
  // Blocks parked in thread caches or awaiting other streams' work may cover
  // the range: let them come back first.
  if (!pending_.empty()) process_events();
  reclaim_thread_caches(true);
  Block* b = seg->first;
  while (b != nullptr && b->addr + b->size <= addr) b = b->next;
  GENESIS_CHECK(b != nullptr && b->load_state() == BlockState::kFree && addr + size <= b->addr + b->size,
                "allocate_at: [", format_address(addr), ", +", size, ") is not free: ",
                b == nullptr ? std::string("no block there")
                             : "the block at " + format_address(b->addr) + " (" + std::to_string(b->size) + " bytes) is " +
                                   (b->load_state() == BlockState::kFree ? "free but shorter" : "in use"));
  const PoolId pool = seg->pool;
  b = pool_.take_range(b, addr, size);
  b->set_requested(requested);
  b->set_location(detail::tls_allocation_context);
  b->set_taker(nullptr);
  stats_.note_alloc(pool, static_cast<std::int64_t>(b->size), requested, /*hit=*/true);
  stats_.note_peaks_alloc(nullptr, pool, /*grew=*/false, pool_.inactive_split());
  if (pool_.map().has_retired()) synchronize_readers();
  if (recording) {
    b->alloc_time_ns.store(t0, std::memory_order_relaxed);
    record_event(nullptr, EventAction::kAlloc, b->addr, requested, b->size, b->stream, detail::now_ns() - t0, true);
  }
  return b;
}

// Note [Borrowing across streams]: each stream's blocks live in segments of
// that stream, so that a block freed on a stream can be handed out again on
// it at once, ordered after the work already queued there. A program whose
// streams peak at different moments then keeps every stream's own peak:
// with classic segments the pool grows for one stream while another's
// segments sit free, and with expandable segments the pages one stream freed
// are unmapped before another maps the same amount (a trace with a copy
// stream and two compute streams, peaking at 713, 148 and 25 MB but
// together at 834 MB, mapped and unmapped about 46 MB every step). So before
// growing, or before mapping pages past the mark, the smallest free block
// of another stream of the pool that holds the request (with expandable
// segments, one whose pages are all mapped) is lent to the stream that
// asks, once nothing queued on the owner's stream can still use it:
//   - an event recorded on the owner's stream covers every use of the
//     block before it was freed (a segment whose stream was synchronised
//     since its last free, Segment::settled, needs none);
//   - with expandable segments the requesting stream waits for it on the
//     device: the alternative, unmapping pages, waits for a stream on the
//     host;
//   - with classic segments the block is lent only if the owner's stream
//     is idle (nothing queued there is still running): growing costs no
//     wait, and lending must not make one stream's work wait for
//     another's (a compute stream for a collective on a communication
//     stream would lose the overlap they were split for);
//   - the block stays in its owner's segment and is marked as used by the
//     requesting stream (stream_uses), so its free records an event there
//     and the block returns to its owner's free blocks only once that work
//     has completed, as any block used on another stream does.
// A lent block costs two driver calls (record and wait or query, ~2 us) and
// an event at its free; growing costs a segment and mapping costs a map, a
// set-access and, for the pages unmapped to make room, an unmap (~100 us
// per chunk on an H200). Single-stream programs never get here (one stream
// in the pool). stream_borrow:False turns it off.
Block* detail::Arena::borrow(PoolId pool, std::size_t rounded, StreamId stream, bool may_wait) {
  Block* best = nullptr;
  pool_.free_index(pool).for_each_at_least(rounded, [&](Block* c) {
    if (c->stream == stream || c->size < rounded || (best != nullptr && c->size >= best->size)) return;
    if (c->segment->expandable && expandable_.unmapped_under(c, rounded) != 0) return;
    best = c;
  });
  if (best == nullptr) return nullptr;
  // Allocate and wait before changing anything: either may throw.
  auto uses = std::make_unique<std::vector<StreamId>>(1, stream);
  Segment* seg = best->segment;
  // A stream the upstream cannot ask or order (one that failed, one it does
  // not know) lends nothing: the request is served as if it had no blocks.
  // The same for the stream that asks: a borrowed block records an event on
  // it when freed, and on a stream the upstream does not know that free
  // would fail for good, leaving the block allocated.
  try {
    (void)upstream_->stream_idle(stream);
  } catch (const std::exception&) {
    return nullptr;
  }
  if (!seg->settled) {
    bool idle = false;
    try {
      idle = upstream_->stream_idle(seg->stream);
    } catch (const std::exception&) {
      return nullptr;
    }
    if (idle) {
      seg->settled = true;  // as good as synchronised
    } else {
      if (!may_wait) return nullptr;
      EventId e{};
      try {
        e = upstream_->record_event(seg->stream);
      } catch (const std::exception&) {
        return nullptr;
      }
      try {
        upstream_->stream_wait_event(stream, e);
      } catch (const std::exception&) {
        upstream_->release_event(e);
        return nullptr;
      }
      upstream_->release_event(e);
    }
  }
  Block* b = pool_.take(best, rounded);
  b->stream_uses = uses.release();
  ++stats_.counters.num_stream_borrows;
  return b;
}

// Note [Classic segments at the mark]: a classic segment is given back only
// whole, and the pool keeps every segment it took until out of memory (or
// empty_cache), as PyTorch's native allocator does. A program whose sizes
// keep changing therefore reserves what it ever held in each size: on the
// recorded corpus, replayed on an H200, classic segments reserved 1.41 times
// the live bytes in geometric mean, 2.78 on a graph network whose tensors are
// sized by random node and edge counts (bench/RESULTS.md, "Classic segments
// that give back at the mark"). With classic_release_at_mark, a growth that
// would take reserved memory past the mark (the highest reserved bytes after
// any growth so far, or the most bytes out of the pool, if higher) first
// gives back wholly free segments, the largest first, until the excess is
// covered or none is left. Largest first gives back the excess in the fewest
// driver calls; smallest first and least recently used first reserved the
// same within 0.005 in geometric mean, and giving back every free segment
// made more calls for 0.015 less (simulated device, the same corpus). What
// it leaves is fragmentation inside segments, which only expandable
// segments remove: 1.13 in geometric mean, 1.47 at worst, at 1.29 times the
// replay's time per event in geometric mean (up to 3.7 times on the graph
// network, whose every growth is now a cudaFree and a cudaMalloc). Off by
// default: the replay's time is what classic segments are the CUDA default
// for.
Block* detail::Arena::release_segments_at_mark(PoolId pool, std::size_t rounded, StreamId stream,
                                                std::size_t seg_size) {
  if (options_.keep_segments) return nullptr;  // a graph pool: replays may write into free segments
  const std::int64_t allocated = stats_.out_total() - thread_cached_total_locked() + static_cast<std::int64_t>(rounded);
  classic_allocated_high_ = std::max(classic_allocated_high_, allocated);
  std::int64_t over = stats_.reserved_total() + static_cast<std::int64_t>(seg_size) -
                      std::max(classic_high_water_, classic_allocated_high_);
  if (over <= 0) return nullptr;
  // Blocks parked in thread caches may be all that keeps a segment in use;
  // back in the pool and merged, they may also serve the request.
  if (thread_cached_total_locked() != 0) {
    reclaim_thread_caches(true);
    if (Block* b = pool_.find(pool, rounded, stream); b != nullptr) return b;
  }
  std::vector<Segment*> whole;
  for (Segment* seg = pool_.segments(); seg != nullptr; seg = seg->next_seg) {
    if (!seg->expandable && seg->wholly_free()) whole.push_back(seg);
  }
  std::sort(whole.begin(), whole.end(), [](const Segment* x, const Segment* y) { return x->size > y->size; });
  for (Segment* seg : whole) {
    if (over <= 0) break;
    over -= static_cast<std::int64_t>(seg->size);
    release_segment(seg);
  }
  if (pool_.map().has_retired()) synchronize_readers();
  return nullptr;
}

Block* detail::Arena::grow(PoolId pool, std::size_t rounded, StreamId stream, std::size_t bytes) {
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
    if (p == nullptr) ++stats_.counters.num_upstream_failures;
    return p;
  };

  if (options_.classic_release_at_mark) {
    if (Block* fit = release_segments_at_mark(pool, rounded, stream, seg_size); fit != nullptr)
      return pool_.take(fit, rounded);
  }
  void* p = try_upstream(seg_size);
  if (p == nullptr) {
    // Out of memory: make everything cached reusable, then either a block fits
    // or the freed segments make room upstream.
    ++stats_.counters.num_cache_flushes;
    wait_all_pending();
    reclaim_thread_caches(true);
    if (Block* b = pool_.find(pool, rounded, stream); b != nullptr) return pool_.take(b, rounded);
    // FreeIndex::find examines a bounded number of blocks per size class
    // (Note [Free index]) and can miss one that fits behind many smaller ones
    // of the same class. Growing is fine then, but failing is not: before
    // giving up, look at every free block of the stream once (best fit).
    Block* fit = nullptr;
    pool_.free_index(pool).for_each([&](const Block* c) {
      if (c->stream == stream && c->size >= rounded && (fit == nullptr || c->size < fit->size))
        fit = const_cast<Block*>(c);
    });
    if (fit != nullptr) return pool_.take(fit, rounded);
    release_free_segments(UINT64_MAX, nullptr);
    p = try_upstream(seg_size);
    if (p == nullptr && arena_limit_ > 1 && release_other_arenas()) p = try_upstream(seg_size);
    if (p == nullptr && pool == detail::kLargePool && seg_size > round_up(rounded, kRoundLarge)) {
      seg_size = round_up(rounded, kRoundLarge);  // no room for a shared 20 MiB segment: take just enough
      p = try_upstream(seg_size);
    }
    if (p == nullptr) {
      // The request itself may be small: what failed is the segment it
      // needed, which the message names.
      const std::string segment = "a new segment of " + genesis::detail::format_bytes(seg_size) + " (" +
                                  (pool == detail::kSmallPool ? "small requests share 2 MiB segments"
                                                              : "the smallest segment that holds it") +
                                  ")";
      throw_oom(bytes, stream,
                capped ? segment + " would take reserved memory past the memory fraction cap (set_memory_fraction)"
                       : segment + " was needed and the upstream has no contiguous range of that size left");
    }
  }

  Segment* seg = pool_.add_segment(reinterpret_cast<std::uintptr_t>(p), seg_size, pool, stream, /*expandable=*/false);
  Block* b = seg->first;
  add_reserved(pool, static_cast<std::int64_t>(seg_size));
  classic_high_water_ = std::max(classic_high_water_, stats_.reserved_total());
  stats_.counters.reserved_allocated[pool] += static_cast<std::int64_t>(seg_size);
  stats_.note_segment_added(pool);
  ++stats_.counters.num_upstream_allocs;
  if (events_.on()) {
    record_event(nullptr, EventAction::kSegmentAlloc, seg->addr, seg_size, seg_size, stream, 0, false);
  }
  return pool_.take(b, rounded);
}


// ---------------------------------------------------------------------------
// Free slow path

void detail::Arena::free_slow(Block* b, bool lookup_failed, void* ptr) {
  ThreadCache* tc = thread_cache();
  // Note [Arenas]: a block goes back to the arena that made it.
  if (GENESIS_UNLIKELY(arena_limit_ > 1 && !lookup_failed && b->arena != arena_index_)) return free_elsewhere(b, ptr);
  if (!free_in_arena(tc, b, lookup_failed, ptr, arena_limit_ == 1)) free_elsewhere(nullptr, ptr);
}

// A free that is not this arena's: the arena named by the block, or each
// other arena in turn, asked under its own mutex, one at a time.
void detail::Arena::free_elsewhere(Block* b, void* ptr) {
  // A block freed into an arena its threads have left is not kept there.
  auto release_if_deserted = [&](Arena& a) {
    if (a.arena_index_ == 0 || !set_->moves()) return;
    Lock lock(a.mutex_);
    a.release_if_deserted_locked();
  };
  if (b != nullptr) {
    Arena* owner = set_->get(b->arena);
    if (owner != nullptr && owner->free_in_arena(nullptr, b, false, ptr, false)) return release_if_deserted(*owner);
  }
  bool done = false;
  Arena* freed_in = nullptr;
  set_->for_each([&](Arena& a) {
    if (!done && &a != this && (done = a.free_in_arena(nullptr, nullptr, true, ptr, false))) freed_in = &a;
  });
  if (freed_in != nullptr) return release_if_deserted(*freed_in);
  if (!done) report_bad_free(reinterpret_cast<std::uintptr_t>(ptr));
}

void detail::Arena::report_bad_free(std::uintptr_t addr) const {
  bool inside = false;
  set_->for_each([&](Arena& a) {
    Lock lock(a.mutex_);
    for (const Segment* seg = a.pool_.segments(); seg != nullptr && !inside; seg = seg->next_seg)
      inside = addr > seg->addr && addr < seg->addr + seg->size;
  });
  GENESIS_CHECK(!inside, "cannot free ", format_address(addr), ": it points inside a segment of allocator '", upstream_->name(),
                "' but is not the start of an allocation");
  GENESIS_CHECK(false, "cannot free ", format_address(addr), ": this pointer was not allocated by the caching allocator of '",
                upstream_->name(), "'");
  std::abort();  // not reached: GENESIS_CHECK(false, ...) throws
}

// Always inlined: the common case (free_slow, a block of this arena) pays no
// call for it; free_elsewhere has the other copy.
[[gnu::always_inline]] inline bool detail::Arena::free_in_arena(ThreadCache* tc, Block* b, bool lookup_failed,
                                                                  void* ptr, bool report) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  Lock lock(mutex_);
  // A record looked up without the lock (deallocate) or handed in by the
  // caller (free_block) may have been freed and recycled since by a racing
  // double free: trust it only if it still describes addr.
  if (lookup_failed || b->addr != addr) b = pool_.map().find(addr);
  if (b == nullptr || b->load_state() == BlockState::kDead) {
    if (!report) return false;
    lock.unlock();  // report_bad_free locks every arena, this one included
    report_bad_free(addr);
  }
  const BlockState state = b->load_state();
  GENESIS_CHECK(state == BlockState::kAllocated, "double free of ", format_address(b->addr), " (", b->size,
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
  if (events_.on())
    record_free_event(tc, b);
  stats_.note_free(pool, size, b->get_requested());

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
    stats_.counters.pending_bytes[pool] += size;
    process_events();
  } else {
    delete b->stream_uses;
    b->stream_uses = nullptr;
    pool_.give_back(b);
  }
  // This thread's cache already parks the most large blocks it may (Note
  // [Parked large blocks]): they go to the pool with this one, as the next
  // large-pool search would have sent them.
  if (tc != nullptr && pool == detail::kLargePool) {
    detail::StreamCache* sc = tc->hot_stream_cache();
    if (sc->large_blocks != 0 && sc->large_blocks >= large_park_) flush_thread_cache(tc, pool, &sc->stream);
  }
  stats_.note_peaks_free(tc, pool, pool_.inactive_split());
  enforce_cache_limit();
  return true;
}

void detail::Arena::process_events() {
  std::size_t kept = 0;
  std::size_t i = 0;
  try {
    for (; i < pending_.size(); ++i) {
      PendingEvent pe = pending_[i];
      if (upstream_->event_done(pe.event)) {  // may throw (a failed CUDA launch)
        upstream_->release_event(pe.event);
        if (--pe.block->pending_events == 0) {
          stats_.counters.pending_bytes[pe.block->pool] -= static_cast<std::int64_t>(pe.block->size);
          pool_.give_back(pe.block);
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

void detail::Arena::wait_all_pending() {
  for (const PendingEvent& pe : pending_) upstream_->wait_event(pe.event);
  process_events();
}

}  // namespace genesis::memory
