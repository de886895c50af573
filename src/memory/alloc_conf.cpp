// Parsing and writing the allocator configuration text (Note [Allocator
// configuration] in genesis/memory/alloc_conf.h).
#include "genesis/memory/alloc_conf.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "genesis/core/bytes.h"
#include "genesis/core/error.h"

namespace genesis::memory {

namespace {

using Expandable = AllocatorOptions::Expandable;

// Options of PYTORCH_CUDA_ALLOC_CONF without a Genesis counterpart: named in
// their own error, so that a configuration copied from PyTorch fails loudly.
constexpr const char* kPyTorchOnly[] = {
    "max_split_size_mb",      "roundup_power2_divisions",      "garbage_collection_threshold",
    "backend",                "pinned_use_cuda_host_register", "pinned_num_register_threads",
    "release_lock_on_cudamalloc", "pinned_use_background_threads", "per_process_memory_fraction",
};

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string key_list() {
  std::string out;
  for (const AllocConfKey& k : alloc_conf_keys()) {
    if (!out.empty()) out += ", ";
    out += k.name;
  }
  return out;
}

// The parsers below throw with the key and the expected form in the message.
struct Item {
  std::string_view source, key, value;

  [[noreturn]] void bad(std::string_view expected) const {
    GENESIS_THROW(InvalidArgumentError, source, ": bad value '", value, "' for ", key, ": expected ", expected);
  }

  // One of the six spellings of a boolean, or empty.
  std::optional<bool> spelled_boolean() const {
    if (value == "True" || value == "true" || value == "1") return true;
    if (value == "False" || value == "false" || value == "0") return false;
    return std::nullopt;
  }

  bool boolean() const {
    if (const std::optional<bool> b = spelled_boolean()) return *b;
    bad("True, False, true, false, 1 or 0");
  }

  // A switch the allocator may resolve itself: "auto" is empty.
  std::optional<bool> boolean_or_auto() const {
    if (value == "auto") return std::nullopt;
    if (const std::optional<bool> b = spelled_boolean()) return b;
    bad("True, False, auto, true, false, 1 or 0");
  }

  // `prefix` names what else the key takes ("auto or "), for the message.
  std::uint64_t count(std::uint64_t lo, std::uint64_t hi, std::string_view prefix = {}) const {
    const std::string expected =
        std::string(prefix) + "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
    std::uint64_t v = 0;
    if (value.empty()) bad(expected);
    for (char c : value) {
      if (c < '0' || c > '9') bad(expected);
      if (v > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) bad("a smaller number: " + expected);
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (v < lo || v > hi) bad(expected);
    return v;
  }

  // The value as a finite number, or bad(expected).
  double number(std::string_view expected) const {
    const std::string text(value);
    char* end = nullptr;
    errno = 0;
    const double f = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(f)) bad(expected);
    return f;
  }

  double fraction() const {
    constexpr std::string_view kExpected = "a number in (0, 1], e.g. 0.8";
    const double f = number(kExpected);
    if (!(f > 0.0) || f > 1.0) bad(kExpected);
    return f;
  }

  // "auto" (negative) or a fraction in [0, 0.1].
  double slack() const {
    if (value == "auto") return -1.0;
    constexpr std::string_view kExpected = "auto or a number in [0, 0.1], e.g. 0.01";
    const double f = number(kExpected);
    if (f < 0.0 || f > option_limits::kMaxReleaseSlack) bad(kExpected);
    return f;
  }

  // "off", "0", or a whole number of ms, s or min, in milliseconds
  // (1 ms .. 1 day).
  std::uint32_t duration_ms() const {
    constexpr std::string_view kExpected = "off or a duration such as 500ms, 30s or 5min (at most a day)";
    if (value == "off" || value == "0") return 0;
    std::size_t digits = 0;
    while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
    const std::string_view unit = value.substr(digits);
    const std::uint64_t scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "min" ? 60000 : 0;
    if (digits == 0 || digits > 9 || scale == 0) bad(kExpected);
    const std::uint64_t ms = std::stoull(std::string(value.substr(0, digits))) * scale;
    if (ms == 0 || ms > option_limits::kMaxIdleReleaseMs) bad(kExpected);
    return static_cast<std::uint32_t>(ms);
  }

