// The device-agnostic caching allocator (SPEC M1-M6).
//
// It sits on any UpstreamResource (CUDA device memory, pinned host memory,
// host memory, a simulated GPU) and keeps freed blocks for reuse:
//   - requests are rounded to 512 bytes; <= 1 MiB go to the small pool
//     (2 MiB segments), larger ones to the large pool (20 MiB segments for
//     requests under 10 MiB, else the request rounded up to 2 MiB);
//   - best fit over free blocks of the same stream, splitting blocks and
//     coalescing free neighbours;
//   - a block used on other streams (record_stream) is reused only after
//     events recorded on those streams complete;
//   - a per-thread cache makes a cache hit a pop from a thread-local list
//     (no shared lock, no atomic read-modify-write); a small request whose
//     exact size is not cached may take a cached block up to 1/4 larger
//     (Note [Near fits]); misses take the slow path under the mutex of the
//     thread's arena (threads are dealt over up to 8 independent pools:
//     Note [Arenas]), which returns cached large blocks to the pool before
//     its searches (all but a few: Note [Parked large blocks]) and every
//     cached block before growing;
//   - when the upstream refuses, cached memory is released and the request
//     retried; then OutOfMemoryError explains the situation;
//   - optionally (AllocatorOptions::expandable_segments), segments are
//     address ranges whose pages are mapped on demand and unmapped when free
//     (Note [Expandable segments] in allocator_expandable.cpp).
//
// Thread safety: every public member may be called from any thread.
// Stream semantics: a block allocated on stream S may be used by work queued
// on S without synchronisation; after deallocate() it is handed out again on S
// at once (S orders the work), on other streams only via record_stream().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/detail/asymmetric_fence.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/detail/free_index.h"
#include "genesis/memory/detail/pointer_map.h"
#include "genesis/memory/detail/pool_mutex.h"
#include "genesis/memory/detail/thread_cache.h"
#include "genesis/memory/events.h"
#include "genesis/memory/stats.h"
#include "genesis/memory/upstream.h"

namespace genesis::memory {

/// Tunables. Defaults follow what works for training workloads.
struct AllocatorOptions {
  /// Cap on reserved memory as a fraction of the upstream's total (M4).
  double memory_fraction = 1.0;
  /// Cap on cached (reserved - allocated) bytes; SIZE_MAX = none (M4).
  std::size_t cache_size_limit = SIZE_MAX;
  /// Per-thread caches on the hot path. Off: every call takes the mutex.
  bool thread_cache = true;
  /// Bytes one thread's cache may hold; 0 = min(2 GiB, total / 32).
  std::size_t thread_cache_bytes = 0;
  /// Blocks one thread cache keeps per small size / per large size. A
  /// training step frees many tensors of one small size together and asks
  /// for them again the next step: at 32 per size, 1494 frees of each GPT-2
  /// replay found their list full and went to the pool, and as many later
  /// allocations split them off again. 128 runs the replay in 6% fewer
  /// instructions with the same reserved memory (1.005 / 1.146 of live;
  /// `mixed` and `mixed_set` unchanged too: bench/RESULTS.md, seventh session).
  std::uint32_t thread_cache_small_count = 128;
  std::uint32_t thread_cache_large_count = 4;
  /// Large blocks one thread may keep parked in its cache (per stream)
  /// across large-pool searches before they return to the pool (Note
  /// [Parked large blocks]); 0: every large-pool search returns them first.
  std::uint32_t thread_cache_large_park = 4;
  /// Near fits (Note [Near fits]): when a thread cache has no block of the
  /// requested small size, it hands out its smallest block that is at most
  /// 1/N larger (N = this value; 0: exact sizes only). Classic segments
  /// only: ignored with expandable segments.
  std::uint32_t thread_cache_near_fit = 4;
  /// Expandable segments (SPEC M5, Note [Expandable segments]): one large
  /// virtual range per pool and stream whose physical pages are mapped as
  /// blocks need them and unmapped when free. Needs an upstream with virtual
  /// memory support (CUDA, simulated device); ignored (classic segments) for
  /// others. AUTO: on where the upstream maps pages cheaply (the simulated
  /// device); on CUDA ask for kOn: the least memory (GPT-2 trace: 1.006x the
  /// live bytes against 1.146x classic) at the price of slow first mappings.
  enum class Expandable : std::uint8_t { kAuto, kOn, kOff };
  Expandable expandable_segments = Expandable::kAuto;
  /// Expandable segments: the most pages one physical chunk may span (Note
  /// [Physical chunks]). The pages a block lies wholly over are mapped as
  /// chunks of up to this many pages, the pages it shares with neighbours as
  /// chunks of one page; 1 maps every page alone. 0 (auto): 1 where the
  /// upstream maps pages cheaply (the simulated device), 64 where each
  /// physical allocation costs the driver tens of microseconds (CUDA).
  std::uint32_t chunk_pages = 0;
  /// Expandable segments: when a new block covers part of a chunk that
  /// reaches past it into free memory, the chunk is unmapped (and the
  /// block's pages mapped again) unless at most this many of its pages lie
  /// outside the block (Note [Physical chunks]). 0: always, so that every
  /// free page can later be released (the least memory); more: fewer
  /// mappings, a little more memory.
  std::uint32_t chunk_strand_pages = 0;
  /// Arenas (Note [Arenas]): independent pools, each with its own lock,
  /// free lists and segments; threads are spread over them in the order they
  /// first allocate, so threads that miss their caches at the same time do
  /// not serialise on one lock and one set of pool data. 0 (auto): a single
  /// pool for device memory, one arena per hardware thread (at most
  /// kMaxArenas) for host and pinned memory (Note [Arenas]); 1: a single
  /// pool. The first thread (and any
  /// single-threaded program) uses arena 0 only: an arena is created when a
  /// thread is first assigned to it.
  std::uint32_t arenas = 0;
  /// Record every alloc/free into the event history (M8).
  bool record_events = false;
  std::size_t event_capacity_per_thread = std::size_t{1} << 16;
};

class CachingAllocator {
 public:
  using Block = detail::Block;
  /// Most arenas one allocator spreads threads over (Note [Arenas]).
  static constexpr std::uint32_t kMaxArenas = 8;

