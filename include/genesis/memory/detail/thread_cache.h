// Per-thread block caches: the allocator's hot path.
//
// A thread cache keeps freed blocks of exact rounded sizes, per stream, so
// that a repeated allocation of a size the thread freed before is a pop from a
// list: no lock, no atomic read-modify-write, no search. Blocks in a thread
// cache stay "out of the pool" (state kThreadCached); the allocator takes
// them back under Note [Thread cache handshake] whenever the pool needs them
// (before growing, on out of memory, empty_cache, garbage collection).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "genesis/core/error.h"
#include "genesis/memory/detail/block.h"
#include "genesis/memory/events.h"

namespace genesis::memory::detail {

class Arena;

inline constexpr std::size_t kAlignment = 512;
inline constexpr int kAlignShift = 9;
inline constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  // requests <= 1 MiB: small pool
inline constexpr std::size_t kNumSmallBins = (kSmallLimit >> kAlignShift) + 1;
inline constexpr int kLargeSlots = 64;        // power of two
inline constexpr int kLargeProbe = 4;         // slots examined per large size
inline constexpr int kStreamsPerThread = 4;   // streams a thread cache tracks at once

/// Rounds a request to the allocator's granularity. `bytes` must be > 0 and
/// <= kMaxRequest (checked by callers).
inline constexpr std::size_t round_size(std::size_t bytes) noexcept {
  return (bytes + (kAlignment - 1)) & ~(kAlignment - 1);
}
inline constexpr std::size_t kMaxRequest = std::size_t{1} << 62;

/// A counter written by one thread at a time and read by others: a relaxed
/// load plus a relaxed store compiles to plain moves, not a locked add.
struct OwnedCounter {
  std::atomic<std::int64_t> v{0};
  void add(std::int64_t d) noexcept { v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
  std::int64_t get() const noexcept { return v.load(std::memory_order_relaxed); }
  void set(std::int64_t x) noexcept { v.store(x, std::memory_order_relaxed); }
};

struct BlockList {
  Block* head = nullptr;
  std::uint32_t count = 0;
};

struct LargeSlot {
  std::size_t size = 0;
  BlockList list;
};

/// The cached blocks of one stream.
// Cache-line aligned: its masks are written on every push and must not share
// a line with another thread's cache allocated next to it.
struct alignas(64) StreamCache {
  StreamId stream = 0;
  std::array<BlockList, kNumSmallBins> small{};
  std::array<LargeSlot, kLargeSlots> large{};
  // Marks of the lists that hold blocks, so that flushing and near fits
  // visit only those. small_mask is exact:
  //   bit i of small_mask set  <=>  small[i].count != 0
  // (set on push, cleared by the pop that empties a list and by the flush):
  // lazily cleared marks made a near-fit search load the (cold) heads of
  // every size popped empty since the last flush, ~10% of `mixed`.
  // large_mask is lazily cleared (only the flush reads it).
  // small_words summarises the mask, loosely:
  //   small_mask[w] != 0  =>  bit w of small_words set
  // (set on push; a word popped empty keeps its bit until a search meets
  // it), so that a near-fit search finds the next non-empty word with one
  // bit scan instead of a loop (near_fit), and the exact-hit pop does not
  // pay for it.
  static constexpr std::size_t kMaskWords = (kNumSmallBins + 63) / 64;
  static_assert(kMaskWords < 64, "small_words summarises the mask in one word");
  std::array<std::uint64_t, kMaskWords> small_mask{};
  std::uint64_t small_words = 0;
  static constexpr std::uint64_t kNoWord = std::uint64_t{1} << 63;
  std::uint64_t large_mask = 0;
  // Blocks in the large lists (Note [Parked large blocks]): pushes add,
  // pop_large and flushes take away.
  std::uint32_t large_blocks = 0;
  // Note [Adaptive near-fit search]: which search pop_small runs, and its
  // bookkeeping, on a clock the caller passes (the thread's count of small
  // thread-cache allocations): mode_events counts exact misses in exact
  // mode, exact hits in branch-free mode, since mode_window_start.
  bool exact_mode = true;
  std::uint32_t mode_events = 0;
  std::int64_t mode_window_start = 0;
  static constexpr std::int64_t kModeWindow = 64;      // allocations per decision
  static constexpr std::uint32_t kModeMisses = 16;     // exact misses in a window: branch-free mode
  static constexpr std::uint32_t kModeExactHits = 56;  // exact hits in a window: exact mode again

