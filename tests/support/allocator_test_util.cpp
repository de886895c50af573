#include "support/allocator_test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

extern char** environ;

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GENESIS_TEST_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define GENESIS_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(GENESIS_TEST_TSAN)
#define GENESIS_TEST_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(GENESIS_TEST_ASAN)
#define GENESIS_TEST_ASAN 1
#endif

namespace genesis::memory::testing_support {

::testing::AssertionResult StatsEqual(const MemoryStats& a, const MemoryStats& b) {
  std::ostringstream diff;
  auto stat_arrays = [&](const char* name, const StatArray& x, const StatArray& y) {
    static const char* kinds[3] = {"all", "small", "large"};
    for (int i = 0; i < kNumStatTypes; ++i) {
      auto one = [&](const char* field, std::int64_t u, std::int64_t v) {
        if (u != v) diff << "  " << name << "[" << kinds[i] << "]." << field << ": " << u << " vs " << v << "\n";
      };
      one("current", x[i].current, y[i].current);
      one("peak", x[i].peak, y[i].peak);
      one("allocated", x[i].allocated, y[i].allocated);
      one("freed", x[i].freed, y[i].freed);
    }
  };
  stat_arrays("allocated_bytes", a.allocated_bytes, b.allocated_bytes);
  stat_arrays("requested_bytes", a.requested_bytes, b.requested_bytes);
  stat_arrays("reserved_bytes", a.reserved_bytes, b.reserved_bytes);
  stat_arrays("active_bytes", a.active_bytes, b.active_bytes);
  stat_arrays("inactive_split_bytes", a.inactive_split_bytes, b.inactive_split_bytes);
  stat_arrays("cached_bytes", a.cached_bytes, b.cached_bytes);
  stat_arrays("allocation_count", a.allocation_count, b.allocation_count);
  stat_arrays("segment_count", a.segment_count, b.segment_count);
  stat_arrays("inactive_split_count", a.inactive_split_count, b.inactive_split_count);
  auto scalar = [&](const char* name, auto u, auto v) {
    if (u != v) diff << "  " << name << ": " << u << " vs " << v << "\n";
  };
  scalar("num_allocs", a.num_allocs, b.num_allocs);
  scalar("num_frees", a.num_frees, b.num_frees);
  scalar("num_cache_hits", a.num_cache_hits, b.num_cache_hits);
  scalar("num_cache_misses", a.num_cache_misses, b.num_cache_misses);
  scalar("num_thread_cache_hits", a.num_thread_cache_hits, b.num_thread_cache_hits);
  scalar("num_ooms", a.num_ooms, b.num_ooms);
  scalar("num_upstream_allocs", a.num_upstream_allocs, b.num_upstream_allocs);
  scalar("num_upstream_frees", a.num_upstream_frees, b.num_upstream_frees);
  scalar("num_upstream_failures", a.num_upstream_failures, b.num_upstream_failures);
  scalar("num_cache_flushes", a.num_cache_flushes, b.num_cache_flushes);
  scalar("num_stream_borrows", a.num_stream_borrows, b.num_stream_borrows);
  scalar("total_allocated", a.total_allocated, b.total_allocated);
  scalar("largest_free_block", a.largest_free_block, b.largest_free_block);
  scalar("memory_limit", a.memory_limit, b.memory_limit);
  scalar("cache_limit", a.cache_limit, b.cache_limit);
  const std::string d = diff.str();
  if (d.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "stats differ:\n" << d;
}

::testing::AssertionResult SnapshotConsistent(const std::vector<SegmentInfo>& snap) {
  std::uintptr_t prev_end = 0;
  for (const SegmentInfo& seg : snap) {
    if (seg.address % 512 != 0) return ::testing::AssertionFailure() << "segment " << seg.address << " misaligned";
    if (seg.address < prev_end)
      return ::testing::AssertionFailure() << "segments overlap or are unsorted at " << seg.address;
    prev_end = seg.address + seg.size;
    if (seg.pool != "small" && seg.pool != "large")
      return ::testing::AssertionFailure() << "segment " << seg.address << " has pool '" << seg.pool << "'";
    if (!seg.expandable && seg.pool == "small" && seg.size != 2 * MiB)
      return ::testing::AssertionFailure() << "small segment of " << seg.size << " bytes";
    if (seg.blocks.empty()) return ::testing::AssertionFailure() << "segment " << seg.address << " has no blocks";
    std::uintptr_t expect = seg.address;
    std::size_t allocated = 0;
    bool prev_free = false;
    for (const BlockInfo& b : seg.blocks) {
      if (b.address != expect)
        return ::testing::AssertionFailure() << "gap or overlap in segment " << seg.address << ": block at "
                                             << b.address << ", expected " << expect;
      if (b.size == 0 || b.size % 512 != 0)
        return ::testing::AssertionFailure() << "block " << b.address << " has size " << b.size;
      if (b.stream != seg.stream)
        return ::testing::AssertionFailure() << "block " << b.address << " stream differs from its segment";
      const bool is_free = b.state == "free";
      if (b.state != "free" && b.state != "allocated" && b.state != "thread_cached" && b.state != "pending")
        return ::testing::AssertionFailure() << "block " << b.address << " in state '" << b.state << "'";
      if (is_free && prev_free)
        return ::testing::AssertionFailure() << "two neighbouring free blocks (not coalesced) at " << b.address;
      prev_free = is_free;
      if (b.state == "allocated") {
        allocated += b.size;
        if (b.requested == 0 || b.requested > b.size)
          return ::testing::AssertionFailure() << "allocated block " << b.address << " of " << b.size
                                               << " bytes has requested " << b.requested;
      }
      expect += b.size;
    }
    if (expect != seg.address + seg.size)
      return ::testing::AssertionFailure() << "blocks of segment " << seg.address << " cover " << expect - seg.address
                                           << " of " << seg.size << " bytes";
    if (allocated != seg.allocated_bytes)
      return ::testing::AssertionFailure() << "segment " << seg.address << " allocated_bytes " << seg.allocated_bytes
                                           << " but its allocated blocks sum to " << allocated;
  }
  return ::testing::AssertionSuccess();
}

std::size_t count_blocks(const std::vector<SegmentInfo>& snap, const std::string& state) {
  std::size_t n = 0;
  for (const SegmentInfo& seg : snap)
    for (const BlockInfo& b : seg.blocks) n += b.state == state;
  return n;
}

::testing::AssertionResult SummaryHasRows(const std::string& summary) {
  for (const char* row : {"Allocated memory", "Active memory", "Requested memory", "Reserved memory",
                          "Non-releasable memory", "Allocations", "Segments", "from small pool", "from large pool",
                          "Cache hit rate", "Fragmentation", "Out-of-memory errors", "Largest free cached block"}) {
    if (summary.find(row) == std::string::npos)
      return ::testing::AssertionFailure() << "memory_summary() lacks the row '" << row << "':\n" << summary;
  }
  return ::testing::AssertionSuccess();
}

std::string LiveRanges::insert(std::uintptr_t begin, std::size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream msg;
  if (size == 0) return "zero-sized range";
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first < begin + size) {
    msg << "range [0x" << std::hex << begin << ", +0x" << size << ") overlaps live [0x" << next->first << ", +0x"
        << next->second << ")";
    return msg.str();
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > begin) {
      msg << "range [0x" << std::hex << begin << ", +0x" << size << ") overlaps live [0x" << prev->first << ", +0x"
          << prev->second << ")";
      return msg.str();
    }
  }
  ranges_.emplace(begin, size);
  bytes_ += size;
  return {};
}