  /// Throws InvalidArgumentError for a null upstream or bad options.
  explicit CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options = {});
  /// Returns every segment to the upstream. Blocks still allocated are leaked
  /// to the upstream's lifetime (their memory is released with the segment).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // --- allocation ----------------------------------------------------------
  // The four entry points below are always inlined into their callers: when
  // gcc stopped inlining deallocate() after a change to its body, the call
  // and its register saves cost ~15 instructions of a ~250-instruction round
  // trip (bench/alloc_icount.sh).

  /// Allocates `bytes` for use on `stream`. Returns nullptr for 0 bytes
  /// (documented behaviour, like PyTorch). Throws OutOfMemoryError when the
  /// memory cannot be had even after releasing the cache, and
  /// InvalidArgumentError for sizes above 2^62.
  [[gnu::always_inline]] void* allocate(std::size_t bytes, StreamId stream = 0) {
    Block* b = allocate_block(bytes, stream);
    return b != nullptr ? b->ptr() : nullptr;
  }

  /// Frees a pointer returned by allocate(). nullptr is ignored. Throws
  /// InvalidArgumentError for a pointer this allocator did not hand out (or
  /// not the start of an allocation) and for a double free; the allocator is
  /// unchanged in both cases.
  [[gnu::always_inline]] void deallocate(void* ptr);

  /// Like allocate() but returns the block record: free_block() then needs
  /// no address lookup (the handle API used by storages).
  [[gnu::always_inline]] Block* allocate_block(std::size_t bytes, StreamId stream = 0);
  /// Frees a block from allocate_block(). Same errors as deallocate().
  [[gnu::always_inline]] void free_block(Block* block);

  /// Marks `ptr` as used by work on `stream` (record_stream semantics): when
  /// freed, the block is reused only after that work completes.
  void record_stream(void* ptr, StreamId stream);

  /// True when `ptr` is the start of a live allocation of this allocator.
  bool owns(const void* ptr) const noexcept;
  /// Rounded size of the live allocation at `ptr`; throws if not owned.
  std::size_t allocation_size(const void* ptr) const;
  /// The live allocation at `ptr` (size, requested size, stream, location);
  /// std::nullopt when `ptr` is not the start of one. What storage-level
  /// tracking reads instead of keeping books of its own.
  std::optional<AllocationInfo> allocation_info(const void* ptr) const;

  // --- statistics ----------------------------------------------------------
  MemoryStats stats() const;
  /// Peaks become the current values.
  void reset_peak_stats();
  /// Counters, totals and peaks start again from the current state.
  void reset_memory_stats();
  /// A readable table of the statistics (PyTorch's memory_summary layout).
  std::string memory_summary() const;
  /// Every segment and its blocks.
  std::vector<SegmentInfo> snapshot() const;
  /// Live allocations of at least `min_size` bytes, largest first.
  std::vector<AllocationInfo> large_allocations(std::size_t min_size) const;

  // --- controls ------------------------------------------------------------
  /// Returns every cached block that fills a whole segment to the upstream,
  /// after waiting for pending stream work. Allocated memory is untouched.
  void empty_cache();
  /// Cap reserved memory at `fraction` (0, 1] of the upstream's total.
  void set_memory_fraction(double fraction);
  /// Cap cached memory (reserved - allocated); SIZE_MAX removes the cap.
  void set_cache_size(std::size_t bytes);
  /// The same with a size written by a person: "2GB", "512MiB" (parse_bytes).
  void set_cache_size(std::string_view size);
  /// Reserves memory for the given (size, count) pairs ahead of time: the
  /// blocks are allocated and freed so that later requests hit the cache.
  void warmup(const std::vector<std::pair<std::size_t, int>>& sizes, StreamId stream = 0);
  /// Releases cached segments not used for `max_idle`; returns bytes released.
  std::size_t collect_garbage(std::chrono::nanoseconds max_idle = std::chrono::seconds(0));
  /// Releases physical memory that backs no allocation: free pages inside
  /// expandable segments and wholly free classic segments (SPEC M5). Unlike
  /// empty_cache() it keeps the address ranges, so later growth is cheap.
  /// Returns the bytes released.
  std::size_t compact();
  /// True when this allocator uses expandable segments.
  bool expandable_segments() const noexcept { return expandable_; }
  /// Arenas threads are spread over, and how many exist so far (Note [Arenas]).
  std::uint32_t arena_limit() const noexcept { return arena_limit_; }
  std::uint32_t arenas_in_use() const noexcept;
  /// Current limits.
  std::size_t memory_limit() const;

  // --- event history (Note [Event history], Note [Exact sessions]) --------
  void set_event_recording(bool on);
  bool event_recording() const noexcept { return recording_.load(std::memory_order_relaxed); }
  /// The recorded events of all threads still in the rings, ordered by time.
  std::vector<MemoryEvent> events() const;
  /// Forgets the events (totals and levels stay: sessions keep their counts).
  void clear_events();
  /// Sums over every event recorded so far, overwritten or not.
  EventTotals event_totals() const;
  /// A session's start, held until release_mark(); exact while recording stays on.
  RecordingMark mark_recording();
  RecordingSummary recording_since(const RecordingMark& mark) const;
  void release_mark(const RecordingMark& mark);

