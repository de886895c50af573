// Allocation traces: reading and writing the CSV trace format.
//
// Format (data/traces/README.md): a header `time_us,action,addr,size,stream`
// and one line per event. `action` is one of the names event_action_name()
// gives the allocator's own history ("alloc", "free_requested",
// "segment_alloc", "segment_free", "oom") plus PyTorch's "free_completed"
// (and "segment_map", "segment_unmap", "snapshot" of traces recorded with
// PyTorch's expandable segments), and "empty_cache" (Note [Released
// caches]). Files may be gzip-compressed; the reader detects that from the
// magic bytes, not from the name.
//
// Note [Released caches]: a program that calls torch.cuda.empty_cache()
// (between epochs, before an eval pass) gives its allocator's cached memory
// back, and the peaks PyTorch reports for that run are lower for it. A
// replay that kept everything cached would compare Genesis at a disadvantage
// it does not have in the real program. PyTorch's history shows such a
// release only as a run of segment_free (or segment_unmap) entries, and a
// Genesis history records segment_free for pages it unmaps on its own, so
// the two cannot be told apart in a CSV trace: the release is an action of
// its own, "empty_cache", which converting a PyTorch snapshot writes before
// each run of segment_free / segment_unmap entries (genesis-mem convert),
// and reading a snapshot directly turns into the same event. The replay
// calls empty_cache() there. A snapshot Genesis wrote (its
// allocator_settings name the allocator "genesis") gets none: its unmaps
// are the allocator's own releases, and its history does not record the
// program's empty_cache() calls.
//
// Note [Trace slots]: a replay must not spend its time hashing addresses. So
// read_trace() resolves them once: every `alloc` gets a slot (a small dense
// index, reused after the allocation is freed, so the slot table stays as
// small as the largest number of live allocations), and every
// `free_requested` names the slot of the live allocation at its address. The
// replay loop then keeps the pointers it got in a plain vector indexed by
// slot. Slot 0 (kNullSlot) is never allocated: it always holds nullptr, and
// frees of addresses that were never allocated (a trace that starts in the
// middle of a program) point at it, so the replay frees nullptr, a no-op,
// without a branch of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "genesis/memory/events.h"
#include "genesis/memory/upstream.h"