std::string LiveRanges::erase(std::uintptr_t begin) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.find(begin);
  if (it == ranges_.end()) {
    std::ostringstream msg;
    msg << "erase of unknown range 0x" << std::hex << begin;
    return msg.str();
  }
  bytes_ -= it->second;
  ranges_.erase(it);
  return {};
}

std::size_t LiveRanges::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranges_.size();
}

std::size_t LiveRanges::total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

bool under_tsan() {
#if defined(GENESIS_TEST_TSAN)
  return true;
#else
  return false;
#endif
}

bool under_asan() {
#if defined(GENESIS_TEST_ASAN)
  return true;
#else
  return false;
#endif
}

double stress_scale() {
  if (const char* env = std::getenv("GENESIS_STRESS_SCALE"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && v > 0) return v;
  }
  // Defaults keep each stress test near a few seconds on a 2-core machine in
  // Release, and well under a minute under the sanitizers.
  if (under_tsan()) return 0.5;
  if (under_asan()) return 0.6;
#if !defined(__OPTIMIZE__)
  return 0.3;
#else
  return 1.0;
#endif
}

int scaled(int base) {
  const double v = static_cast<double>(base) * stress_scale();
  return v < 1.0 ? 1 : static_cast<int>(v);
}

int run_self(const std::string& filter, const std::vector<std::string>& extra_env, std::string* output) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return -1;
  exe[n] = '\0';

  // Environment: ours, with extra_env overriding variables of the same name.
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& x : extra_env) overridden |= x.substr(0, x.find('=')) == name;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const std::string& x : extra_env) env_strings.push_back(x);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::string filter_arg = "--gtest_filter=" + filter;
  std::string color_arg = "--gtest_color=no";
  std::vector<char*> argv{exe, filter_arg.data(), color_arg.data(), nullptr};

  int pipefd[2];
  if (::pipe(pipefd) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipefd[0]);
  posix_spawn_file_actions_addclose(&actions, pipefd[1]);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return -1;
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t r = ::read(pipefd[0], buf, sizeof buf);
    if (r > 0) {
      out.append(buf, static_cast<std::size_t>(r));
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) *output = std::move(out);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace genesis::memory::testing_support