  UpstreamResource& upstream() const noexcept { return *upstream_; }
  const AllocatorOptions& options() const noexcept { return options_; }

 private:
  friend struct AllocatorAccess;  // tests of internals
  friend struct AllocatorFork;    // Note [Allocators across fork] (detail/allocator_fork.h)
  using Lock = std::unique_lock<detail::PoolMutex>;  // Note [Pool mutex]

  // Arenas (Note [Arenas]): arena k > 0 is a CachingAllocator owned by the
  // root (arena 0, the object users hold). `root` is the root; `index` this
  // arena's number.
  CachingAllocator(std::shared_ptr<UpstreamResource> upstream, AllocatorOptions options, CachingAllocator* root,
                   std::uint8_t index);
  // The root and every arena created so far (the root first).
  template <class F>
  void for_each_arena(F&& f) const {
    for (std::uint32_t i = 0; i < arena_limit_; ++i)
      if (CachingAllocator* a = root_->arena_ptrs_[i].load(std::memory_order_acquire); a != nullptr) f(*a);
  }
  // Calls f(block) for the live allocation that starts at `addr`, under the
  // mutex of the arena holding it; the arenas are asked one at a time, each
  // under its own mutex (another arena's map may be rebuilt, and its old
  // table freed, at any moment outside it). False, f not called: no arena has it.
  template <class F>
  bool with_live_block(std::uintptr_t addr, F&& f) const {
    bool found = false;
    for_each_arena([&](CachingAllocator& a) {
      if (found) return;
      Lock lock(a.mutex_);
      Block* b = a.map_.find(addr);
      if (b != nullptr && b->load_state() == detail::BlockState::kAllocated) {
        found = true;
        f(*b);
      }
    });
    return found;
  }
  CachingAllocator* arena_for_new_thread();  // root only
  // The free slow path inside one arena. Returns false when the block is not
  // this arena's (report: throw the bad-free error instead).
  bool free_in_arena(detail::ThreadCache* tc, Block* b, bool lookup_failed, void* ptr, bool report);
  [[gnu::noinline]] void free_elsewhere(Block* b, void* ptr);
  [[noreturn]] void report_bad_free(std::uintptr_t addr) const;
  // Out of memory in this arena: give back what the other arenas cache (best
  // effort: an arena whose lock is taken is skipped, so that two arenas out
  // of memory at once cannot deadlock). Returns true if anything was freed.
  bool release_other_arenas();
  void add_reserved(detail::PoolId pool, std::int64_t delta) noexcept {
    counters_.reserved[pool] += delta;
    if (arena_limit_ > 1) {
      family_reserved_->fetch_add(delta, std::memory_order_relaxed);
    } else {  // one arena: only this mutex's holder writes it
      family_reserved_->store(family_reserved_->load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }
  }
  // Every arena's mutex, held for the life of the view; `arenas` lists
  // exactly the arenas locked. Walk those, never for_each_arena: an arena
  // made after the locks were taken is not locked, and its first segment may
  // be half linked (a snapshot saw a segment with no blocks that way).
  struct LockedArenas {
    std::vector<CachingAllocator*> arenas;
    std::vector<Lock> locks;
  };
  LockedArenas lock_arenas() const;
  // Per-arena bodies of the public members of the same name (snapshot_arena:
  // mutex_ held; the others take it).
  void reset_peak_stats_arena();
  void reset_memory_stats_arena();
  std::vector<SegmentInfo> snapshot_arena() const;
  std::vector<AllocationInfo> large_allocations_arena(std::size_t min_size) const;
  void empty_cache_arena();
  std::size_t collect_garbage_arena(std::chrono::nanoseconds max_idle);
  std::size_t compact_arena();
  void set_memory_fraction_arena(double fraction);
  void set_cache_size_arena(std::size_t bytes);
  void set_event_recording_arena(bool on);
  void events_arena(std::vector<MemoryEvent>& out) const;
  void clear_events_arena();
  void event_totals_arena(EventTotals& out, std::uint64_t& lost_until_ns) const;
  // Cumulative counters of the slow path (guarded by mutex_). Per-thread
  // counters live in ThreadCache; stats() adds both.
  struct GlobalCounters {
    std::int64_t pending_bytes[detail::kNumPools] = {};
    std::int64_t reserved[detail::kNumPools] = {};
    std::int64_t segments[detail::kNumPools] = {};
    std::int64_t inactive_split_bytes[detail::kNumPools] = {};
    std::int64_t inactive_split_count[detail::kNumPools] = {};
    std::int64_t num_allocs[detail::kNumPools] = {};
    std::int64_t num_frees[detail::kNumPools] = {};
    std::int64_t requested[detail::kNumPools] = {};
    std::int64_t total_allocated[detail::kNumPools] = {};
    std::int64_t num_hits = 0, num_misses = 0, num_ooms = 0;
    std::int64_t num_upstream_allocs = 0, num_upstream_frees = 0, num_upstream_failures = 0;
    std::int64_t num_cache_flushes = 0;
    std::int64_t reserved_allocated[detail::kNumPools] = {}, reserved_freed[detail::kNumPools] = {};
  };
  // Values at the last reset_memory_stats(), subtracted from the cumulative
  // counters when reporting.
  struct Baseline {
    std::int64_t num_allocs = 0, num_frees = 0, num_hits = 0, num_misses = 0, num_ooms = 0;
    std::int64_t num_thread_hits = 0, num_upstream_allocs = 0, num_upstream_frees = 0;
    std::int64_t num_upstream_failures = 0, num_cache_flushes = 0;
    std::int64_t total_allocated[3] = {}, allocated_bytes[3] = {}, reserved_allocated[3] = {};
    std::int64_t reserved_freed[3] = {}, allocs[3] = {}, frees[3] = {}, requested_current[3] = {};
    std::int64_t segments_allocated[3] = {};
  };
  // Peaks (Note [Statistics]); index by StatType.
  struct Peaks {
    std::int64_t allocated[3] = {}, reserved[3] = {}, active[3] = {}, requested[3] = {};
    std::int64_t cached[3] = {}, segments[3] = {}, allocations[3] = {}, inactive_split[3] = {};
  };

  // Hot path helpers.
  detail::ThreadCache* thread_cache() noexcept {
    const detail::TlsSlot& s = detail::tls_slots[slot_];
    if (GENESIS_LIKELY(s.generation == generation_)) return s.cache;
    return thread_cache_slow();
  }
  // Always inlined: out of line, saving and restoring registers around them
  // cost ~13 instructions of a ~300-instruction hot pair (callgrind).
  [[gnu::always_inline]] void note_alloc_hot(detail::ThreadCache* tc, Block* b, std::size_t bytes) noexcept;
  // The hot path proper, on the calling thread's arena (this == tc->owner).
  [[gnu::always_inline]] Block* allocate_in(detail::ThreadCache* tc, std::size_t bytes, StreamId stream);
  [[gnu::always_inline]] void deallocate_in(detail::ThreadCache* tc, void* ptr);
  [[gnu::always_inline]] void free_block_in(detail::ThreadCache* tc, Block* b);
  [[gnu::always_inline]] Block* hot_free_path(detail::ThreadCache* tc, Block* b) noexcept;

  // Slow paths (caching_allocator.cpp).
  detail::ThreadCache* thread_cache_slow() noexcept;
  Block* allocate_slow(std::size_t bytes, StreamId stream);
  // allocate_slow past its argument checks and thread-cache lookup: the hot
  // path's misses (a third of `mixed`'s allocations) come with both done.
  Block* allocate_miss(detail::ThreadCache* tc, std::size_t bytes, std::size_t rounded, StreamId stream);
  void free_slow(Block* b, bool lookup_failed, void* ptr);
  Block* find_free_block(detail::PoolId pool, std::size_t rounded, StreamId stream);
  Block* take_block(Block* b, std::size_t rounded);   // split, mark allocated
  Block* grow(detail::PoolId pool, std::size_t rounded, StreamId stream, std::size_t bytes);
  // A new segment, linked in, with one free block covering it (indexed).
  detail::Segment* add_segment(std::uintptr_t addr, std::size_t size, detail::PoolId pool, StreamId stream,
                               bool expandable);
  // Expandable segments (allocator_expandable.cpp).
  detail::Segment* expandable_segment(detail::PoolId pool, StreamId stream);
  bool ensure_mapped(Block* b, std::size_t bytes);  // true if pages were mapped; may throw OOM
  bool map_block_pages(Block* b, std::size_t bytes);  // ensure_mapped past its inline "all mapped" check
  std::size_t release_free_pages(std::size_t at_least = SIZE_MAX);  // SIZE_MAX: every free page
  std::size_t unmap_range(detail::Segment* seg, std::size_t first, std::size_t end);  // whole chunks only
  // Shrinks the page range [first, end) to the whole chunks inside it.
  static void whole_chunks(const detail::Segment* seg, std::size_t& first, std::size_t& end) noexcept;
  bool straddles_chunk(const Block* b) const noexcept;  // a chunk reaches across one of b's edges
  void split_chunks(Block* b);                          // unmaps those chunks (they hold no data)
  // Maps pages [first, end) of b's segment as chunks of `chunk` pages; throws OOM.
  void map_chunk(Block* b, std::size_t bytes, std::size_t first, std::size_t end, std::size_t chunk);
  std::size_t mapped_in(const Block* b) const noexcept;
  // Merge + index; touch: mark the segment used now. Returns the free block
  // that b became part of.
  Block* return_to_pool(Block* b, bool touch = true);
  // index_erase returns what index_insert takes as `like` for a block of the
  // same segment (FreeIndex::insert_like); null: a plain insert.
  void index_insert(Block* b, void* like = nullptr);
  void* index_erase(Block* b);
  void process_events();
  void wait_all_pending();
  void release_free_segments(std::uint64_t idle_before_ns, std::size_t* released, bool keep_expandable = false);
  void release_segment(detail::Segment* seg);
  // Mutex held, handshake done (or the owner calling). only_pool < 0 and
  // only_stream null: everything.
  void flush_thread_cache(detail::ThreadCache* tc, int only_pool = -1, const StreamId* only_stream = nullptr);
  // Note [Flush until fit]: returns the stream's cached small blocks until
  // one merges into a free block of >= rounded bytes (returned), or all are
  // back (null). Mutex held, owner calling.
  Block* flush_small_until_fit(detail::ThreadCache* tc, StreamId stream, std::size_t rounded);
  // After a flush: `bytes` of `pool` left tc's cache and went back to the pool.
  void uncount_flushed(detail::ThreadCache* tc, detail::PoolId pool, std::int64_t bytes);
  void reclaim_thread_caches(bool include_self);      // mutex held
  void synchronize_readers();                         // mutex held
  void enforce_cache_limit();
  void update_peaks_locked();  // exact sums over every thread cache (thread exit)
  // O(1), see allocator_stats.cpp. grew: reserved memory or segments may have grown.
  [[gnu::always_inline]] void note_peaks_slow(const detail::ThreadCache* tc, detail::PoolId pool, bool grew);
  void note_peaks_free(const detail::ThreadCache* tc, detail::PoolId pool);
  void store_hot_bases(detail::PoolId pool);  // base_requested_/base_live_ from the pool's counters
  std::int64_t thread_cached_total_locked() const;
  [[noreturn]] void throw_oom(std::size_t bytes, StreamId stream, const std::string& why);
  Block* new_block();
  Block* new_block_chunk();  // new_block's refill: a chunk of kBlockChunk records (out of line)
  void delete_block(Block* b);
  void record_event(detail::ThreadCache* tc, EventAction action, std::uintptr_t addr, std::uint64_t size,
                    std::uint64_t block_size, StreamId stream, std::uint64_t duration, bool hit);
  void record_event_hot_alloc(detail::ThreadCache* tc, Block* b, std::size_t bytes) noexcept;
  void record_event_hot_free(detail::ThreadCache* tc, Block* b) noexcept;
  void retire_thread_cache(detail::ThreadCache* tc);  // thread exit
  friend struct ThreadExitHook;
  MemoryStats stats_locked() const;
  std::size_t segment_size_for(detail::PoolId pool, std::size_t rounded) const noexcept;
  std::size_t thread_cache_limit() const noexcept { return tc_byte_limit_.load(std::memory_order_relaxed); }

  std::shared_ptr<UpstreamResource> upstream_;
  AllocatorOptions options_;
  // Arenas (Note [Arenas]). arena_ptrs_ and the counters below are used
  // through root_; an arena's own copies stay unused.
  CachingAllocator* root_ = this;
  std::uint8_t arena_index_ = 0;
  std::uint32_t arena_limit_ = 1;
  std::atomic<CachingAllocator*> arena_ptrs_[kMaxArenas] = {};
  std::unique_ptr<CachingAllocator> arena_owned_[kMaxArenas];  // guarded by arena_mutex_
  std::mutex arena_mutex_;
  // Written by any arena (new threads, growth): a cache line of their own,
  // away from slot_ and generation_, which every arena's threads read on
  // every call (thread_cache() of the root).
  alignas(64) std::atomic<std::uint32_t> threads_seen_{0};
  // Reserved bytes of all arenas together: the memory fraction caps this.
  std::atomic<std::int64_t> family_reserved_storage_{0};
  alignas(64) std::atomic<std::int64_t>* family_reserved_ = &family_reserved_storage_;
  const bool asymmetric_;            // membarrier handshake available
  bool expandable_ = false;          // resolved from options + upstream support
  std::size_t page_size_ = 0;        // upstream page size when expandable_
  int page_shift_ = 0;               // log2(page_size_): page numbers by shifts, not 64-bit divisions
  std::size_t chunk_pages_ = 1;      // options_.chunk_pages resolved (Note [Physical chunks])
  std::size_t page_floor(std::size_t off) const noexcept { return off >> page_shift_; }
  std::size_t page_ceil(std::size_t off) const noexcept { return (off + page_size_ - 1) >> page_shift_; }
  // Near fits (Note [Near fits]): a small request of bin i may take a cached
  // block of bins i .. i + i/N, i/N computed as (i * near_mul_) >> 32 with
  // near_mul_ = ceil(2^32 / N) (exact for every bin; no division on the hot
  // path). 0: exact sizes only (near fits off, or expandable segments).
  std::uint64_t near_mul_ = 0;
  std::uint32_t large_park_ = 0;     // thread_cache_large_park (Note [Parked large blocks])
  int slot_ = 0;                     // index into tls_slots
  std::uint64_t generation_ = 0;     // unique per allocator, never 0 when slotted
  std::atomic<bool> recording_{false};
  std::atomic<std::size_t> tc_byte_limit_{0};
  // Bytes of blocks Allocated or ThreadCached ("out of the pool"); written
  // under mutex_, read by the hot path for peak candidates. From here on the
  // fields are written by the slow path: a new cache line, so that the
  // root's slot_ and generation_ above stay clean for the other arenas'
  // threads (Note [Arenas]: with them on one line, 8 threads of `mixed`
  // took 28-33 ns per pair together, against 21 with an allocator each).
  alignas(64) std::atomic<std::int64_t> out_bytes_total_{0};
  std::atomic<std::int64_t> out_bytes_pool_[detail::kNumPools] = {};
  // The pool's share (slow path + exited threads) of requested bytes and of
  // live allocations, per pool; written under mutex_, read by the hot path.
  std::atomic<std::int64_t> base_requested_[detail::kNumPools] = {};
  std::atomic<std::int64_t> base_live_[detail::kNumPools] = {};

  mutable detail::PoolMutex mutex_;
  // Everything below is guarded by mutex_.
  detail::FreeIndex free_[detail::kNumPools];  // Note [Free index]
  detail::PointerMap map_;
  detail::Segment* segments_ = nullptr;
  std::vector<detail::ThreadCache*> caches_;
  struct PendingEvent {
    EventId event;
    Block* block;
  };
  std::vector<PendingEvent> pending_;
  std::vector<std::unique_ptr<Block[]>> block_chunks_;
  Block* free_blocks_ = nullptr;
  GlobalCounters counters_;
  Baseline baseline_;
  // Mutable: stats() folds the values it observes in, so that reported peaks
  // never go down between two reads.
  mutable Peaks peaks_;
  // Folded-in counters of thread caches whose threads exited.
  std::int64_t retired_allocs_[detail::kNumPools] = {}, retired_frees_[detail::kNumPools] = {};
  std::int64_t retired_requested_[detail::kNumPools] = {}, retired_total_allocated_[detail::kNumPools] = {};
  std::vector<std::unique_ptr<detail::EventRing>> retired_rings_;
  EventTotals cleared_totals_;             // of retired rings that clear_events() dropped
  std::uint64_t cleared_lost_until_ns_ = 0;  // newest event those rings held
  std::vector<detail::Segment*> expandable_segments_;
  struct ReleaseCandidate {
    std::uintptr_t start;  // address of page `first`: the release order's key, computed once
    detail::Segment* seg;
    std::size_t first, end;  // pages wholly inside a free block
  };
  std::vector<ReleaseCandidate> release_candidates_;  // scratch of release_free_pages
  std::int64_t mapped_high_water_ = 0;  // highest reserved total so far (Note [Expandable segments])
  std::size_t memory_limit_ = SIZE_MAX;
  std::size_t total_capacity_ = 0;
  std::unique_ptr<detail::EventRing> shared_ring_;  // threads without a cache; made when recording starts
  std::atomic<std::uint64_t> recording_since_ns_{0};  // lifetimes only for blocks allocated after this
  detail::RecordingLevels levels_;  // the root's counts for every arena (Note [Exact sessions])
};

/// Sets the "location" recorded for allocations made by this thread while the
/// object lives (for large_allocations() and leak reports). `location` must
/// outlive the scope (string literals, or intern_location()).
class ScopedAllocationContext {
 public:
  explicit ScopedAllocationContext(const char* location) noexcept
      : previous_(detail::tls_allocation_context) {
    detail::tls_allocation_context = location;
    if (location != nullptr && !detail::allocation_contexts_used.load(std::memory_order_relaxed))
      detail::allocation_contexts_used.store(true, std::memory_order_relaxed);
  }
  ~ScopedAllocationContext() { detail::tls_allocation_context = previous_; }
  ScopedAllocationContext(const ScopedAllocationContext&) = delete;
  ScopedAllocationContext& operator=(const ScopedAllocationContext&) = delete;

