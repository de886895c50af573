#include "shm_watcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "genesis/core/error.h"
#include "shm_space.h"

// The watcher's code runs in a raw clone() of a possibly multi-threaded
// process (Note [Shared memory watcher]): it must not enter a sanitizer
// runtime, whose locks another thread may have held at the clone.
#if defined(__clang__) || defined(__GNUC__)
#define GENESIS_WATCHER_CODE __attribute__((no_sanitize("address", "thread", "undefined"), noinline))
#else
#define GENESIS_WATCHER_CODE
#endif

namespace genesis::storage::detail {

namespace {

enum class WatchMode { kAuto, kPipe, kOff };

WatchMode mode_from_env() {
  const char* v = std::getenv("GENESIS_SHM_WATCHER");
  if (v == nullptr || *v == '\0') return WatchMode::kAuto;
  const std::string_view s(v);
  if (s == "auto") return WatchMode::kAuto;
  if (s == "pipe") return WatchMode::kPipe;
  if (s == "off") return WatchMode::kOff;
  GENESIS_THROW(InvalidArgumentError, "GENESIS_SHM_WATCHER='", s,
                "' is not understood: expected 'auto' (the default), 'pipe' or 'off'");
}

#if defined(__linux__)

// Everything the watcher needs, prepared before the clone so that the
// watcher itself only makes system calls.
struct WatchPlan {
  int wait_fd = -1;     // readable when the watched process has ended
  int pipe_write = -1;  // pipe mode: the end only the watched process keeps
  char prefix[48] = {};  // "genesis-<pid>-"
  int prefix_len = 0;
  char shm_dir[16] = {};  // kShmDirectory
  std::uintptr_t tls = 0;  // where this thread's errno lives (kept mapped)
  std::uintptr_t thread_pointer = 0;  // and its thread control block
};

// The fixed part of a Linux getdents64 record.
struct Dirent64Head {
  std::uint64_t ino;
  std::int64_t off;
  unsigned short reclen;
  unsigned char type;
};
constexpr long kNameOffset = 19;  // offsetof(linux_dirent64, d_name)

[[noreturn]] GENESIS_WATCHER_CODE void raw_exit(int code) {
  for (;;) ::syscall(SYS_exit_group, code);
}

// Closes every descriptor but `keep`: descriptors inherited from the user's
// process (sockets, pipes) must close when that process closes them.
GENESIS_WATCHER_CODE void close_all_but(int keep) {
#ifdef SYS_close_range
  const bool low_ok = keep == 0 || ::syscall(SYS_close_range, 0u, static_cast<unsigned>(keep - 1), 0u) == 0;
  if (low_ok && ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0) return;
#endif
  const int dir = static_cast<int>(
      ::syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) {
    for (int fd = 0; fd < 4096; ++fd)
      if (fd != keep) ::syscall(SYS_close, fd);
    return;
  }
  alignas(8) char buf[2048];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long pos = 0; pos < n;) {
      const auto* head = reinterpret_cast<const Dirent64Head*>(buf + pos);
      const char* name = buf + pos + kNameOffset;
      int fd = 0;
      bool number = *name != '\0';
      for (const char* c = name; *c != '\0'; ++c) {
        if (*c < '0' || *c > '9') number = false;
        fd = fd * 10 + (*c - '0');
      }
      if (number && fd != keep && fd != dir) ::syscall(SYS_close, fd);
      pos += head->reclen;
    }
  }
  ::syscall(SYS_close, dir);
}

// Parses the hexadecimal number at `p`; leaves `p` after it.
GENESIS_WATCHER_CODE std::uintptr_t parse_hex(const char*& p, const char* end) {
  std::uintptr_t v = 0;
  for (; p < end; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9') {
      v = v * 16 + static_cast<std::uintptr_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = v * 16 + static_cast<std::uintptr_t>(c - 'a' + 10);
    } else {
      break;
    }
  }
  return v;
}

