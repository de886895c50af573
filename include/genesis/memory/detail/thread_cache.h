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

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis::memory::detail {

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
  static constexpr std::size_t kMaskWords = (kNumSmallBins + 63) / 64;
  std::array<std::uint64_t, kMaskWords> small_mask{};
  std::uint64_t large_mask = 0;
  // Blocks in the large lists (Note [Parked large blocks]): pushes add,
  // pop_large and flushes take away.
  std::uint32_t large_blocks = 0;

  static std::size_t large_hash(std::size_t size) noexcept {
    return static_cast<std::size_t>(((size >> kAlignShift) * 0x9E3779B97F4A7C15ull) >> 58);  // 64 slots
  }

  /// Pops a block of exactly `rounded` bytes, or null.
  Block* pop(std::size_t rounded) noexcept {
    if (rounded <= kSmallLimit) {
      const std::size_t i = rounded >> kAlignShift;
      return pop_small(i, i);
    }
    return pop_large(rounded);
  }

  /// Pops a block of the small bins first..last (inclusive; bin i holds
  /// blocks of i * 512 bytes): the smallest non-empty one, or null. With
  /// first == last an exact pop; with last > first the exact size or its
  /// near fits in one search (Note [Near fits]). Owner thread only.
  /// Inline: the hot path of every small allocation. It replaced an exact
  /// pop followed, on a miss (about half of `mixed`'s small requests), by an
  /// out-of-line near-fit search that divided by N (bench/RESULTS.md,
  /// 2026-11-25: with parked large blocks, -4.8% instructions per `mixed` pair).
  Block* pop_small(std::size_t first, std::size_t last) noexcept {
    // The exact size first, from its bit in the mask (exact, see above):
    // the usual hit of a program that repeats its sizes, and of the hot
    // pair. Going through the near-fit search for it cost the 64 KiB hot
    // pair 21 more instructions than the 512 B one (bench/alloc_icount.sh,
    // 2026-11-26); an exact miss now reads no list head either.
    std::size_t w = first >> 6;
    const std::uint64_t word = small_mask[w];
    std::size_t i = first;
    if (((word >> (first & 63)) & 1) == 0) {
      if (first == last) return nullptr;
      const std::size_t last_w = last >> 6;
      std::uint64_t bits = word & (~std::uint64_t{0} << (first & 63));
      while (w != last_w && bits == 0) bits = small_mask[++w];
      if (w == last_w) bits &= ~std::uint64_t{0} >> (63 - (last & 63));
      if (bits == 0) return nullptr;
      i = (w << 6) + static_cast<std::size_t>(std::countr_zero(bits));
    }
    BlockList& list = small[i];
    Block* b = list.head;
    list.head = b->cache_next;
    if (--list.count == 0) small_mask[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
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
  ThreadCache(std::uint32_t thread_number, CachingAllocator* owner);

  // Handshake flags: see Note [Thread cache handshake].
  std::atomic<std::uint32_t> active{0};
  std::atomic<std::uint32_t> reclaim{0};
  // The arena this thread allocates from (Note [Arenas]): the hot path runs
  // on it. Set once; on the same cache line as the flags above.
  CachingAllocator* const owner;

  StreamCache* current = nullptr;  // most recently used stream; never null in a cache of blocks
  // Note [Primary stream cache]: current == &primary, kept as a flag on this
  // line. The hot path branches on it and then addresses `primary` from tc
  // itself, so its loads of the bins do not wait for the load of `current`
  // (one dependent load less, ~3 ns on the GPU machines' CPUs). Set with
  // set_current() only.
  bool on_primary = true;
  // owner is the root allocator, whose slot in tls_slots found this cache
  // (Note [Arena dispatch]): a flag, not a pointer compare, so that the
  // compiler cannot swap `this` back for the loaded owner.
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
  OwnedCounter peak_candidate[3];           // allocated bytes: aggregate, small, large
  OwnedCounter peak_requested_candidate[3]; // requested bytes
  OwnedCounter peak_count_candidate[3];     // live allocations

  std::uint32_t thread_number;
  // Created under the allocator mutex when recording starts; read by the owner
  // on the hot path, hence atomic. Owned by ring_owner.
  std::atomic<EventRing*> ring{nullptr};
  std::unique_ptr<EventRing> ring_owner;

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

}  // namespace genesis::memory::detail