 private:
  const char* previous_;
};

/// Returns a pointer to a process-lifetime copy of `text` (same text, same
/// pointer), for use with ScopedAllocationContext.
const char* intern_location(const std::string& text);

// ---------------------------------------------------------------------------
// Hot path. Kept inline and tiny: a thread-local lookup, a pop or a push, and
// a few owned counters. Everything else is out of line.

// The hot path runs on the thread's own arena, tc->owner (Note [Arenas]).
// Note [Arena dispatch]: for the root's threads that is `this`, and the hot
// path is inlined once for `this` and once for another arena: on the branch
// for `this` (a flag, tc->at_root), the arena's fields (the pointer map, the
// options) are read from a register instead of after the load of tc->owner,
// which the branch predictor resolves ahead. With `tc->owner == this` as the
// test, gcc used the loaded owner on both branches. On the GPU machines'
// CPUs each dependent L1 load costs ~3 ns (bench/RESULTS.md, machine_probe),
// and deallocate's chain was tc -> owner -> map table -> slot -> block.
inline CachingAllocator::Block* CachingAllocator::allocate_block(std::size_t bytes, StreamId stream) {
  detail::ThreadCache* tc = thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return allocate_in(tc, bytes, stream);
    return tc->owner->allocate_in(tc, bytes, stream);
  }
  return allocate_slow(bytes, stream);
}