// Gives back what the clone inherited from the user's process (Note [Shared
// memory watcher]): private anonymous memory is dropped (the watcher would
// otherwise keep the old copy of every page the process changes later, up
// to all of its memory), shared mappings are unmapped (they would keep
// storages, files and device memory alive after the process let go of
// them). Kept: file-backed private mappings (code, and the resolved entry of
// syscall() in the global offset table), the stack in use, and the pages
// around `keep_a` and `keep_b` (the thread's TLS and thread pointer: errno,
// the stack-protector canary).
GENESIS_WATCHER_CODE void release_inherited_memory(std::uintptr_t keep_a, std::uintptr_t keep_b) {
  constexpr std::uintptr_t kPage = 4096, kMargin = 64 << 10;
  const auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  const std::uintptr_t keep_min = keep_a < keep_b ? keep_a : keep_b;
  const std::uintptr_t keep_max = keep_a < keep_b ? keep_b : keep_a;
  const std::uintptr_t keep_lo = (keep_min > kMargin ? keep_min - kMargin : 0) & ~(kPage - 1);
  const std::uintptr_t keep_hi = (keep_max + kMargin) & ~(kPage - 1);
  std::size_t cap = std::size_t{1} << 20;
  void* mem = reinterpret_cast<void*>(
      ::syscall(SYS_mmap, nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return;
  char* buf = static_cast<char*>(mem);
  const int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) {
    ::syscall(SYS_munmap, buf, cap);
    return;
  }
  std::size_t len = 0;
  for (;;) {
    if (len == cap) {
      if (cap >= (std::size_t{64} << 20)) break;  // more than any real map list; use what was read
      void* grown = reinterpret_cast<void*>(::syscall(SYS_mremap, buf, cap, cap * 2, MREMAP_MAYMOVE));
      if (grown == MAP_FAILED) break;
      buf = static_cast<char*>(grown);
      cap *= 2;
    }
    const long n = ::syscall(SYS_read, fd, buf + len, cap - len);
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  ::syscall(SYS_close, fd);
  const auto buf_lo = reinterpret_cast<std::uintptr_t>(buf);
  const std::uintptr_t buf_hi = buf_lo + cap;
  const char* end = buf + len;
  for (const char* line = buf; line < end;) {
    const char* eol = line;
    while (eol < end && *eol != '\n') ++eol;
    // "start-end perms offset dev inode [path]"
    const char* p = line;
    const std::uintptr_t lo = parse_hex(p, eol);
    if (p < eol && *p == '-') ++p;
    const std::uintptr_t hi = parse_hex(p, eol);
    while (p < eol && *p == ' ') ++p;
    const char* perms = p;
    bool whole = eol - perms >= 4;
    for (int field = 0; field < 3 && p < eol; ++field) {  // perms, offset, dev
      while (p < eol && *p != ' ') ++p;
      while (p < eol && *p == ' ') ++p;
    }
    std::uintptr_t inode = 0;
    for (; p < eol && *p >= '0' && *p <= '9'; ++p) inode = inode * 10 + static_cast<std::uintptr_t>(*p - '0');
    while (p < eol && *p == ' ') ++p;
    const bool special = p + 1 < eol && p[0] == '[' && p[1] == 'v';  // [vdso], [vvar], [vsyscall]
    line = eol + 1;
    if (!whole || hi <= lo || special) continue;
    if (lo < buf_hi && buf_lo < hi) continue;  // the list itself
    if (lo <= sp && sp < hi) continue;         // the stack in use
    if (perms[3] == 's') {
      ::syscall(SYS_munmap, lo, hi - lo);
    } else if (perms[1] == 'w' && inode == 0) {
      if (keep_lo < hi && lo < keep_hi) {
        if (lo < keep_lo) ::syscall(SYS_madvise, lo, keep_lo - lo, MADV_DONTNEED);
        if (keep_hi < hi) ::syscall(SYS_madvise, keep_hi, hi - keep_hi, MADV_DONTNEED);
      } else {
        ::syscall(SYS_madvise, lo, hi - lo, MADV_DONTNEED);
      }
    }
  }
  ::syscall(SYS_munmap, buf, cap);
}

// Unlinks every "<prefix><digits>" in the shared memory directory. Returns
// how many it removed.
GENESIS_WATCHER_CODE int remove_segments(const WatchPlan& plan) {
  const int dir = static_cast<int>(
      ::syscall(SYS_openat, AT_FDCWD, plan.shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return 0;
  int removed = 0;
  alignas(8) char buf[4096];
  // A second pass finds nothing unless entries moved while the first ran.
  for (int pass = 0; pass < 4; ++pass) {
    int this_pass = 0;
    ::syscall(SYS_lseek, dir, 0L, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (n <= 0) break;
      for (long pos = 0; pos < n;) {
        const auto* head = reinterpret_cast<const Dirent64Head*>(buf + pos);
        const char* name = buf + pos + kNameOffset;
        bool match = true;
        int i = 0;
        for (; i < plan.prefix_len; ++i) {
          if (name[i] != plan.prefix[i]) {
            match = false;
            break;
          }
        }
        if (match) {
          match = name[i] != '\0';
          for (const char* c = name + i; *c != '\0'; ++c)
            if (*c < '0' || *c > '9') match = false;
        }
        if (match && ::syscall(SYS_unlinkat, dir, name, 0) == 0) ++this_pass;
        pos += head->reclen;
      }
    }
    removed += this_pass;
    if (this_pass == 0) break;
  }
  ::syscall(SYS_close, dir);
  return removed;
}

[[noreturn]] GENESIS_WATCHER_CODE void watcher_main(const WatchPlan& plan) {
  // Copied to this stack first: the memory the plan sits in may be dropped.
  const WatchPlan own = plan;
  // Its name in ps and top (its command line is the process's).
  ::syscall(SYS_prctl, PR_SET_NAME, "genesis-watcher", 0L, 0L, 0L);
  ::syscall(SYS_chdir, "/");
  close_all_but(own.wait_fd);
  release_inherited_memory(own.tls, own.thread_pointer);
  // Only SIGTERM (and SIGKILL) may end the watcher; SIGTERM gets its default
  // action back, since a handler inherited from the user's process would
  // run code that is not there any more (descriptors closed) or not meant
  // for this process.
#if defined(__x86_64__) || defined(__aarch64__)
  struct KernelSigaction {
    void* handler;
    unsigned long flags;
    void* restorer;
    std::uint64_t mask;
  } dfl{};  // SIG_DFL is 0
  ::syscall(SYS_rt_sigaction, SIGTERM, &dfl, nullptr, sizeof(std::uint64_t));
#endif
  const std::uint64_t blocked = ~std::uint64_t{0} & ~(std::uint64_t{1} << (SIGTERM - 1));
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &blocked, nullptr, sizeof blocked);
  struct pollfd pfd {};
  pfd.fd = own.wait_fd;
  pfd.events = POLLIN;
  for (;;) {
    pfd.revents = 0;
    const long r = ::syscall(SYS_ppoll, &pfd, 1, nullptr, nullptr, sizeof(std::uint64_t));
    if (r > 0) break;
    // Unable to wait: leave the names alone rather than remove live ones.
    if (r < 0 && errno != EINTR) raw_exit(1);
  }
  remove_segments(own);
  raw_exit(0);
}

// The middle process: a new session, then the watcher, then gone.
[[noreturn]] GENESIS_WATCHER_CODE void middle_main(const WatchPlan& plan) {
  if (plan.pipe_write >= 0) ::syscall(SYS_close, plan.pipe_write);
  ::syscall(SYS_setsid);
  if (::syscall(SYS_clone, static_cast<unsigned long>(SIGCHLD), 0L, 0L, 0L, 0L) == 0) watcher_main(plan);
  raw_exit(0);
}

void warn(const char* what, int err) {
  std::fprintf(stderr,
               "genesis: warning: could not start the shared memory watcher (%s: %s); unnamed SharedStorage "
               "segments of this process are removed by their destructors only, not if it is killed\n",
               what, std::strerror(err));
}

void start_watcher(int self, WatchMode mode) {
  WatchPlan plan;
  plan.prefix_len = std::snprintf(plan.prefix, sizeof plan.prefix, "genesis-%d-", self);
  std::snprintf(plan.shm_dir, sizeof plan.shm_dir, "%s", kShmDirectory);
  // Taking errno's address also binds __errno_location and syscall() below
  // (lazy binding would need the dynamic linker's data in the watcher).
  plan.tls = reinterpret_cast<std::uintptr_t>(&errno);
  plan.thread_pointer = reinterpret_cast<std::uintptr_t>(__builtin_thread_pointer());
  (void)::syscall(SYS_getpid);
#ifdef SYS_pidfd_open
  if (mode == WatchMode::kAuto) plan.wait_fd = static_cast<int>(::syscall(SYS_pidfd_open, self, 0));
#endif
  if (plan.wait_fd < 0) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return warn("pipe2", errno);
    plan.wait_fd = p[0];
    plan.pipe_write = p[1];
  }
  // Exit signal 0: the middle process is no child that a SIGCHLD handler or
  // a waitpid(-1) of the user's code could see or reap.
  const long mid = ::syscall(SYS_clone, 0L, 0L, 0L, 0L, 0L);
  if (mid == 0) middle_main(plan);
  const int err = errno;
  ::close(plan.wait_fd);
  if (mid < 0) {
    if (plan.pipe_write >= 0) ::close(plan.pipe_write);
    return warn("clone", err);
  }
  int status = 0;
  while (::waitpid(static_cast<pid_t>(mid), &status, __WALL) < 0 && errno == EINTR) {
  }
  // pipe_write stays open for the rest of the process on purpose: the
  // kernel closes it when the process ends, which is what the watcher waits
  // for.
}

#else  // not Linux: no watcher; destructors unlink.

void start_watcher(int, WatchMode) {}

#endif

std::atomic<int> g_started_for{0};  // pid whose watcher was started (or tried)
std::atomic<int> g_starting_in{0};  // pid in which a thread is starting it

}  // namespace

std::string unnamed_shm_prefix() { return genesis::detail::str_cat("genesis-", ::getpid(), "-"); }

void ensure_shm_watcher() {
  // Pids, not flags: a fork()ed child sees its parent's pid in both and
  // starts its own watcher, even if the fork came while a parent thread was
  // starting one (a lock held then would never be released in the child).
  const int self = static_cast<int>(::getpid());
  if (g_started_for.load(std::memory_order_acquire) == self) return;
  const WatchMode mode = mode_from_env();
  int seen = g_starting_in.load(std::memory_order_acquire);
  for (;;) {
    if (g_started_for.load(std::memory_order_acquire) == self) return;
    if (seen != self) {
      if (g_starting_in.compare_exchange_weak(seen, self, std::memory_order_acq_rel)) {
        if (mode != WatchMode::kOff) start_watcher(self, mode);
        g_started_for.store(self, std::memory_order_release);
        return;
      }
      continue;
    }
    std::this_thread::yield();  // another thread of this process is starting it
    seen = g_starting_in.load(std::memory_order_acquire);
  }
}

}  // namespace genesis::storage::detail