namespace genesis::debug {

using memory::StreamId;

/// What a replayable event does.
enum class TraceOp : std::uint8_t {
  kAlloc = 0,  ///< allocate `size` bytes into `slot`
  kFree = 1,   ///< free the allocation held in `slot`
  /// release every cached byte (Note [Released caches]); size and slot 0
  kEmptyCache = 2,
};

/// One replayable event, its address already resolved (Note [Trace slots]).
struct TraceEvent {
  /// kAlloc: the requested bytes. kFree: the requested bytes of the
  /// allocation it frees (0 for an unknown address).
  std::uint64_t size = 0;
  /// Index into the replay's slot table; kNullSlot for an unknown free.
  std::uint32_t slot = 0;
  /// Index into Trace::streams.
  std::uint16_t stream = 0;
  TraceOp op = TraceOp::kAlloc;
};
static_assert(sizeof(TraceEvent) == 16, "the replay loop streams through these: keep them small");

/// The slot that is never allocated (always nullptr in a replay).
inline constexpr std::uint32_t kNullSlot = 0;

/// The largest allocation a trace may hold: what an allocator takes at most
/// (2^62 bytes). Readers refuse larger sizes, naming the file and line.
inline constexpr std::uint64_t kMaxTraceSize = std::uint64_t{1} << 62;

/// How many lines of each kind a trace held.
struct TraceCounts {
  std::uint64_t lines = 0;           ///< data lines (without header, blank and '#' lines)
  std::uint64_t alloc = 0;
  std::uint64_t free_requested = 0;
  std::uint64_t free_completed = 0;  ///< ignored by the replay, except for a block no free_requested freed
  std::uint64_t completed_frees = 0; ///< free_completed lines that freed a block (no free_requested before)
  std::uint64_t segment_alloc = 0;   ///< ignored
  std::uint64_t segment_free = 0;    ///< ignored (see empty_cache)
  /// empty_cache events (Note [Released caches]): lines of the action, or
  /// runs of segment_free / segment_unmap entries in a PyTorch snapshot.
  std::uint64_t empty_cache = 0;
  std::uint64_t oom = 0;             ///< ignored
  std::uint64_t other_ignored = 0;   ///< segment_map, segment_unmap, snapshot (ignored)
  /// free_requested of an address without a live allocation: kept as a
  /// free of kNullSlot (a no-op).
  std::uint64_t unknown_frees = 0;
  /// alloc at an address that was still live (a corrupt trace: an allocator
  /// never does that). The earlier allocation is treated as leaked: it stays
  /// live until the end of the replay.
  std::uint64_t realloc_of_live = 0;
  /// Allocations still live at the end of the trace (leaked ones included).
  std::uint64_t live_at_end = 0;
};

/// A trace ready for replay.
///
/// Invariants: every event's slot < num_slots and stream < streams.size();
/// an alloc never uses kNullSlot; a kEmptyCache has slot kNullSlot, size 0,
/// stream 0 and never follows another; a kFree's slot is kNullSlot or was filled by
/// the latest alloc into that slot, which no other free names in between.
/// time_us and event_site are empty or as long as events; every event_site
/// entry < sites.size().
///
/// Note [Trace times and sites]: TraceEvent stays 16 bytes (the replay loop
/// streams through them), so what only some consumers need lives beside the
/// events in parallel vectors: the time stamps (what a trace source paces
/// itself by; the replay benchmark ignores them) and the allocation sites.
/// Time stamps are kept as the file has them, rounded down to whole
/// microseconds (negative ones read as 0): they may go backwards (clocks of
/// several threads), and a consumer that paces by them clamps them to be
/// monotonic (debug::open_trace_source does). A site is a call stack,
/// innermost frame first, one "file:line in function" per line (the file may
/// separate frames with '|' or newlines: normalize_site()); each distinct
/// site is stored once in `sites` and events name it by index, 0 (the empty
/// site) for none and for every free.
struct Trace {
  std::string source;                        ///< file name, or what built it
  std::vector<TraceEvent> events;            ///< alloc and free_requested, in trace order
  /// Microseconds, parallel to events (Note [Trace times and sites]); empty
  /// when the file had no time_us column.
  std::vector<std::uint64_t> time_us;
  /// Distinct allocation sites; sites[0] is "" (none). Empty when no event
  /// has a site.
  std::vector<std::string> sites;
  /// Index into sites for each event, parallel to events; empty when the
  /// trace has no `site` column.
  std::vector<std::uint32_t> event_site;
  /// The trace's stream values, in order of first appearance; TraceEvent::stream indexes this.
  std::vector<StreamId> streams;
  std::uint32_t num_slots = 1;               ///< slot table size, kNullSlot included
  std::vector<std::uint32_t> live_at_end_slots;  ///< slots allocated and never freed
  /// Largest sum of requested sizes of live allocations, as the trace
  /// recorded it (a replay that hits OOM holds less).
  std::uint64_t peak_live_bytes = 0;
  TraceCounts counts;
};

/// Builds a Trace from alloc/free events by address: the address resolution
/// of Note [Trace slots]. read_trace() uses it; tests and converters can feed
/// it directly. Not thread-safe.
class TraceBuilder {
 public:
  explicit TraceBuilder(std::string source = {});

  /// An allocation of `size` requested bytes at `addr` on `stream`. Throws
  /// InvalidArgumentError beyond 2^32 - 1 live allocations or 65,536 streams.
  void alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream = 0);
  /// The same at `time_us`, allocated at `site` (normalize_site() is applied;
  /// empty: none). Note [Trace times and sites].
  void alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream, std::uint64_t time_us,
             std::string_view site = {});
  /// An allocation at `site` without a time stamp.
  void alloc_at_site(std::uintptr_t addr, std::uint64_t size, StreamId stream, std::string_view site);
  /// A free_requested of `addr`. An address without a live allocation is
  /// counted in unknown_frees and kept as a no-op.
  void free(std::uintptr_t addr, StreamId stream = 0);
  /// The same at `time_us`.
  void free(std::uintptr_t addr, StreamId stream, std::uint64_t time_us);
  /// A free_completed of `addr`: the allocator took the block back. PyTorch
  /// writes a free_requested first, which already freed it, and then this
  /// does nothing; a trace that only has free_completed lines (written by
  /// another tool) frees its blocks here instead of keeping them all live.
  /// Returns whether it freed one.
  bool complete_free(std::uintptr_t addr, StreamId stream);
  bool complete_free(std::uintptr_t addr, StreamId stream, std::uint64_t time_us);
  // Mixing events with and without time stamps is allowed: an event without
  // one takes the time of the event before it (before the first time stamp:
  // that time stamp). Likewise an event without a site has site 0.
  /// A release of every cached byte (Note [Released caches]); one right
  /// after another adds nothing.
  void empty_cache();
  void empty_cache(std::uint64_t time_us);
  /// Lines the replay ignores are only counted.
  TraceCounts& counts() noexcept { return trace_.counts; }

  /// The finished trace; the builder is empty afterwards.
  Trace finish();

 private:
  std::uint16_t stream_index(StreamId stream);
  void add_alloc(std::uintptr_t addr, std::uint64_t size, StreamId stream);
  void add_free(std::uintptr_t addr, StreamId stream);
  bool add_empty_cache();  // false: the event before was one already
  void note_time(std::uint64_t time_us);  // after the event was pushed
  void note_no_time();
  void note_site(std::string_view site);  // likewise
  void note_no_site();

  struct Live {
    std::uint32_t slot;
    std::uint64_t size;
  };
  Trace trace_;
  std::unordered_map<std::uintptr_t, Live> live_;        // address -> live allocation
  std::unordered_map<StreamId, std::uint16_t> stream_index_;
  std::vector<std::uint32_t> free_slots_;                // slots to reuse (LIFO)
  std::vector<std::uint32_t> leaked_slots_;              // see TraceCounts::realloc_of_live
  std::uint64_t live_bytes_ = 0;
  std::unordered_map<std::string, std::uint32_t> site_index_;  // normalised site -> index into sites
};

