// AllocatorOptions set in C++ are held to the ranges GENESIS_ALLOC_CONF's
// parser enforces on text (validate_options): an allocator made with an
// option out of range throws, naming the option, its value and what is
// allowed, and both paths agree at every bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "genesis/core/error.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "support/process_util.h"

namespace genesis::memory {
namespace {

using genesis::test::error_message;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A double as text that reads back as the same number (std::to_string
// rounds to six decimals).
std::string exact_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::shared_ptr<SimulatedDevice> device() { return std::make_shared<SimulatedDevice>(64 * MiB); }

// The message a CachingAllocator made with `o` throws ("" when it is made).
std::string construction_error(const AllocatorOptions& o) {
  const std::string e = error_message([&] { CachingAllocator a(device(), o); });
  return e == "<no InvalidArgumentError>" ? "" : e;
}

TEST(AllocatorOptionsCheck, TheDefaultsAreValid) {
  EXPECT_NO_THROW(validate_options(AllocatorOptions{}));
  auto sim = device();
  CachingAllocator a(sim, AllocatorOptions{});
  a.deallocate(a.allocate(1000));
  // And so are the documented special values.
  AllocatorOptions o;
  o.release_slack = -0.5;  // any negative: auto
  o.chunk_strand_pages = AllocatorOptions::kAutoStrandPages;
  o.expandable_segments = AllocatorOptions::Expandable::kOff;
  o.thread_cache = AutoSwitch::automatic();
  EXPECT_EQ(construction_error(o), "");
}

struct BadOption {
  const char* field;     // named in the message
  const char* value;     // the value, as the message shows it
  const char* expected;  // part of what the message says is allowed
  std::function<void(AllocatorOptions&)> set;
};

TEST(AllocatorOptionsCheck, AnAllocatorWithAnOptionOutOfRangeIsNotMade) {
  const BadOption cases[] = {
      {"release_slack", "nan", "a negative number (auto) or a number in [0, 0.1]",
       [](AllocatorOptions& o) { o.release_slack = kNaN; }},
      {"release_slack", "inf", "[0, 0.1]", [](AllocatorOptions& o) { o.release_slack = kInf; }},
      {"release_slack", "-inf", "[0, 0.1]", [](AllocatorOptions& o) { o.release_slack = -kInf; }},
      {"release_slack", "0.5", "[0, 0.1]", [](AllocatorOptions& o) { o.release_slack = 0.5; }},
      {"memory_fraction", "nan", "(0, 1]", [](AllocatorOptions& o) { o.memory_fraction = kNaN; }},
      {"memory_fraction", "-0.25", "(0, 1]", [](AllocatorOptions& o) { o.memory_fraction = -0.25; }},
      {"memory_fraction", "0", "(0, 1]", [](AllocatorOptions& o) { o.memory_fraction = 0.0; }},
      {"event_capacity_per_thread", "0", "from 1 to 268435456",
       [](AllocatorOptions& o) { o.event_capacity_per_thread = 0; }},
      {"event_capacity_per_thread", "268435457", "from 1 to 268435456",
       [](AllocatorOptions& o) { o.event_capacity_per_thread = (std::size_t{1} << 28) + 1; }},
      {"thread_cache_small_count", "0", "from 1 to 1048576",
       [](AllocatorOptions& o) { o.thread_cache_small_count = 0; }},
      {"thread_cache_large_count", "0", "from 1 to 1048576",
       [](AllocatorOptions& o) { o.thread_cache_large_count = 0; }},
      {"thread_cache_large_park", "1048577", "from 0 to 1048576",
       [](AllocatorOptions& o) { o.thread_cache_large_park = (1u << 20) + 1; }},
      {"thread_cache_near_fit", "1025", "from 0 to 1024", [](AllocatorOptions& o) { o.thread_cache_near_fit = 1025; }},
      {"chunk_pages", "4294967295", "from 0 to 1048576",
       [](AllocatorOptions& o) { o.chunk_pages = std::numeric_limits<std::uint32_t>::max(); }},
      {"chunk_strand_pages", "1048577", "kAutoStrandPages or a whole number from 0 to 1048576",
       [](AllocatorOptions& o) { o.chunk_strand_pages = (1u << 20) + 1; }},
      {"arenas", "9", "from 0 to 8", [](AllocatorOptions& o) { o.arenas = 9; }},
      {"arena_move_window", "1048577", "from 0 to 1048576",
       [](AllocatorOptions& o) { o.arena_move_window = (1u << 20) + 1; }},
      {"idle_release_ms", "86400001", "0 (off) or a whole number from 1 to 86400000",
       [](AllocatorOptions& o) { o.idle_release_ms = 86'400'001; }},
      {"expandable_segments", "7", "kAuto, kOn or kOff",
       [](AllocatorOptions& o) { o.expandable_segments = static_cast<AllocatorOptions::Expandable>(7); }},
      {"thread_cache", "state 9", "AutoSwitch::automatic()",
       [](AllocatorOptions& o) { o.thread_cache.state = static_cast<AutoSwitch::State>(9); }},
  };
  for (const BadOption& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " = " + c.value);
    AllocatorOptions o;
    c.set(o);
    const std::string e = construction_error(o);
    ASSERT_FALSE(e.empty()) << "made an allocator";
    EXPECT_NE(e.find(std::string("AllocatorOptions::") + c.field + " is " + c.value + ";"), std::string::npos) << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    EXPECT_NE(e.find("GENESIS_ALLOC_CONF"), std::string::npos) << e;  // where the text form is documented
    // validate_options() says the same without an allocator, and the
    // parser refuses such options as the base it adds text to.
    EXPECT_EQ(error_message([&] { validate_options(o); }), e);
    EXPECT_EQ(error_message([&] { parse_alloc_conf("stream_borrow:True", o); }), e);
  }
}

// The message names the option's text key where it differs from the field.
TEST(AllocatorOptionsCheck, TheMessageNamesTheTextKey) {
  AllocatorOptions o;
  o.event_capacity_per_thread = 0;
  EXPECT_NE(construction_error(o).find("(event_capacity in GENESIS_ALLOC_CONF)"), std::string::npos);
  o = {};
  o.idle_release_ms = 86'400'001;
  EXPECT_NE(construction_error(o).find("(idle_release in GENESIS_ALLOC_CONF)"), std::string::npos);
}

// Every valid AllocatorOptions formats to text that parses back to it: sizes
// are bounded by 2^62 bytes in C++ as in the text form.
TEST(AllocatorOptionsCheck, SizesRoundTripThroughTheTextForm) {
  AllocatorOptions o;
  o.thread_cache_bytes = SIZE_MAX;
  EXPECT_NE(construction_error(o).find("thread_cache_size in GENESIS_ALLOC_CONF"), std::string::npos);
  o = {};
  o.cache_size_limit = std::size_t{1} << 62;
  EXPECT_NE(construction_error(o).find("cache_size in GENESIS_ALLOC_CONF"), std::string::npos);
  o = {};
  o.thread_cache_bytes = (std::size_t{1} << 62) - 1;
  o.cache_size_limit = (std::size_t{1} << 62) - 1;
  validate_options(o);
  const AllocatorOptions back = parse_alloc_conf(format_alloc_conf(o));
  EXPECT_EQ(back.thread_cache_bytes, o.thread_cache_bytes);
  EXPECT_EQ(back.cache_size_limit, o.cache_size_limit);
  // A size too large says so.
  EXPECT_NE(error_message([] { (void)parse_alloc_conf("cache_size:99999999999GB"); }).find("2^62"),
            std::string::npos);
}

TEST(AllocatorOptionsCheck, SetCacheSizeTakesNoneAsTheTextFormDoes) {
  auto sim = std::make_shared<SimulatedDevice>(std::size_t{1} << 30);
  CachingAllocator a(sim);
  a.set_cache_size("64MiB");
  EXPECT_EQ(a.stats().cache_limit, std::size_t{64} << 20);
  a.set_cache_size("none");
  EXPECT_EQ(a.stats().cache_limit, 0u);  // no cap
  EXPECT_THROW(a.set_cache_size("nothing"), InvalidArgumentError);
}

// For each option with a whole-number range, the parser and the C++ check
// accept and refuse the same values at both ends.
TEST(AllocatorOptionsCheck, TextAndCppAgreeAtEveryBound) {
  struct Range {
    const char* key;
    std::uint64_t lo, hi;
    std::function<void(AllocatorOptions&, std::uint64_t)> set;
  };
  const Range ranges[] = {
      {"thread_cache_small_count", 1, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.thread_cache_small_count = static_cast<std::uint32_t>(v); }},
      {"thread_cache_large_count", 1, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.thread_cache_large_count = static_cast<std::uint32_t>(v); }},
      {"thread_cache_large_park", 0, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.thread_cache_large_park = static_cast<std::uint32_t>(v); }},
      {"thread_cache_near_fit", 0, 1024,
       [](AllocatorOptions& o, std::uint64_t v) { o.thread_cache_near_fit = static_cast<std::uint32_t>(v); }},
      {"chunk_pages", 0, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.chunk_pages = static_cast<std::uint32_t>(v); }},
      {"chunk_strand_pages", 0, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.chunk_strand_pages = static_cast<std::uint32_t>(v); }},
      {"arenas", 0, 8, [](AllocatorOptions& o, std::uint64_t v) { o.arenas = static_cast<std::uint32_t>(v); }},
      {"arena_move_window", 0, 1u << 20,
       [](AllocatorOptions& o, std::uint64_t v) { o.arena_move_window = static_cast<std::uint32_t>(v); }},
      {"event_capacity", 1, std::uint64_t{1} << 28,
       [](AllocatorOptions& o, std::uint64_t v) { o.event_capacity_per_thread = v; }},
  };
  auto text_ok = [](const std::string& text) {
    return error_message([&] { parse_alloc_conf(text); }) == "<no InvalidArgumentError>";
  };
  for (const Range& r : ranges) {
    SCOPED_TRACE(r.key);
    for (std::uint64_t v : {r.lo, r.hi, r.hi + 1}) {
      AllocatorOptions o;
      r.set(o, v);
      const bool cpp_ok = error_message([&] { validate_options(o); }) == "<no InvalidArgumentError>";
      EXPECT_EQ(cpp_ok, v <= r.hi) << v;
      EXPECT_EQ(text_ok(std::string(r.key) + ":" + std::to_string(v)), cpp_ok) << v;
    }
    if (r.lo > 0) {
      AllocatorOptions o;
      r.set(o, r.lo - 1);
      EXPECT_THROW(validate_options(o), InvalidArgumentError) << r.lo - 1;
      EXPECT_FALSE(text_ok(std::string(r.key) + ":" + std::to_string(r.lo - 1)));
    }
  }
  // The fractions: release_slack in [0, 0.1] (negative: auto), memory_fraction in (0, 1].
  for (double v : {0.0, 0.1, 0.1000001}) {
    AllocatorOptions o;
    o.release_slack = v;
    const bool cpp_ok = error_message([&] { validate_options(o); }) == "<no InvalidArgumentError>";
    EXPECT_EQ(cpp_ok, v <= 0.1) << v;
    EXPECT_EQ(text_ok("release_slack:" + exact_text(v)), cpp_ok) << v;
  }
  for (double v : {1e-9, 1.0, 1.0000001}) {
    AllocatorOptions o;
    o.memory_fraction = v;
    const bool cpp_ok = error_message([&] { validate_options(o); }) == "<no InvalidArgumentError>";
    EXPECT_EQ(cpp_ok, v <= 1.0) << v;
  }
}

// Options at their largest still make a working allocator.
TEST(AllocatorOptionsCheck, AnAllocatorAtTheBoundsWorks) {
  AllocatorOptions o;
  o.thread_cache_small_count = 1u << 20;
  o.thread_cache_large_count = 1;
  o.thread_cache_near_fit = 1024;
  o.release_slack = 0.1;
  o.arenas = 8;
  o.arena_move_window = 1u << 20;
  o.event_capacity_per_thread = 1;
  o.record_events = true;
  auto sim = device();
  CachingAllocator a(sim, o);
  a.deallocate(a.allocate(1000));
  EXPECT_EQ(a.options().event_capacity_per_thread, 1u);
}

}  // namespace
}  // namespace genesis::memory
