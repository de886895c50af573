// Options of the caching allocator (CachingAllocator), and what each one
// trades.
#pragma once

#include <cstddef>
#include <cstdint>

namespace genesis::memory {

/// On, off, or auto: resolved by the allocator against its upstream. It
/// converts from bool, so `options.thread_cache = false` still reads as a
/// plain switch.
struct AutoSwitch {
  enum class State : std::uint8_t { kAuto, kOn, kOff };
  State state = State::kAuto;
  constexpr AutoSwitch() noexcept = default;
  constexpr AutoSwitch(bool on) noexcept : state(on ? State::kOn : State::kOff) {}  // NOLINT: implicit on purpose
  static constexpr AutoSwitch automatic() noexcept { return AutoSwitch{}; }
  constexpr bool is_auto() const noexcept { return state == State::kAuto; }
  /// On or off as asked; auto gives `when_auto`.
  constexpr bool resolve(bool when_auto) const noexcept { return state == State::kAuto ? when_auto : state == State::kOn; }
  friend constexpr bool operator==(AutoSwitch, AutoSwitch) noexcept = default;
};

/// Tunables. Defaults follow what works for training workloads.
struct AllocatorOptions {
  /// Cap on reserved memory as a fraction of the upstream's total.
  double memory_fraction = 1.0;
  /// Cap on cached (reserved - allocated) bytes; SIZE_MAX = none.
  std::size_t cache_size_limit = SIZE_MAX;
  /// Per-thread caches on the hot path. Off: every call takes the mutex.
  /// Auto: on, except over expandable segments where mapping pages is
  /// expensive (CUDA), where blocks held by one thread made a training
  /// loop's layout depend on its threads' timing, so that every step mapped
  /// and unmapped pages again (Note [Thread caches over costly mappings]).
  AutoSwitch thread_cache;
  /// Bytes one thread's cache may hold; 0 = min(2 GiB, total / 32).
  std::size_t thread_cache_bytes = 0;
  /// Blocks one thread cache keeps per small size / per large size. A
  /// training step frees many tensors of one small size together and asks
  /// for them again the next step: at 32 per size, 1494 frees of each GPT-2
  /// replay found their list full and went to the pool, and as many later
  /// allocations split them off again. 128 runs the replay in fewer
  /// instructions with the same reserved memory, `mixed` and `mixed_set`
  /// unchanged (see bench/RESULTS.md).
  std::uint32_t thread_cache_small_count = 128;
  std::uint32_t thread_cache_large_count = 4;
  /// Large blocks one thread may keep parked in its cache (per stream)
  /// across large-pool searches before they return to the pool (Note
  /// [Parked large blocks]); 0: every large-pool search returns them first.
  std::uint32_t thread_cache_large_park = 1;
  /// Expandable segments: before the pool maps pages past its high-water
  /// mark, every thread cache goes back to it, so that parked blocks never
  /// add to the peak (Note [New peaks empty the thread caches]). Off: the
  /// caches refill less often (about a third fewer nanoseconds per event on
  /// the recorded corpus) and the peak may include what they hold (up to
  /// 1.14x the live bytes there instead of 1.02x).
  bool thread_cache_flush_at_peak = true;
  /// Before a pool grows, or maps pages past its mark, a free block of
  /// another stream may be lent to the stream that asks; that stream then
  /// waits, on the device, for the work queued so far on the block's own
  /// stream (Note [Borrowing across streams]). Off: each stream keeps its
  /// own peak (a program whose streams peak at different moments reserves
  /// more) but no stream ever waits for another's work.
  bool stream_borrow = true;
  /// Near fits (Note [Near fits]): when a thread cache has no block of the
  /// requested small size, it hands out its smallest block that is at most
  /// 1/N larger (N = this value; 0: exact sizes only). Classic segments
  /// only: ignored with expandable segments.
  std::uint32_t thread_cache_near_fit = 4;
  /// Expandable segments (Note [Expandable segments]): one large
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
  /// mappings, a little more memory. kAutoStrandPages (the default): where
  /// mapping is expensive (CUDA), one page or 0.3% of the highest allocated
  /// bytes so far, whichever is more (Note [Stranded pages]); where it is
  /// cheap, 0.
  static constexpr std::uint32_t kAutoStrandPages = 0xffffffffu;
  std::uint32_t chunk_strand_pages = kAutoStrandPages;
  /// Expandable segments: how far above the peak of allocated bytes, as a
  /// fraction of it, reserved memory may settle in a loop that would
  /// otherwise unmap pages at its high-water mark every step and map them
  /// again the next (Note [A loop that cycles at the mark]). The room grows
  /// only by what such releases gave back, up to this fraction (or a page
  /// per expandable segment, whichever is more; 0 keeps none). Negative
  /// (auto): 0.015 where mapping is expensive (CUDA), 0 where it is cheap.
  double release_slack = -1.0;
  /// Classic segments: before the pool takes a new segment that would raise
  /// reserved memory above its high-water mark (or above the highest
  /// allocated bytes, if that is higher), wholly free segments go back to
  /// the upstream first, the largest first, as many as the excess (Note
  /// [Classic segments at the mark]). Reserved memory then follows what
  /// the program holds instead of what it has ever held in each size, at
  /// the price of a driver free and a later allocation for each segment
  /// given back (on CUDA cudaFree, which waits for the device). Off by
  /// default; expandable segments, which give pages back at their mark
  /// anyway, ignore it.
  bool classic_release_at_mark = false;
  /// Arenas (Note [Arenas]): independent pools, each with its own lock,
  /// free lists and segments; threads are spread over them in the order they
  /// first allocate, so threads that miss their caches at the same time do
  /// not serialise on one lock and one set of pool data. 0 (auto): for host
  /// and pinned memory one arena per hardware thread (at most kMaxArenas);
  /// for device memory a single pool that threads leave, each for an arena
  /// of its own, only when they keep waiting for one another's slow paths
  /// (arena_move_window; Note [Threads that contend move out]). 1: a single
  /// pool. N > 1: N arenas, threads dealt round-robin. The first thread (and
  /// any single-threaded program) uses arena 0 only: an arena is created
  /// when a thread is first assigned to it.
  std::uint32_t arenas = 0;
  /// Device memory with arenas auto: a thread whose lock of the shared pool
  /// waited for another thread in at least a quarter of its last N slow-path
  /// allocations moves to an arena of its own (Note [Threads that contend
  /// move out]). 0: threads never move. Ignored with arenas set explicitly.
  std::uint32_t arena_move_window = 256;
  /// Milliseconds without an allocation or a free after which the cached memory goes
  /// back to the upstream as collect_garbage() gives it (Note [Releasing
  /// when idle]); 0: only when asked (empty_cache, collect_garbage, compact).
  std::uint32_t idle_release_ms = 0;
  /// Never give a segment back to the upstream while the allocator lives:
  /// not on out of memory, not for empty_cache, collect_garbage or caps.
  /// What a CUDA graph's private pool needs: the graphs captured into it
  /// replay into blocks that are free between replays (temporaries of the
  /// capture), so a wholly free segment may still be written by a replay.
  bool keep_segments = false;
  /// Record every alloc/free into the event history (Note [Event history]).
  bool record_events = false;
  std::size_t event_capacity_per_thread = std::size_t{1} << 16;
};

/// The ranges of the options that have one: what GENESIS_ALLOC_CONF's parser
/// accepts (alloc_conf.h) and what validate_options() checks, so that options
/// set in C++ are held to the rules of options written as text.
namespace option_limits {
/// thread_cache_small_count and _large_count (from 1), thread_cache_large_park,
/// chunk_pages, chunk_strand_pages (or kAutoStrandPages), arena_move_window.
inline constexpr std::uint32_t kMaxCount = 1u << 20;
inline constexpr std::uint32_t kMaxNearFit = 1024;        // thread_cache_near_fit
inline constexpr double kMaxReleaseSlack = 0.1;           // release_slack (negative: auto)
inline constexpr std::uint32_t kMaxArenas = 8;            // arenas (0: auto)
inline constexpr std::uint32_t kMaxIdleReleaseMs = 86'400'000;  // idle_release_ms: a day (0: off)
inline constexpr std::size_t kMaxEventCapacity = std::size_t{1} << 28;  // event_capacity_per_thread (from 1)
}  // namespace option_limits

/// Throws InvalidArgumentError when an option lies outside its range
/// (memory_fraction in (0, 1], option_limits, the enums' values), naming the
/// option, its value and what is allowed. Every CachingAllocator checks its
/// options with it when it is made.
void validate_options(const AllocatorOptions& options);

}  // namespace genesis::memory
