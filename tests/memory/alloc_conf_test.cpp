// The allocator configuration text (genesis/memory/alloc_conf.h): every key,
// every value form, and clear errors for everything else. The process-wide
// side (GENESIS_ALLOC_CONF, configure_cuda_allocators) is tested from Python
// in fresh processes (python/tests/test_alloc_conf.py): it is read once per
// process.
#include "genesis/memory/alloc_conf.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "genesis/core/error.h"

namespace genesis::memory {
namespace {

using Expandable = AllocatorOptions::Expandable;

std::string error_of(std::string_view text) {
  try {
    parse_alloc_conf(text, {}, "GENESIS_ALLOC_CONF");
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(AllocConf, EmptyTextKeepsTheBase) {
  AllocatorOptions base;
  base.memory_fraction = 0.25;
  base.thread_cache = false;
  for (const char* text : {"", "   ", ",", " , ,, "}) {
    const AllocatorOptions o = parse_alloc_conf(text, base);
    EXPECT_EQ(o.memory_fraction, 0.25) << text;
    EXPECT_EQ(o.thread_cache, AutoSwitch(false)) << text;
    EXPECT_EQ(format_alloc_conf(o), format_alloc_conf(base)) << text;
  }
}

TEST(AllocConf, EveryKeySetsItsField) {
  const AllocatorOptions o = parse_alloc_conf(
      "expandable_segments:True, memory_fraction:0.5 ,cache_size:2GB,thread_cache:false,"
      "thread_cache_size:64MiB,thread_cache_small_count:7,thread_cache_large_count:3,thread_cache_large_park:0,"
      "thread_cache_near_fit:8,thread_cache_flush_at_peak:false,stream_borrow:False,chunk_pages:16,chunk_strand_pages:2,release_slack:0.02,arenas:3,idle_release:45s,record_events:1,event_capacity:1000");
  EXPECT_EQ(o.expandable_segments, Expandable::kOn);
  EXPECT_DOUBLE_EQ(o.memory_fraction, 0.5);
  EXPECT_EQ(o.cache_size_limit, std::size_t{2000000000});
  EXPECT_EQ(o.thread_cache, AutoSwitch(false));
  EXPECT_EQ(o.thread_cache_bytes, std::size_t{64} << 20);
  EXPECT_EQ(o.thread_cache_small_count, 7u);
  EXPECT_EQ(o.thread_cache_large_count, 3u);
  EXPECT_EQ(o.thread_cache_large_park, 0u);
  EXPECT_EQ(o.thread_cache_near_fit, 8u);
  EXPECT_FALSE(o.thread_cache_flush_at_peak);
  EXPECT_FALSE(o.stream_borrow);
  EXPECT_EQ(o.chunk_pages, 16u);
  EXPECT_EQ(o.chunk_strand_pages, 2u);
  EXPECT_DOUBLE_EQ(o.release_slack, 0.02);
  EXPECT_EQ(o.arenas, 3u);
  EXPECT_EQ(o.idle_release_ms, 45000u);
  EXPECT_TRUE(o.record_events);
  EXPECT_EQ(o.event_capacity_per_thread, 1000u);
}

TEST(AllocConf, BooleansTakeSixSpellings) {
  for (const char* t : {"True", "true", "1"})
    EXPECT_EQ(parse_alloc_conf(std::string("expandable_segments:") + t).expandable_segments, Expandable::kOn) << t;
  for (const char* f : {"False", "false", "0"})
    EXPECT_EQ(parse_alloc_conf(std::string("expandable_segments:") + f).expandable_segments, Expandable::kOff) << f;
  EXPECT_EQ(parse_alloc_conf("expandable_segments:False,").expandable_segments, Expandable::kOff);
  EXPECT_EQ(parse_alloc_conf("expandable_segments:auto", parse_alloc_conf("expandable_segments:0"))
                .expandable_segments,
            Expandable::kAuto);
  for (const char* bad : {"yes", "TRUE", "on", "2", "Truee"}) {
    const std::string e = error_of(std::string("record_events:") + bad);
    EXPECT_NE(e.find("record_events"), std::string::npos) << e;
    EXPECT_NE(e.find("True, False, true, false, 1 or 0"), std::string::npos) << e;
    EXPECT_NE(e.find(bad), std::string::npos) << e;
  }
}

TEST(AllocConf, SwitchesTheAllocatorResolvesTakeAuto) {
  EXPECT_TRUE(AllocatorOptions{}.thread_cache.is_auto());
  EXPECT_EQ(parse_alloc_conf("thread_cache:True").thread_cache, AutoSwitch(true));
  EXPECT_EQ(parse_alloc_conf("thread_cache:0").thread_cache, AutoSwitch(false));
  const AllocatorOptions off = parse_alloc_conf("thread_cache:False");
  EXPECT_TRUE(parse_alloc_conf("thread_cache:auto", off).thread_cache.is_auto());
  EXPECT_EQ(format_alloc_conf(off), "thread_cache:False");
  EXPECT_EQ(format_alloc_conf(parse_alloc_conf("thread_cache:auto")), "");  // the default
  EXPECT_EQ(format_alloc_conf(parse_alloc_conf("thread_cache:true")), "thread_cache:True");
  // auto resolves as asked, an explicit switch ignores it.
  EXPECT_TRUE(AutoSwitch::automatic().resolve(true));
  EXPECT_FALSE(AutoSwitch::automatic().resolve(false));
  EXPECT_TRUE(AutoSwitch(true).resolve(false));
  EXPECT_FALSE(AutoSwitch(false).resolve(true));
  for (const char* key : {"thread_cache", "expandable_segments"}) {
    for (const char* bad : {"yes", "AUTO", "Auto", "2"}) {
      const std::string e = error_of(std::string(key) + ":" + bad);
      EXPECT_NE(e.find(key), std::string::npos) << e;
      EXPECT_NE(e.find("True, False, auto"), std::string::npos) << e;
      EXPECT_NE(e.find(bad), std::string::npos) << e;
    }
  }
}

TEST(AllocConf, ReleaseSlackIsAutoOrASmallFraction) {
  EXPECT_EQ(AllocatorOptions{}.chunk_strand_pages, AllocatorOptions::kAutoStrandPages);  // auto by default
  EXPECT_EQ(parse_alloc_conf("chunk_strand_pages:auto", parse_alloc_conf("chunk_strand_pages:3")).chunk_strand_pages,
            AllocatorOptions::kAutoStrandPages);
  EXPECT_EQ(parse_alloc_conf("chunk_strand_pages:0").chunk_strand_pages, 0u);
  for (const char* bad : {"-1", "Auto", "2x", "1048577"}) {
    const std::string e = error_of(std::string("chunk_strand_pages:") + bad);
    EXPECT_NE(e.find("auto or a whole number from 0 to 1048576"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_LT(AllocatorOptions{}.release_slack, 0.0);  // auto by default
  EXPECT_DOUBLE_EQ(parse_alloc_conf("release_slack:0").release_slack, 0.0);
  EXPECT_DOUBLE_EQ(parse_alloc_conf("release_slack:0.1").release_slack, 0.1);
  EXPECT_LT(parse_alloc_conf("release_slack:auto", parse_alloc_conf("release_slack:0.01")).release_slack, 0.0);
  for (const char* bad : {"-0.01", "0.2", "1", "x", "0.01x", "nan", "inf"}) {
    const std::string e = error_of(std::string("release_slack:") + bad);
    EXPECT_NE(e.find("release_slack"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("auto or a number in [0, 0.1]"), std::string::npos) << bad << ": " << e;
  }
  for (const char* text : {"release_slack:0.015", "release_slack:0", "release_slack:auto"}) {
    const AllocatorOptions o = parse_alloc_conf(text);
    EXPECT_EQ(parse_alloc_conf(format_alloc_conf(o)).release_slack, o.release_slack) << text;
  }
  EXPECT_EQ(format_alloc_conf(parse_alloc_conf("release_slack:0.015")), "release_slack:0.015");
  EXPECT_EQ(format_alloc_conf(parse_alloc_conf("chunk_strand_pages:auto")), "");  // the default
  EXPECT_EQ(format_alloc_conf(parse_alloc_conf("chunk_strand_pages:0")), "chunk_strand_pages:0");
}

TEST(AllocConf, CacheSizeAcceptsUnitsAndNone) {
  EXPECT_EQ(parse_alloc_conf("cache_size:512MiB").cache_size_limit, std::size_t{512} << 20);
  EXPECT_EQ(parse_alloc_conf("max_cached_bytes:4096").cache_size_limit, 4096u);
  EXPECT_EQ(parse_alloc_conf("cache_size:none", parse_alloc_conf("cache_size:1GB")).cache_size_limit, SIZE_MAX);
  EXPECT_EQ(parse_alloc_conf("cache_size:unlimited").cache_size_limit, SIZE_MAX);
  const std::string e = error_of("cache_size:lots");
  EXPECT_NE(e.find("cache_size"), std::string::npos) << e;
  EXPECT_NE(e.find("2GB"), std::string::npos) << e;
  EXPECT_NE(error_of("cache_size:1GB,max_cached_bytes:2GB").find("same option"), std::string::npos);
}

TEST(AllocConf, UnknownKeysNameTheKeyAndListTheValidOnes) {
  const std::string e = error_of("expandable_segments:True,colour:blue");
  EXPECT_NE(e.find("GENESIS_ALLOC_CONF"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'colour'"), std::string::npos) << e;
  for (const AllocConfKey& k : alloc_conf_keys()) EXPECT_NE(e.find(k.name), std::string::npos) << k.name << ": " << e;
  const std::string torch = error_of("max_split_size_mb:128");
  EXPECT_NE(torch.find("'max_split_size_mb'"), std::string::npos) << torch;
  EXPECT_NE(torch.find("PyTorch"), std::string::npos) << torch;
  EXPECT_NE(torch.find("valid keys"), std::string::npos) << torch;
}

TEST(AllocConf, MalformedItemsAreErrors) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"expandable_segments", "is not key:value"},
      {"expandable_segments=True", "is not key:value"},
      {":True", "has no key"},
      {"memory_fraction:", "has no value"},
      {"memory_fraction: ", "has no value"},
      {"thread_cache:1,thread_cache:0", "given twice"},
      {"memory_fraction:0", "(0, 1]"},
      {"memory_fraction:1.5", "(0, 1]"},
      {"memory_fraction:-0.5", "(0, 1]"},
      {"memory_fraction:nan", "(0, 1]"},
      {"memory_fraction:inf", "(0, 1]"},
      {"memory_fraction:0.5x", "(0, 1]"},
      {"arenas:9", "from 0 to 8"},
      {"arenas:-1", "whole number"},
      {"arenas:1.5", "whole number"},
      {"thread_cache_small_count:0", "from 1 to"},
      {"event_capacity:99999999999999999999999", "smaller number"},
      {"chunk_pages:", "has no value"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of(c.text);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.text << " -> " << e;
  }
}

TEST(AllocConf, NumbersAtTheBoundsAreAccepted) {
  EXPECT_DOUBLE_EQ(parse_alloc_conf("memory_fraction:1").memory_fraction, 1.0);
  EXPECT_DOUBLE_EQ(parse_alloc_conf("memory_fraction:1e-3").memory_fraction, 1e-3);
  EXPECT_EQ(parse_alloc_conf("arenas:8").arenas, 8u);
  EXPECT_EQ(parse_alloc_conf("arenas:0").arenas, 0u);
}

TEST(AllocConf, KeysSeenAreReportedInOrder) {
  std::vector<std::string> keys;
  parse_alloc_conf("memory_fraction:0.5,,thread_cache:0", {}, "x", &keys);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], "memory_fraction");
  EXPECT_EQ(keys[1], "thread_cache");
}

TEST(AllocConf, FormatIsEmptyForTheDefaultsAndRoundTrips) {
  EXPECT_EQ(format_alloc_conf(AllocatorOptions{}), "");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    AllocatorOptions o;
    if (rng() & 1) o.expandable_segments = static_cast<Expandable>(rng() % 3);
    if (rng() & 1) o.memory_fraction = 0.001 + 0.998 * static_cast<double>(rng() % 1000) / 999.0;
    if (rng() & 1) o.cache_size_limit = rng() % 3 == 0 ? SIZE_MAX : rng() % (std::size_t{1} << 40);
    if (rng() & 1) o.thread_cache = (rng() & 1) != 0;
    if (rng() & 1) o.thread_cache_bytes = rng() % (std::size_t{1} << 34);
    if (rng() & 1) o.thread_cache_small_count = 1 + static_cast<std::uint32_t>(rng() % 1000);
    if (rng() & 1) o.thread_cache_near_fit = static_cast<std::uint32_t>(rng() % 9);
    if (rng() & 1) o.thread_cache_flush_at_peak = (rng() & 1) != 0;
    if (rng() & 1) o.stream_borrow = (rng() & 1) != 0;
    if (rng() & 1) o.arenas = static_cast<std::uint32_t>(rng() % 9);
    if (rng() & 1) o.idle_release_ms = static_cast<std::uint32_t>(rng() % 86'400'001);
    if (rng() & 1) o.record_events = (rng() & 1) != 0;
    if (rng() & 1) o.event_capacity_per_thread = 1 + rng() % 100000;
    const std::string text = format_alloc_conf(o);
    const AllocatorOptions back = parse_alloc_conf(text);
    EXPECT_EQ(format_alloc_conf(back), text);
    EXPECT_EQ(back.memory_fraction, o.memory_fraction) << text;
    EXPECT_EQ(back.cache_size_limit, o.cache_size_limit) << text;
    EXPECT_EQ(back.expandable_segments, o.expandable_segments) << text;
    EXPECT_EQ(back.arenas, o.arenas) << text;
    EXPECT_EQ(back.stream_borrow, o.stream_borrow) << text;
    EXPECT_EQ(back.idle_release_ms, o.idle_release_ms) << text;
  }
}

}  // namespace
}  // namespace genesis::memory