inline CachingAllocator::Block* CachingAllocator::allocate_in(detail::ThreadCache* tc, std::size_t bytes,
                                                              StreamId stream) {
  // One unsigned compare rejects both 0 and oversized requests.
  if (GENESIS_LIKELY(bytes - 1 < detail::kMaxRequest)) {
    const std::size_t rounded = detail::round_size(bytes);
    tc->active.store(1, std::memory_order_relaxed);
    detail::light_fence(asymmetric_);
    detail::StreamCache* sc = tc->hot_stream_cache();  // Note [Primary stream cache]
    if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0 && sc->stream == stream)) {
      Block* b;
      if (rounded <= detail::kSmallLimit) {
        // The exact size or a near fit (Note [Near fits]) in one search.
        b = sc->pop_small(rounded >> detail::kAlignShift, near_mul_, tc->num_allocs[detail::kSmallPool]);
      } else {
        b = sc->pop_large(rounded);
      }
      if (GENESIS_LIKELY(b != nullptr)) {
        note_alloc_hot(tc, b, bytes);
        tc->active.store(0, std::memory_order_release);
        if (GENESIS_UNLIKELY(recording_.load(std::memory_order_relaxed))) record_event_hot_alloc(tc, b, bytes);
        return b;
      }
    }
    tc->active.store(0, std::memory_order_release);
    return allocate_miss(tc, bytes, rounded, stream);
  }
  return allocate_slow(bytes, stream);
}