  static std::size_t large_hash(std::size_t size) noexcept {
    return static_cast<std::size_t>(((size >> kAlignShift) * 0x9E3779B97F4A7C15ull) >> 58);  // 64 slots
  }

  /// Pops a block of exactly `rounded` bytes, or null. `clock`: as for
  /// pop_small.
  Block* pop(std::size_t rounded, const OwnedCounter& clock) noexcept {
    if (rounded <= kSmallLimit) return pop_small(rounded >> kAlignShift, 0, clock);
    return pop_large(rounded);
  }

  /// Pops a block of the small bins first..last (bin i holds blocks of
  /// i * 512 bytes; last = first + first * near_mul / 2^32, at most the last
  /// bin): the smallest non-empty one, or null. With near_mul 0 an exact
  /// pop, else the exact size or its near fits (Note [Near fits]) in one
  /// search, run as Note [Adaptive near-fit search] says; `clock` is the
  /// thread's count of small allocations from its cache (read only off the
  /// exact-hit path). Owner thread only. Inline: the hot path of every small
  /// allocation.
  Block* pop_small(std::size_t first, std::uint64_t near_mul, const OwnedCounter& clock) noexcept {
    const std::size_t w = first >> 6;
    const std::uint64_t word0 = small_mask[w];
    if (GENESIS_LIKELY(exact_mode)) {
      if (GENESIS_LIKELY((word0 >> (first & 63)) & 1)) return take_small<false>(first, w);
      if (++mode_events == kModeMisses) judge_exact_mode(clock.get());
      if (near_mul == 0) return nullptr;
    }
    const std::size_t last = std::min(first + ((first * near_mul) >> 32), kNumSmallBins - 1);
    const std::size_t i = near_fit(first, w, word0);
    if (i > last) return nullptr;
    if (!exact_mode) {
      mode_events += i == first ? 1u : 0u;
      const std::int64_t now = clock.get();
      if (GENESIS_UNLIKELY(now - mode_window_start >= kModeWindow)) judge_branch_free_mode(now);
    }
    return take_small<true>(i, i >> 6);
  }

  // Note [Adaptive near-fit search]: a program that repeats its sizes finds
  // the exact size cached on almost every small allocation; one whose sizes
  // vary (`mixed`, activations of varying sequence length) finds it on a
  // fraction, close to random, and otherwise a near fit in the same mask
  // word, in a later one, or none. A branch on each of those outcomes is
  // mispredicted about half the time in the second kind of program
  // (callgrind's branch simulation of `mixed`: 0.84 of 4.6 mispredicts per
  // pair were the search's exact test and word loop), and a mispredict costs
  // ~10 ns on the GPU machines' CPUs. A search without branches (near_fit)
  // avoids them, but makes the list head's load wait for the mask's, which a
  // predicted exact-hit branch lets the CPU skip: always branch-free, the
  // hot pair cost 3 ns more and `mixed` 8 ns less (H200 machine, min of 10
  // alternating rounds, 2026-11-26). So each stream cache picks its search
  // from what it sees: exact mode (a predicted branch on the exact size's
  // bit) until 16 of 64 small pops miss the exact size, then branch-free
  // mode until 56 of 64 hit it. Exact mode counts only its misses; the
  // branch-free mode adds its exact hits without a branch.
  void judge_exact_mode(std::int64_t now) noexcept {
    if (now - mode_window_start <= kModeWindow) exact_mode = false;
    mode_events = 0;
    mode_window_start = now;
  }
  void judge_branch_free_mode(std::int64_t now) noexcept {
    if (mode_events >= kModeExactHits) exact_mode = true;
    mode_events = 0;
    mode_window_start = now;
  }