/// A site as Trace::sites keeps it: frames separated by '|' or line ends
/// become one frame per line ('\n' between them), each frame trimmed of
/// blanks, empty frames dropped.
std::string normalize_site(std::string_view site);

/// Checks the invariants of Trace above (a Trace built by hand may break
/// them): throws InvalidArgumentError naming the first broken one. The
/// replay and the trace source index slots and streams without bounds
/// checks after it.
void check_trace(const Trace& trace);

/// Reads a trace file: CSV, plain or gzip-compressed (detected from the
/// magic bytes), streamed in chunks so that a large trace is never held as
/// text. The header is optional (without one the columns are
/// time_us,action,addr,size,stream); with one, columns may come in any order,
/// extra columns are ignored, and time_us and stream may be missing. An
/// optional `site` column holds the allocation site of an alloc (Note [Trace
/// times and sites]); a line may leave out a trailing site. Fields may be
/// quoted CSV-style ("..." with "" for a quote inside), and a quoted field
/// may span lines (up to 1 MiB a record). Numbers are decimal; addresses and
/// streams may also be hex ("0x..."); times may have a fraction (rounded
/// down). Blank lines, lines starting with '#', CRLF line ends and a UTF-8
/// byte-order mark are accepted. A plain trace may come from a pipe
/// (/dev/stdin); a gzip one must be a file.
///
/// Throws InvalidArgumentError naming the file and the line for a malformed
/// line (missing column, a field that is not a number, a negative size, an
/// unknown action, bad quoting: text after a closing quote, a quote inside an
/// unquoted field, a quoted field never closed), for a file that cannot be
/// opened, and for corrupt or truncated gzip data (everything read before is
/// discarded); and when the file is gzip but Genesis was built without zlib.
Trace read_trace(const std::string& path);

/// Writes `events` (CachingAllocator::events(): the allocator's own history)
/// as a trace: time_us = time_ns / 1000, action = event_action_name(),
/// addr, size (requested bytes for alloc/free/oom, segment bytes for segment
/// events), stream. gzip-compressed when `path` ends in ".gz". So a program
/// recorded with AllocatorOptions::record_events can be replayed under other
/// settings. Throws InvalidArgumentError when the file cannot be created (or
/// ".gz" without zlib) and genesis::Error when writing fails (disk full).
void write_trace(const std::string& path, const std::vector<memory::MemoryEvent>& events);

/// The bytes of a file as read_trace() sees them: gzip-compressed files are
/// decompressed, and a pipe (/dev/stdin) is read to its end. At most
/// `max_bytes` (InvalidArgumentError beyond, naming the file). Throws as
/// read_trace() does for a file that cannot be opened or corrupt gzip data;
/// `what` names the file in those messages ("cannot open snapshot '...'").
std::vector<std::uint8_t> read_trace_bytes(const std::string& path, std::size_t max_bytes,
                                           const char* what = "trace");

/// True when Genesis was built with zlib (gzip traces can be read and written).
bool trace_gzip_supported() noexcept;

}  // namespace genesis::debug