inline void CachingAllocator::note_alloc_hot(detail::ThreadCache* tc, Block* b, std::size_t bytes) noexcept {
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  const int p = b->pool;
  const int q = 1 - p;  // the other pool
  b->set_requested(bytes);
  b->set_location(detail::tls_allocation_context);
  b->set_state(detail::BlockState::kAllocated);
  b->set_taker(tc);  // Note [Cross-thread frees]
  // This thread is the only writer of its counters: each is read once and
  // its new value kept for the candidates below (relaxed atomics are not
  // merged by the compiler, so re-reading them cost a load each).
  const std::int64_t cached_p = tc->cached_bytes[p].get() - size;
  const std::int64_t cached_all = cached_p + tc->cached_bytes[q].get();
  const std::int64_t allocs_p = tc->num_allocs[p].get() + 1;
  const std::int64_t req_delta_p = tc->requested_delta[p].get() + static_cast<std::int64_t>(bytes);
  tc->cached_bytes[p].set(cached_p);
  tc->num_allocs[p].set(allocs_p);
  tc->requested_delta[p].set(req_delta_p);
  tc->total_allocated[p].add(size);
  // Peak candidates (Note [Statistics]): what is out of the pool minus what
  // this thread holds cached is an upper bound of the allocated bytes, exact
  // when one thread allocates.
  const std::int64_t cur = out_bytes_total_.load(std::memory_order_relaxed) - cached_all;
  if (cur > tc->peak_candidate[0].get()) tc->peak_candidate[0].set(cur);
  const std::int64_t cur_p = out_bytes_pool_[p].load(std::memory_order_relaxed) - cached_p;
  if (cur_p > tc->peak_candidate[1 + p].get()) tc->peak_candidate[1 + p].set(cur_p);
  // Requested bytes and live allocations: the pool's part plus this thread's
  // (exact for one thread; the slow path and stats() add every thread).
  const std::int64_t req_p = base_requested_[p].load(std::memory_order_relaxed) + req_delta_p;
  const std::int64_t req_q = base_requested_[q].load(std::memory_order_relaxed) + tc->requested_delta[q].get();
  if (req_p + req_q > tc->peak_requested_candidate[0].get()) tc->peak_requested_candidate[0].set(req_p + req_q);
  if (req_p > tc->peak_requested_candidate[1 + p].get()) tc->peak_requested_candidate[1 + p].set(req_p);
  const std::int64_t n_p = base_live_[p].load(std::memory_order_relaxed) + allocs_p - tc->num_frees[p].get();
  const std::int64_t n_q =
      base_live_[q].load(std::memory_order_relaxed) + tc->num_allocs[q].get() - tc->num_frees[q].get();
  if (n_p + n_q > tc->peak_count_candidate[0].get()) tc->peak_count_candidate[0].set(n_p + n_q);
  if (n_p > tc->peak_count_candidate[1 + p].get()) tc->peak_count_candidate[1 + p].set(n_p);
}