  /// The smallest non-empty bin at or above `first` (whose mask word w is
  /// word0), or a bin past kNumSmallBins when there is none; no branches
  /// but a rare one (Note [Adaptive near-fit search]). The word holding
  /// `first` first: the exact size and its nearest near fits; else the next
  /// non-empty word, from the summary. Bit 63 (never a word: kMaskWords <
  /// 64) keeps both scans off zero, for which a generic x86-64 build
  /// branches around bsf; with nothing cached above `first` the summary's
  /// scan gives word 63, a bin far past any `last`. A summary bit of a word
  /// popped empty is cleared here, when a search meets it.
  std::size_t near_fit(std::size_t first, std::size_t w, std::uint64_t word0) noexcept {
    const std::uint64_t here = word0 & (~std::uint64_t{0} << (first & 63));
    const std::uint64_t after_w = ~std::uint64_t{1} << w;
    std::size_t later_w;
    std::uint64_t later_word;
    for (;;) {
      later_w = static_cast<std::size_t>(std::countr_zero((small_words & after_w) | kNoWord));
      later_word = small_mask[std::min(later_w, kMaskWords - 1)];
      if (GENESIS_LIKELY(later_word != 0 || later_w >= kMaskWords || here != 0)) break;
      small_words &= ~(std::uint64_t{1} << later_w);  // a stale mark
    }
    // Selects written as masks: gcc turned the ?: forms into branches.
    const std::uint64_t in_here = std::uint64_t{0} - std::uint64_t{here != 0};
    const std::size_t cw = (w & in_here) | (later_w & ~in_here);
    const std::uint64_t word = here | (later_word & ~in_here) | kNoWord;
    return (cw << 6) + static_cast<std::size_t>(std::countr_zero(word));
  }

  /// Pops the head of small[i] (not empty; w = i / 64) and keeps the mask
  /// exact: with a branch on the list emptying in exact mode, where it is
  /// predictable (the hot pair empties its list every time), without one
  /// after a near-fit search (in `mixed` lists empty at random).
  template <bool kBranchFree>
  Block* take_small(std::size_t i, std::size_t w) noexcept {
    BlockList& list = small[i];
    Block* b = list.head;
    list.head = b->cache_next;
    if constexpr (kBranchFree) {
      small_mask[w] &= ~(std::uint64_t{--list.count == 0} << (i & 63));
    } else if (--list.count == 0) {
      small_mask[w] &= ~(std::uint64_t{1} << (i & 63));
    }
    return b;
  }

  /// Pops a block of exactly `rounded` (> kSmallLimit) bytes, or null.
  Block* pop_large(std::size_t rounded) noexcept {
    BlockList* list = find_large(rounded);
    if (list == nullptr) return nullptr;
    Block* b = list->head;
    if (b != nullptr) {
      list->head = b->cache_next;
      --list->count;
      --large_blocks;
    }
    return b;
  }

  BlockList* find_large(std::size_t rounded) noexcept {
    std::size_t i = large_hash(rounded);
    for (int p = 0; p < kLargeProbe; ++p, i = (i + 1) & (kLargeSlots - 1)) {
      if (large[i].size == rounded) return &large[i].list;
    }
    return nullptr;
  }

  /// The list that should take a block of `rounded` bytes, or null when the
  /// probe window is full of other sizes that still hold blocks.
  BlockList* list_for_push(std::size_t rounded) noexcept {
    if (rounded <= kSmallLimit) {
      const std::size_t i = rounded >> kAlignShift;
      small_mask[i >> 6] |= std::uint64_t{1} << (i & 63);
      small_words |= std::uint64_t{1} << (i >> 6);
      return &small[i];
    }
    std::size_t i = large_hash(rounded);
    std::size_t empty = kLargeSlots;
    for (int p = 0; p < kLargeProbe; ++p, i = (i + 1) & (kLargeSlots - 1)) {
      if (large[i].size == rounded) {
        large_mask |= std::uint64_t{1} << i;
        return &large[i].list;
      }
      if (empty == kLargeSlots && large[i].list.count == 0) empty = i;
    }
    if (empty == kLargeSlots) return nullptr;
    large[empty].size = rounded;
    large_mask |= std::uint64_t{1} << empty;
    return &large[empty].list;
  }
};

// Cache-line aligned so that two threads' caches (written on every hot-path
// call) never share a line.
class alignas(64) ThreadCache {
 public:
  /// `owner`: the arena whose blocks this cache holds (Note [Arenas]).
  ThreadCache(std::uint32_t thread_number, Arena* owner);

  // Handshake flags: see Note [Thread cache handshake].
  std::atomic<std::uint32_t> active{0};
  std::atomic<std::uint32_t> reclaim{0};
  // The arena this thread allocates from (Note [Arenas]): the hot path runs
  // on it. Set once; on the same cache line as the flags above.
  Arena* const owner;

