// Range checks of AllocatorOptions (validate_options): the ranges
// GENESIS_ALLOC_CONF's parser enforces on text, applied to options however
// they were set, so that a C++ caller cannot make an allocator the text
// could not (a NaN slack, an event history of no entries).
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

#include "genesis/core/error.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/detail/arena_set.h"

namespace genesis::memory {

static_assert(option_limits::kMaxArenas == detail::ArenaSet::kMaxArenas,
              "the arenas option's range is the number of arenas an allocator can make");

namespace {

// `field`: the AllocatorOptions member; `key`: its GENESIS_ALLOC_CONF key,
// named too so that a user who knows the text form finds the option.
[[noreturn]] void bad(const char* field, const char* key, const std::string& value, const std::string& expected) {
  GENESIS_THROW(InvalidArgumentError, "AllocatorOptions::", field, " is ", value, "; expected ", expected, " (",
                key, " in GENESIS_ALLOC_CONF)");
}

void whole_number(const char* field, const char* key, std::uint64_t v, std::uint64_t lo, std::uint64_t hi,
                  const char* prefix = "") {
  if (v < lo || v > hi)
    bad(field, key, std::to_string(v),
        std::string(prefix) + "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
}

// The shortest text that shows which double it was (NaN, inf, 1e-300).
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

void validate_options(const AllocatorOptions& o) {
  using Expandable = AllocatorOptions::Expandable;
  using State = AutoSwitch::State;
  // Written so that NaN fails: every comparison with it is false.
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0))
    bad("memory_fraction", "memory_fraction", number_text(o.memory_fraction), "a number in (0, 1], e.g. 0.8");
  if (o.expandable_segments != Expandable::kAuto && o.expandable_segments != Expandable::kOn &&
      o.expandable_segments != Expandable::kOff)
    bad("expandable_segments", "expandable_segments", std::to_string(static_cast<int>(o.expandable_segments)),
        "Expandable::kAuto, kOn or kOff");
  if (o.thread_cache.state != State::kAuto && o.thread_cache.state != State::kOn &&
      o.thread_cache.state != State::kOff)
    bad("thread_cache", "thread_cache", "state " + std::to_string(static_cast<int>(o.thread_cache.state)),
        "true, false or AutoSwitch::automatic()");
  using option_limits::kMaxCount;
  whole_number("thread_cache_small_count", "thread_cache_small_count", o.thread_cache_small_count, 1, kMaxCount);
  whole_number("thread_cache_large_count", "thread_cache_large_count", o.thread_cache_large_count, 1, kMaxCount);
  whole_number("thread_cache_large_park", "thread_cache_large_park", o.thread_cache_large_park, 0, kMaxCount);
  whole_number("thread_cache_near_fit", "thread_cache_near_fit", o.thread_cache_near_fit, 0,
               option_limits::kMaxNearFit);
  whole_number("chunk_pages", "chunk_pages", o.chunk_pages, 0, kMaxCount);
  if (o.chunk_strand_pages != AllocatorOptions::kAutoStrandPages)
    whole_number("chunk_strand_pages", "chunk_strand_pages", o.chunk_strand_pages, 0, kMaxCount,
                 "kAutoStrandPages or ");
  // Negative is auto; NaN and infinities are no setting at all.
  if (!std::isfinite(o.release_slack) || o.release_slack > option_limits::kMaxReleaseSlack)
    bad("release_slack", "release_slack", number_text(o.release_slack),
        "a negative number (auto) or a number in [0, 0.1], e.g. 0.01");
  whole_number("arenas", "arenas", o.arenas, 0, option_limits::kMaxArenas);
  whole_number("arena_move_window", "arena_move_window", o.arena_move_window, 0, kMaxCount);
  if (o.idle_release_ms != 0)
    whole_number("idle_release_ms", "idle_release", o.idle_release_ms, 1, option_limits::kMaxIdleReleaseMs,
                 "0 (off) or ");
  whole_number("event_capacity_per_thread", "event_capacity", o.event_capacity_per_thread, 1,
               option_limits::kMaxEventCapacity);
  // Sizes as the text form takes them (below 2^62 bytes, as every size
  // Genesis reads), so that format_alloc_conf's text always parses back;
  // cache_size_limit's SIZE_MAX is "none".
  constexpr std::size_t kMaxBytes = (std::size_t{1} << 62) - 1;
  if (o.cache_size_limit != SIZE_MAX)
    whole_number("cache_size_limit", "cache_size", o.cache_size_limit, 0, kMaxBytes, "SIZE_MAX (none) or ");
  whole_number("thread_cache_bytes", "thread_cache_size", o.thread_cache_bytes, 0, kMaxBytes);
}

}  // namespace genesis::memory