inline void CachingAllocator::free_block(Block* b) {
  if (b == nullptr) return;
  detail::ThreadCache* tc = thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return free_block_in(tc, b);  // Note [Arena dispatch]
    return tc->owner->free_block_in(tc, b);
  }
  free_slow(b, false, b->ptr());
}

inline void CachingAllocator::free_block_in(detail::ThreadCache* tc, Block* b) {
  tc->active.store(1, std::memory_order_relaxed);
  detail::light_fence(asymmetric_);
  // A block of another arena goes back to its own pool (slow path).
  if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0 && b->arena == arena_index_)) {
    if (GENESIS_LIKELY(hot_free_path(tc, b) == nullptr)) {
      tc->active.store(0, std::memory_order_release);
      return;
    }
  }
  tc->active.store(0, std::memory_order_release);
  free_slow(b, false, b->ptr());
}

inline void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  detail::ThreadCache* tc = thread_cache();
  if (GENESIS_LIKELY(tc != nullptr)) {
    if (GENESIS_LIKELY(tc->at_root)) return deallocate_in(tc, ptr);  // Note [Arena dispatch]
    return tc->owner->deallocate_in(tc, ptr);
  }
  free_slow(nullptr, true, ptr);
}

inline void CachingAllocator::deallocate_in(detail::ThreadCache* tc, void* ptr) {
  Block* b = nullptr;
  tc->active.store(1, std::memory_order_relaxed);
  detail::light_fence(asymmetric_);
  if (GENESIS_LIKELY(tc->reclaim.load(std::memory_order_acquire) == 0)) {
    // This arena's map only: a pointer of another arena is not in it and
    // goes to the slow path, which asks the others (Note [Arenas]).
    b = map_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (GENESIS_LIKELY(b != nullptr && hot_free_path(tc, b) == nullptr)) {
      tc->active.store(0, std::memory_order_release);
      return;
    }
  }
  tc->active.store(0, std::memory_order_release);
  // The block found here (if any) saves the slow path a second lookup; it
  // checks under the lock that the record still describes ptr.
  free_slow(b, b == nullptr, ptr);
}

