// Unnamed shared storages do not outlive their process, however it ends:
// the watcher removes their names (Note [Shared memory watcher]).
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/storage/shared_storage.h"

namespace genesis::storage {
namespace {

enum class End { kExit, kSigkill, kAbort };

std::vector<std::string> shm_names(const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  ::closedir(d);
  return out;
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Waits (up to 20 s) until /dev/shm has no entry starting with `prefix`;
// returns what is left.
std::vector<std::string> wait_until_gone(const std::string& prefix) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::string> left = shm_names(prefix);
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = shm_names(prefix);
  }
  return left;
}

// A child creates three unnamed storages (never destroyed), tells the
// parent their names, and ends by `end` when the parent says so. The test
// checks that the names existed while it lived and are gone after.
void expect_cleaned_after(End end, const char* watcher_mode) {
  int names_pipe[2], go_pipe[2];
  ASSERT_EQ(::pipe(names_pipe), 0);
  ASSERT_EQ(::pipe(go_pipe), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    ::close(names_pipe[0]);
    ::close(go_pipe[1]);
    if (watcher_mode != nullptr) ::setenv("GENESIS_SHM_WATCHER", watcher_mode, 1);
    std::string names;
    for (int i = 0; i < 3; ++i) {
      auto* s = new SharedStorage({1000 + i}, DType::kUInt8);  // never deleted: no destructor runs
      static_cast<unsigned char*>(s->data())[0] = 1;
      names += s->name().substr(1) + "\n";
    }
    write_all(names_pipe[1], names);
    ::close(names_pipe[1]);
    char go = 0;
    while (::read(go_pipe[0], &go, 1) < 0 && errno == EINTR) {
    }
    if (end == End::kSigkill) ::raise(SIGKILL);
    if (end == End::kAbort) std::abort();
    ::_exit(0);
  }
  ::close(names_pipe[1]);
  ::close(go_pipe[0]);
  const std::string names = read_all(names_pipe[0]);
  ::close(names_pipe[0]);
  const std::string prefix = "genesis-" + std::to_string(pid) + "-";
  const auto alive = shm_names(prefix);
  EXPECT_EQ(alive.size(), 3u) << "the child's segments must exist while it runs; it reported:\n" << names;
  for (const auto& n : alive) EXPECT_NE(names.find(n + "\n"), std::string::npos) << n;
  ASSERT_EQ(::write(go_pipe[1], "g", 1), 1);
  ::close(go_pipe[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (end == End::kExit) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  } else {
    EXPECT_TRUE(WIFSIGNALED(status)) << status;
  }
  const auto left = wait_until_gone(prefix);
  EXPECT_TRUE(left.empty()) << left.size() << " segment(s) of the dead child left, e.g. /dev/shm/"
                            << (left.empty() ? "" : left[0]);
  for (const auto& n : left) ::shm_unlink(("/" + n).c_str());
}

TEST(SharedStorageWatcherTest, UnnamedSegmentsGoAfterUnderscoreExit) { expect_cleaned_after(End::kExit, nullptr); }
TEST(SharedStorageWatcherTest, UnnamedSegmentsGoAfterSigkill) { expect_cleaned_after(End::kSigkill, nullptr); }
TEST(SharedStorageWatcherTest, UnnamedSegmentsGoAfterAbort) { expect_cleaned_after(End::kAbort, nullptr); }
TEST(SharedStorageWatcherTest, PipeModeAlsoCleansAfterSigkill) { expect_cleaned_after(End::kSigkill, "pipe"); }
TEST(SharedStorageWatcherTest, PipeModeAlsoCleansAfterUnderscoreExit) { expect_cleaned_after(End::kExit, "pipe"); }

// Runs `fn` in a forked child; returns its exit code (or -1 if it died).
template <typename Fn>
int in_child(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 100;
    try {
      code = fn();
    } catch (...) {
      code = 101;
    }
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool exists(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// The names must stay while their process lives: a fork()ed child of it
// ending (it inherits the watcher's pipe end in pipe mode) is no reason to
// remove them.
void expect_kept_while_alive(const char* mode) {
  EXPECT_EQ(in_child([&] {
              ::setenv("GENESIS_SHM_WATCHER", mode, 1);
              SharedStorage s({64}, DType::kFloat32);
              if (in_child([] { return 0; }) != 0) return 2;
              std::this_thread::sleep_for(std::chrono::milliseconds(300));
              return exists(s.name()) ? 0 : 1;
            }),
            0);
}

TEST(SharedStorageWatcherTest, NamesStayWhileTheProcessLives) { expect_kept_while_alive("auto"); }
TEST(SharedStorageWatcherTest, NamesStayWhileTheProcessLivesPipeMode) { expect_kept_while_alive("pipe"); }

TEST(SharedStorageWatcherTest, WatcherIsNoChildOfTheProcess) {
  // No zombie and nothing for the process's own wait() calls to find.
  EXPECT_EQ(in_child([] {
              SharedStorage s({8}, DType::kUInt8);
              errno = 0;
              const pid_t r = ::waitpid(-1, nullptr, WNOHANG | __WALL);
              return r == -1 && errno == ECHILD ? 0 : 1;
            }),
            0);
}

// The pid of the process holding a pidfd of `pid` (the watcher), or -1.
pid_t find_watcher_of(pid_t pid) {
  const std::string want = "Pid:\t" + std::to_string(pid) + "\n";
  DIR* procs = ::opendir("/proc");
  if (procs == nullptr) return -1;
  pid_t found = -1;
  while (const dirent* p = ::readdir(procs)) {
    const std::string name = p->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos || name == std::to_string(pid)) continue;
    const std::string fdinfo = "/proc/" + name + "/fdinfo";
    DIR* fds = ::opendir(fdinfo.c_str());
    if (fds == nullptr) continue;
    while (const dirent* f = ::readdir(fds)) {
      const int fd = ::open((fdinfo + "/" + f->d_name).c_str(), O_RDONLY);
      if (fd < 0) continue;
      const std::string text = read_all(fd);
      ::close(fd);
      if (text.find(want) != std::string::npos) found = static_cast<pid_t>(std::stol(name));
    }
    ::closedir(fds);
    if (found > 0) break;
  }
  ::closedir(procs);
  return found;
}

std::string read_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return {};
  std::string text = read_all(fd);
  ::close(fd);
  return text;
}

// kB after `key` in /proc/<pid>/status.
long status_kb(pid_t pid, const std::string& key) {
  const std::string text = read_text("/proc/" + std::to_string(pid) + "/status");
  const auto at = text.find(key + ":");
  return at == std::string::npos ? -1 : std::stol(text.substr(at + key.size() + 1));
}

TEST(SharedStorageWatcherTest, WatcherGivesBackTheMemoryItInherited) {
  // A process with 256 MiB of its own memory and a 32 MiB named segment
  // mapped starts its watcher; the watcher must hold neither.
  const std::string named = "/genesis-test-watcher-" + std::to_string(::getpid());
  ::shm_unlink(named.c_str());
  int report[2], go[2];
  ASSERT_EQ(::pipe(report), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(report[0]);
    ::close(go[1]);
    constexpr std::size_t kOwn = 256u << 20;
    auto* own = static_cast<unsigned char*>(
        ::mmap(nullptr, kOwn, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (own == MAP_FAILED) ::_exit(2);
    std::memset(own, 1, kOwn);
    auto* seg = new SharedStorage(SharedStorage::create(named, {32 << 20}, DType::kUInt8));
    std::memset(seg->data(), 2, seg->nbytes());
    auto* unnamed = new SharedStorage({16}, DType::kUInt8);  // starts the watcher
    (void)unnamed;
    write_all(report[1], "r");
    char c = 0;
    while (::read(go[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::_exit(own[kOwn - 1] == 1 ? 0 : 3);
  }
  ::close(report[1]);
  ::close(go[0]);
  char c = 0;
  ASSERT_EQ(::read(report[0], &c, 1), 1);
  // The watcher starts beside the child and lets go of what it inherited
  // right after: on a loaded machine both can take a while, so this polls
  // (up to 20 s) for the watcher, then for its release, before judging.
  pid_t watcher = -1;
  std::string maps;
  long watcher_anon = -1, child_anon = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (watcher <= 0) watcher = find_watcher_of(pid);
    if (watcher > 0) {
      watcher_anon = status_kb(watcher, "RssAnon");
      maps = read_text("/proc/" + std::to_string(watcher) + "/maps");
      if (watcher_anon >= 0 && watcher_anon < 32 * 1024 && maps.find(named.substr(1)) == std::string::npos) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (watcher > 0) child_anon = status_kb(pid, "RssAnon");
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::shm_unlink(named.c_str());
  ASSERT_GT(watcher, 0) << "no process holds a pidfd of the child: is pidfd_open refused here?";
  EXPECT_GE(child_anon, 256 * 1024) << "the child should hold its 256 MiB";
  EXPECT_LT(watcher_anon, 32 * 1024) << "the watcher holds " << watcher_anon << " kB of anonymous memory";
  EXPECT_EQ(maps.find(named.substr(1)), std::string::npos) << "the watcher still maps the segment:\n" << maps;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(wait_until_gone("genesis-" + std::to_string(pid) + "-").empty());
}

TEST(SharedStorageWatcherTest, UnknownWatcherSettingIsAClearError) {
  EXPECT_EQ(in_child([] {
              ::setenv("GENESIS_SHM_WATCHER", "bogus", 1);
              try {
                SharedStorage s({8}, DType::kUInt8);
              } catch (const InvalidArgumentError& e) {
                const std::string m = e.message();
                return m.find("'bogus'") != std::string::npos && m.find("'auto'") != std::string::npos ? 0 : 2;
              }
              return 1;
            }),
            0);
}

TEST(SharedStorageWatcherTest, OffLeavesCleanupToDestructors) {
  EXPECT_EQ(in_child([] {
              ::setenv("GENESIS_SHM_WATCHER", "off", 1);
              std::string name;
              {
                SharedStorage s({8}, DType::kUInt8);
                name = s.name();
                if (!exists(name)) return 1;
              }
              return exists(name) ? 2 : 0;
            }),
            0);
}

}  // namespace
}  // namespace genesis::storage