  std::size_t size() const {
    try {
      return parse_bytes(value);
    } catch (const InvalidArgumentError& e) {
      // parse_bytes says what was wrong (no number, an unknown unit, above
      // 2^62 bytes): keep it.
      bad("a size such as 2GB, 512MiB or a number of bytes (" + e.message() + ")");
    }
  }
};

void apply(const Item& it, AllocatorOptions& o) {
  using option_limits::kMaxCount;
  const std::string_view k = it.key;
  if (k == "expandable_segments") {
    const std::optional<bool> on = it.boolean_or_auto();
    o.expandable_segments = !on ? Expandable::kAuto : *on ? Expandable::kOn : Expandable::kOff;
  } else if (k == "memory_fraction") {
    o.memory_fraction = it.fraction();
  } else if (k == "cache_size" || k == "max_cached_bytes") {
    o.cache_size_limit = it.value == "none" || it.value == "None" || it.value == "unlimited" ? SIZE_MAX : it.size();
  } else if (k == "thread_cache") {
    const std::optional<bool> on = it.boolean_or_auto();
    o.thread_cache = on ? AutoSwitch(*on) : AutoSwitch::automatic();
  } else if (k == "thread_cache_size") {
    o.thread_cache_bytes = it.size();
  } else if (k == "thread_cache_small_count") {
    o.thread_cache_small_count = static_cast<std::uint32_t>(it.count(1, kMaxCount));
  } else if (k == "thread_cache_large_count") {
    o.thread_cache_large_count = static_cast<std::uint32_t>(it.count(1, kMaxCount));
  } else if (k == "thread_cache_large_park") {
    o.thread_cache_large_park = static_cast<std::uint32_t>(it.count(0, kMaxCount));
  } else if (k == "thread_cache_flush_at_peak") {
    o.thread_cache_flush_at_peak = it.boolean();
  } else if (k == "classic_release_at_mark") {
    o.classic_release_at_mark = it.boolean();
  } else if (k == "stream_borrow") {
    o.stream_borrow = it.boolean();
  } else if (k == "thread_cache_near_fit") {
    o.thread_cache_near_fit = static_cast<std::uint32_t>(it.count(0, option_limits::kMaxNearFit));
  } else if (k == "chunk_pages") {
    o.chunk_pages = static_cast<std::uint32_t>(it.count(0, kMaxCount));
  } else if (k == "chunk_strand_pages") {
    o.chunk_strand_pages = it.value == "auto" ? AllocatorOptions::kAutoStrandPages
                                              : static_cast<std::uint32_t>(it.count(0, kMaxCount, "auto or "));
  } else if (k == "release_slack") {
    o.release_slack = it.slack();
  } else if (k == "arenas") {
    o.arenas = static_cast<std::uint32_t>(it.count(0, option_limits::kMaxArenas));
  } else if (k == "arena_move_window") {
    o.arena_move_window = static_cast<std::uint32_t>(it.count(0, kMaxCount));
  } else if (k == "idle_release") {
    o.idle_release_ms = it.duration_ms();
  } else if (k == "record_events") {
    o.record_events = it.boolean();
  } else if (k == "event_capacity") {
    o.event_capacity_per_thread = it.count(1, option_limits::kMaxEventCapacity);
  } else {
    for (const char* p : kPyTorchOnly)
      if (k == p)
        GENESIS_THROW(InvalidArgumentError, it.source, ": '", k,
                      "' is an option of PyTorch's allocator that Genesis does not have; valid keys: ", key_list());
    GENESIS_THROW(InvalidArgumentError, it.source, ": unknown key '", k, "'; valid keys: ", key_list());
  }
}

std::string size_text(std::size_t n) { return std::to_string(n); }

}  // namespace

// The forms below spell out option_limits.
static_assert(option_limits::kMaxCount == 1048576 && option_limits::kMaxNearFit == 1024 &&
                  option_limits::kMaxArenas == 8 && option_limits::kMaxEventCapacity == 268435456 &&
                  option_limits::kMaxReleaseSlack == 0.1,
              "update the forms in alloc_conf_keys()");

const std::vector<AllocConfKey>& alloc_conf_keys() {
  static const std::vector<AllocConfKey> keys = {
      {"expandable_segments", "True|False|auto", "segments whose pages are mapped on demand (default auto)"},
      {"memory_fraction", "number in (0, 1]", "cap on reserved memory as a fraction of the device"},
      {"cache_size", "size or none", "cap on cached (reserved - allocated) memory"},
      {"max_cached_bytes", "size or none", "the same as cache_size"},
      {"thread_cache", "True|False|auto", "per-thread caches on the hot path (default auto)"},
      {"thread_cache_size", "size (0: auto)", "bytes one thread's cache may hold"},
      {"thread_cache_small_count", "1..1048576", "blocks a thread cache keeps per small size"},
      {"thread_cache_large_count", "1..1048576", "blocks a thread cache keeps per large size"},
      {"thread_cache_large_park", "0..1048576", "large blocks a thread may keep across pool searches"},
      {"thread_cache_flush_at_peak", "True|False",
       "expandable segments: thread caches go back to the pool before it maps past its peak"},
      {"classic_release_at_mark", "True|False",
       "classic segments: wholly free segments go back before the pool grows past its peak"},
      {"stream_borrow", "True|False",
       "a stream may take another stream's free block (waiting for its work) instead of growing"},
      {"thread_cache_near_fit", "0..1024", "near fits: a cached block at most 1/N larger (0: off)"},
      {"chunk_pages", "0..1048576 (0: auto)", "expandable segments: most pages one physical chunk spans"},
      {"chunk_strand_pages", "auto or 0..1048576", "expandable segments: pages a chunk may strand outside a block"},
      {"release_slack", "auto or 0..0.1",
       "expandable segments: room above the allocated peak a loop may keep instead of remapping each step"},
      {"arenas", "0..8 (0: auto)",
       "independent pools threads are spread over (auto: one per hardware thread for host memory; for device "
       "memory one pool that contending threads leave)"},
      {"arena_move_window", "0..1048576 (0: never)",
       "device memory, arenas auto: a thread waiting on the pool lock in a quarter of this many misses moves out"},
      {"idle_release", "off or a duration (500ms, 30s, 5min)",
       "give the cached memory back after this long without an allocation"},
      {"record_events", "True|False", "record every alloc/free into the event history"},
      {"event_capacity", "1..268435456", "events kept per thread in the history"},
  };
  return keys;
}

AllocatorOptions parse_alloc_conf(std::string_view text, const AllocatorOptions& base, std::string_view source,
                                  std::vector<std::string>* keys) {
  AllocatorOptions o = base;
  std::set<std::string, std::less<>> seen;
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view raw = trim(rest.substr(0, comma));
    if (!raw.empty()) {
      const std::size_t colon = raw.find(':');
      GENESIS_CHECK(colon != std::string_view::npos, source, ": '", raw,
                    "' is not key:value (items are separated by ',', keys from values by ':'); valid keys: ",
                    key_list());
      Item it{source, trim(raw.substr(0, colon)), trim(raw.substr(colon + 1))};
      GENESIS_CHECK(!it.key.empty(), source, ": '", raw, "' has no key before ':'");
      GENESIS_CHECK(!it.value.empty(), source, ": ", it.key, " has no value after ':'");
      GENESIS_CHECK(seen.insert(std::string(it.key)).second, source, ": ", it.key, " is given twice");
      apply(it, o);
      if (keys != nullptr) keys->emplace_back(it.key);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  // Two spellings of one option must not disagree silently.
  GENESIS_CHECK(!(seen.count("cache_size") && seen.count("max_cached_bytes")), source,
                ": cache_size and max_cached_bytes are the same option; give one");
  // What the text set is in range by now; this catches a `base` set in C++
  // out of range before it reaches an allocator.
  validate_options(o);
  return o;
}

std::string format_alloc_conf(const AllocatorOptions& o) {
  const AllocatorOptions d;
  std::string out;
  auto add = [&out](const char* key, const std::string& value) {
    if (!out.empty()) out += ',';
    out += key;
    out += ':';
    out += value;
  };
  auto flag = [](bool b) { return std::string(b ? "True" : "False"); };
  if (o.expandable_segments != d.expandable_segments)
    add("expandable_segments", o.expandable_segments == Expandable::kAuto ? "auto"
                               : o.expandable_segments == Expandable::kOn ? "True"
                                                                          : "False");
  if (o.memory_fraction != d.memory_fraction) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", o.memory_fraction);
    add("memory_fraction", buf);
  }
  if (o.cache_size_limit != d.cache_size_limit)
    add("cache_size", o.cache_size_limit == SIZE_MAX ? "none" : size_text(o.cache_size_limit));
  if (o.thread_cache != d.thread_cache)
    add("thread_cache", o.thread_cache.is_auto() ? "auto" : flag(o.thread_cache.resolve(true)));
  if (o.thread_cache_bytes != d.thread_cache_bytes) add("thread_cache_size", size_text(o.thread_cache_bytes));
  if (o.thread_cache_small_count != d.thread_cache_small_count)
    add("thread_cache_small_count", std::to_string(o.thread_cache_small_count));
  if (o.thread_cache_large_count != d.thread_cache_large_count)
    add("thread_cache_large_count", std::to_string(o.thread_cache_large_count));
  if (o.thread_cache_large_park != d.thread_cache_large_park)
    add("thread_cache_large_park", std::to_string(o.thread_cache_large_park));
  if (o.thread_cache_flush_at_peak != d.thread_cache_flush_at_peak)
    add("thread_cache_flush_at_peak", flag(o.thread_cache_flush_at_peak));
  if (o.stream_borrow != d.stream_borrow) add("stream_borrow", flag(o.stream_borrow));
  if (o.classic_release_at_mark != d.classic_release_at_mark)
    add("classic_release_at_mark", flag(o.classic_release_at_mark));
  if (o.thread_cache_near_fit != d.thread_cache_near_fit)
    add("thread_cache_near_fit", std::to_string(o.thread_cache_near_fit));
  if (o.chunk_pages != d.chunk_pages) add("chunk_pages", std::to_string(o.chunk_pages));
  if (o.chunk_strand_pages != d.chunk_strand_pages)
    add("chunk_strand_pages", o.chunk_strand_pages == AllocatorOptions::kAutoStrandPages
                                  ? std::string("auto")
                                  : std::to_string(o.chunk_strand_pages));
  if (o.release_slack != d.release_slack) {
    char buf[64];
    if (o.release_slack < 0) {
      std::snprintf(buf, sizeof buf, "auto");
    } else {  // the shortest text that reads back as the same number
      std::snprintf(buf, sizeof buf, "%.15g", o.release_slack);
      if (std::strtod(buf, nullptr) != o.release_slack) std::snprintf(buf, sizeof buf, "%.17g", o.release_slack);
    }
    add("release_slack", buf);
  }
  if (o.arenas != d.arenas) add("arenas", std::to_string(o.arenas));
  if (o.arena_move_window != d.arena_move_window) add("arena_move_window", std::to_string(o.arena_move_window));
  if (o.idle_release_ms != d.idle_release_ms) {
    const std::uint32_t ms = o.idle_release_ms;
    add("idle_release", ms == 0           ? std::string("off")
                        : ms % 60000 == 0 ? std::to_string(ms / 60000) + "min"
                        : ms % 1000 == 0  ? std::to_string(ms / 1000) + "s"
                                          : std::to_string(ms) + "ms");
  }
  if (o.record_events != d.record_events) add("record_events", flag(o.record_events));
  if (o.event_capacity_per_thread != d.event_capacity_per_thread)
    add("event_capacity", std::to_string(o.event_capacity_per_thread));
  return out;
}

}  // namespace genesis::memory