// Returns nullptr when the block went into the thread cache, else the block
// (the caller takes the slow path, which also reports misuse).
//
// Note [Cross-thread frees]: a thread cache takes back only the blocks it
// handed out. A block freed by another thread goes to the pool (the slow
// path), where every thread can reuse it and where its bytes leave the
// statistics at once. The common case is a training loop: the forward pass
// allocates activations on the program's thread and the backward pass, run
// by the autograd engine on a thread of its own, frees them. Parked in the
// freeing thread's cache, they were invisible to the thread that allocates
// next, which grew the pool instead (a persistent second thread freeing
// what the first allocated: 1.26x the live bytes reserved where one thread
// or no cache reserves 1.00x), and every thread's peak candidate counted the
// other's cached blocks as allocated. Taken by the same thread, a block
// round-trips through the cache as before: the taker is one store on the
// allocation (into a field that is unused while the block is allocated)
// and one compare on the free.
inline CachingAllocator::Block* CachingAllocator::hot_free_path(detail::ThreadCache* tc, Block* b) noexcept {
  if (GENESIS_UNLIKELY(b->load_state() != detail::BlockState::kAllocated || b->stream_uses != nullptr ||
                       !b->taken_by(tc)))
    return b;
  detail::StreamCache* sc = tc->hot_stream_cache();  // Note [Primary stream cache]
  if (GENESIS_UNLIKELY(sc->stream != b->stream)) return b;
  const std::int64_t size = static_cast<std::int64_t>(b->size);
  if (GENESIS_UNLIKELY(tc->cached_total() + size > static_cast<std::int64_t>(thread_cache_limit()))) return b;
  // At most thread_cache_large_park large blocks wait in a cache at any time
  // (Note [Parked large blocks]); the rest go to the pool, where they merge
  // with their neighbours and serve every thread.
  if (GENESIS_UNLIKELY(b->size > detail::kSmallLimit && sc->large_blocks >= large_park_)) return b;
  detail::BlockList* list = sc->list_for_push(b->size);
  if (GENESIS_UNLIKELY(list == nullptr ||
                       list->count >= (b->size <= detail::kSmallLimit ? options_.thread_cache_small_count
                                                                      : options_.thread_cache_large_count)))
    return b;
  if (GENESIS_UNLIKELY(recording_.load(std::memory_order_relaxed))) record_event_hot_free(tc, b);
  const int p = b->pool;
  b->set_state(detail::BlockState::kThreadCached);
  b->cache_next = list->head;
  list->head = b;
  ++list->count;
  sc->large_blocks += b->size > detail::kSmallLimit ? 1u : 0u;
  tc->cached_bytes[p].add(size);
  tc->num_frees[p].add(1);
  tc->requested_delta[p].add(-static_cast<std::int64_t>(b->get_requested()));
  return nullptr;
}

// ---------------------------------------------------------------------------
// Small slow-path helpers, inline for the same reason as FreeIndex::insert
// and erase: the pool makes several of these per request.

inline CachingAllocator::Block* CachingAllocator::find_free_block(detail::PoolId pool, std::size_t rounded,
                                                                  StreamId stream) {
  return free_[pool].find(stream, rounded);
}

// Inline: once warm most slow-path allocations on an expandable segment end
// at this check (GPT-2 replay: 32k of 42k calls), and as a call
// the out-of-line function's register saves cost more than the check.
inline bool CachingAllocator::ensure_mapped(Block* b, std::size_t bytes) {
  const detail::Segment* seg = b->segment;
  if (chunk_pages_ > 1 && straddles_chunk(b)) split_chunks(b);
  if (page_ceil(b->addr + b->size - seg->addr) <= seg->mapped_limit && seg->holes == 0) return false;
  return map_block_pages(b, bytes);
}

// Inline: ensure_mapped asks on every pool allocation from an expandable
// segment, and almost always no chunk straddles (Note [Physical chunks]).
inline bool CachingAllocator::straddles_chunk(const Block* b) const noexcept {
  const detail::Segment* seg = b->segment;
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

// Inline: the slow path's peak notes (caching_allocator.cpp) call it on every
// slow-path call.
inline void CachingAllocator::store_hot_bases(detail::PoolId p) {
  base_requested_[p].store(counters_.requested[p] + retired_requested_[p], std::memory_order_relaxed);
  base_live_[p].store(counters_.num_allocs[p] + retired_allocs_[p] - counters_.num_frees[p] - retired_frees_[p],
                      std::memory_order_relaxed);
}

inline CachingAllocator::Block* CachingAllocator::new_block() {
  Block* b = free_blocks_;
  if (GENESIS_UNLIKELY(b == nullptr)) return new_block_chunk();
  free_blocks_ = b->cache_next;
  b->cache_next = nullptr;
  return b;
}

inline void CachingAllocator::delete_block(Block* b) {
  // Blocks are recycled, never returned to the system while the allocator
  // lives: a racing stale lookup (PointerMap) always reads a valid record.
  delete b->stream_uses;
  b->stream_uses = nullptr;
  b->addr = 0;
  b->size = 0;
  b->set_requested(0);
  b->segment = nullptr;
  b->prev = b->next = nullptr;
  b->pending_events = 0;
  b->set_location(nullptr);
  b->split_counted = false;
  b->set_state(detail::BlockState::kDead);
  b->cache_next = free_blocks_;
  free_blocks_ = b;
}

// Both keep the inactive-split statistics without a branch on whether the
// block is split, which over classic segments in `mixed` is a coin toss: the
// counters move by the flag times the size. With allocate_miss's one-branch
// flush test, this took `mixed` from 2.74 to 2.41 mispredicts per pair in
// callgrind's branch model for 4 more instructions (alloc_icount mixed
// 200000, 2026-11-26), and the GPT-2 replay from 3.57 to 3.10 per event
// (classic) and 3.24 to 3.06 (expandable). Expandable segments keep their
// branch, which a program predicts (with expandable segments on, every
// segment is one).
inline void CachingAllocator::index_insert(Block* b, void* like) {
  b->set_state(detail::BlockState::kFree);
  free_[b->pool].insert_like(b, like);
  if (b->segment->expandable) return;  // not counted: their free pages are releasable
  const bool counted = b->is_split();
  b->split_counted = counted;
  counters_.inactive_split_bytes[b->pool] += static_cast<std::int64_t>(b->size) * counted;
  counters_.inactive_split_count[b->pool] += counted;
}

inline void* CachingAllocator::index_erase(Block* b) {
  void* owner = free_[b->pool].erase(b);
  const bool counted = b->split_counted;
  b->split_counted = false;
  counters_.inactive_split_bytes[b->pool] -= static_cast<std::int64_t>(b->size) * counted;
  counters_.inactive_split_count[b->pool] -= counted;
  return owner;
}

}  // namespace genesis::memory