  StreamCache* current = nullptr;  // most recently used stream; never null in a cache of blocks
  // Note [Primary stream cache]: current == &primary, kept as a flag on this
  // line. The hot path branches on it and then addresses `primary` from tc
  // itself, so its loads of the bins do not wait for the load of `current`
  // (one dependent load less, ~3 ns on the GPU machines' CPUs). Set with
  // set_current() only.
  bool on_primary = true;
  // owner is the allocator's own arena 0 (Note [Arena dispatch]): a flag,
  // not a pointer compare, so that the compiler cannot swap the allocator's
  // arena back for the loaded owner.
  bool at_root = false;
  std::array<StreamCache*, kStreamsPerThread> streams{};  // [0] is &primary; the others in `extra`
  std::array<std::unique_ptr<StreamCache>, kStreamsPerThread - 1> extra;

  // Statistics owned by this thread (Note [Statistics]).
  // Allocations served from this cache are all cache hits, so num_allocs
  // doubles as the hit count. All counters are cumulative (never reset).
  // Bytes of kThreadCached blocks here, per pool. Their sum is the total and
  // says whether any block is cached (blocks are never empty): no separate
  // total or block count, which the hot path would update on every call.
  OwnedCounter cached_bytes[kNumPools];
  OwnedCounter num_allocs[kNumPools];
  OwnedCounter num_frees[kNumPools];
  OwnedCounter requested_delta[kNumPools];
  OwnedCounter total_allocated[kNumPools];  // bytes handed out from this cache
  OwnedCounter total_requested[kNumPools];  // requested bytes of those allocations
  OwnedCounter peak_candidate[3];           // allocated bytes: aggregate, small, large
  OwnedCounter peak_requested_candidate[3]; // requested bytes
  OwnedCounter peak_count_candidate[3];     // live allocations

  std::uint32_t thread_number;
  // Created under the allocator mutex when recording starts; read by the owner
  // on the hot path, hence atomic. Owned by ring_owner.
  std::atomic<EventRing*> ring{nullptr};
  std::unique_ptr<EventRing> ring_owner;
  // Frees added to num_frees when the slow path folded this thread's live
  // count into the arena's (Note [Folding the threads' counters]); written
  // and read under the arena's mutex only. True frees = num_frees - this.
  std::int64_t frees_folded[kNumPools] = {};
  // Note [Threads that contend move out]: this thread's slow-path lock
  // acquisitions in the current window, how many of them waited for another
  // thread, and whether it is to move to an arena of its own at its next
  // miss. Written and read under the owner arena's mutex by this thread.
  std::uint32_t slow_locks = 0;
  std::uint32_t slow_locks_waited = 0;
  bool move_out = false;

  std::int64_t cached_total() const noexcept { return cached_bytes[0].get() + cached_bytes[1].get(); }

  void set_current(StreamCache* sc) noexcept {
    current = sc;
    on_primary = sc == &primary;
  }
  /// The cache the hot path works on (Note [Primary stream cache]); inline
  /// in both branches.
  [[gnu::always_inline]] StreamCache* hot_stream_cache() noexcept {
    if (GENESIS_LIKELY(on_primary)) return &primary;
    return current;
  }

  /// The cache of `stream`, creating or recycling one. Returns null when all
  /// slots hold blocks of other streams.
  StreamCache* cache_for(StreamId stream);

  // Last: 34 KiB, and the hot path's first line above stays compact.
  StreamCache primary;
};

/// Where a thread finds its caches: one slot per live allocator, indexed by
/// the allocator's slot number and valid only while the generation matches.
struct TlsSlot {
  std::uint64_t generation = 0;
  ThreadCache* cache = nullptr;
};
inline constexpr int kMaxAllocatorSlots = 64;

// Inline variables with constant initialisation: every translation unit sees
// the definition, so access compiles to one %fs-relative load (no TLS wrapper
// call, no init guard).
inline thread_local TlsSlot tls_slots[kMaxAllocatorSlots] = {};

/// The allocation context of the calling thread (ScopedAllocationContext).
inline thread_local const char* tls_allocation_context = nullptr;

/// True once any thread set an allocation context: the publisher (Note
/// [Published figures] in publish.h) groups allocations by site only then.
/// Written once (ScopedAllocationContext reads it first), so threads that
/// set contexts do not contend for its cache line.
inline std::atomic<bool> allocation_contexts_used{false};

}  // namespace genesis::memory::detail
