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
// It also makes its system calls itself (sys() below), not through libc's
// syscall(): that one is reached through the global offset table and sets
// errno in thread-local storage, both memory the watcher gives back (Note
// [Shared memory watcher]). Without the stack protector it reads no TLS.
#if defined(__has_attribute)
#if __has_attribute(no_stack_protector)
#define GENESIS_WATCHER_NO_SSP no_stack_protector,
#endif
#endif
#ifndef GENESIS_WATCHER_NO_SSP
#define GENESIS_WATCHER_NO_SSP
#endif
// Clang keeps TSan's function entry and exit hooks (which read TLS) under
// no_sanitize("thread"); this attribute removes every hook. GCC drops them
// with no_sanitize alone.
#if defined(__has_attribute)
#if __has_attribute(disable_sanitizer_instrumentation)
#define GENESIS_WATCHER_NO_HOOKS disable_sanitizer_instrumentation,
#endif
#endif
#ifndef GENESIS_WATCHER_NO_HOOKS
#define GENESIS_WATCHER_NO_HOOKS
#endif
#define GENESIS_WATCHER_CODE \
  __attribute__((GENESIS_WATCHER_NO_SSP GENESIS_WATCHER_NO_HOOKS no_sanitize("address", "thread", "undefined"), noinline))

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define GENESIS_HAVE_SHM_WATCHER 1
#else
#define GENESIS_HAVE_SHM_WATCHER 0
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

#if GENESIS_HAVE_SHM_WATCHER

// A system call made directly: returns the result, or -errno.
__attribute__((always_inline, no_sanitize("address", "thread", "undefined"))) inline long sys(
    long n, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0, long a6 = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#else
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a1;
  register long x1 __asm__("x1") = a2;
  register long x2 __asm__("x2") = a3;
  register long x3 __asm__("x3") = a4;
  register long x4 __asm__("x4") = a5;
  register long x5 __asm__("x5") = a6;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
  return x0;
#endif
}

// Pointers and sizes as system call arguments.
#define GENESIS_SYS_ARG(v) static_cast<long>((std::uintptr_t)(v))

// Everything the watcher needs, prepared before the clone so that the
// watcher itself only makes system calls.
struct WatchPlan {
  int wait_fd = -1;     // readable when the watched process has ended
  int pipe_write = -1;  // pipe mode: the end only the watched process keeps
  char prefix[48] = {};  // "genesis-<pid>-"
  int prefix_len = 0;
  char shm_dir[16] = {};  // kShmDirectory
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
  for (;;) sys(SYS_exit_group, code);
}

// Closes every descriptor but `keep`: descriptors inherited from the user's
// process (sockets, pipes) must close when that process closes them.
GENESIS_WATCHER_CODE void close_all_but(int keep) {
#ifdef SYS_close_range
  const bool low_ok = keep == 0 || sys(SYS_close_range, 0, keep - 1, 0) == 0;
  if (low_ok && sys(SYS_close_range, keep + 1, static_cast<long>(~0u), 0) == 0) return;
#endif
  const int dir = static_cast<int>(
      sys(SYS_openat, AT_FDCWD, GENESIS_SYS_ARG("/proc/self/fd"), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) {
    for (int fd = 0; fd < 4096; ++fd)
      if (fd != keep) sys(SYS_close, fd);
    return;
  }
  alignas(8) char buf[2048];
  for (;;) {
    const long n = sys(SYS_getdents64, dir, GENESIS_SYS_ARG(buf), sizeof buf);
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
      if (number && fd != keep && fd != dir) sys(SYS_close, fd);
      pos += head->reclen;
    }
  }
  sys(SYS_close, dir);
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
// memory watcher]): every private writable page is dropped (the watcher
// would otherwise keep the old copy of every page the process changes later,
// up to all of its memory: heap, anonymous mappings, libraries' data), and
// shared mappings are unmapped (they would keep storages, files and device
// memory alive after the process let go of them). Kept: the stack in use,
// and read-only or executable file mappings (the code, which the page cache
// shares anyway).
GENESIS_WATCHER_CODE void release_inherited_memory() {
  const auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  std::size_t cap = std::size_t{1} << 20;
  long got = sys(SYS_mmap, 0, static_cast<long>(cap), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (got < 0 && got > -4096) return;
  char* buf = reinterpret_cast<char*>(got);
  const int fd = static_cast<int>(sys(SYS_openat, AT_FDCWD, GENESIS_SYS_ARG("/proc/self/maps"), O_RDONLY | O_CLOEXEC));
  if (fd < 0) {
    sys(SYS_munmap, GENESIS_SYS_ARG(buf), static_cast<long>(cap));
    return;
  }
  std::size_t len = 0;
  for (;;) {
    if (len == cap) {
      if (cap >= (std::size_t{64} << 20)) break;  // more than any real map list; use what was read
      got = sys(SYS_mremap, GENESIS_SYS_ARG(buf), static_cast<long>(cap), static_cast<long>(cap * 2), MREMAP_MAYMOVE);
      if (got < 0 && got > -4096) break;
      buf = reinterpret_cast<char*>(got);
      cap *= 2;
    }
    const long n = sys(SYS_read, fd, GENESIS_SYS_ARG(buf + len), static_cast<long>(cap - len));
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  sys(SYS_close, fd);
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
    const bool whole = eol - perms >= 4;
    for (int field = 0; field < 4 && p < eol; ++field) {  // perms, offset, dev, inode
      while (p < eol && *p != ' ') ++p;
      while (p < eol && *p == ' ') ++p;
    }
    const bool special = p + 1 < eol && p[0] == '[' && p[1] == 'v';  // [vdso], [vvar], [vsyscall]
    line = eol + 1;
    if (!whole || hi <= lo || special) continue;
    if (lo < buf_hi && buf_lo < hi) continue;  // the list itself
    if (lo <= sp && sp < hi) continue;         // the stack in use
    if (perms[3] == 's') {
      sys(SYS_munmap, static_cast<long>(lo), static_cast<long>(hi - lo));
    } else if (perms[1] == 'w') {
      sys(SYS_madvise, static_cast<long>(lo), static_cast<long>(hi - lo), MADV_DONTNEED);
    }
  }
  sys(SYS_munmap, GENESIS_SYS_ARG(buf), static_cast<long>(cap));
}

// Unlinks every "<prefix><digits>" in the shared memory directory.
GENESIS_WATCHER_CODE void remove_segments(const WatchPlan& plan) {
  const int dir = static_cast<int>(
      sys(SYS_openat, AT_FDCWD, GENESIS_SYS_ARG(plan.shm_dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return;
  alignas(8) char buf[4096];
  // A second pass finds nothing unless entries moved while the first ran.
  for (int pass = 0; pass < 4; ++pass) {
    int removed = 0;
    sys(SYS_lseek, dir, 0, SEEK_SET);
    for (;;) {
      const long n = sys(SYS_getdents64, dir, GENESIS_SYS_ARG(buf), sizeof buf);
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
        if (match && sys(SYS_unlinkat, dir, GENESIS_SYS_ARG(name), 0) == 0) ++removed;
        pos += head->reclen;
      }
    }
    if (removed == 0) break;
  }
  sys(SYS_close, dir);
}

[[noreturn]] GENESIS_WATCHER_CODE void watcher_main(const WatchPlan& plan) {
  // Copied to this stack first: the memory the plan sits in may be dropped.
  WatchPlan own;
  own.wait_fd = plan.wait_fd;
  own.pipe_write = plan.pipe_write;
  own.prefix_len = plan.prefix_len;
  for (std::size_t i = 0; i < sizeof own.prefix; ++i) own.prefix[i] = plan.prefix[i];
  for (std::size_t i = 0; i < sizeof own.shm_dir; ++i) own.shm_dir[i] = plan.shm_dir[i];
  // Its name in ps and top (its command line is the process's).
  const char comm[16] = {'g', 'e', 'n', 'e', 's', 'i', 's', '-', 'w', 'a', 't', 'c', 'h', 'e', 'r', '\0'};
  sys(SYS_prctl, PR_SET_NAME, GENESIS_SYS_ARG(comm), 0, 0, 0);
  sys(SYS_chdir, GENESIS_SYS_ARG("/"));
  close_all_but(own.wait_fd);
  release_inherited_memory();
  // Only SIGTERM (and SIGKILL) may end the watcher; SIGTERM gets its default
  // action back, since a handler inherited from the user's process would
  // run that process's code in a process that is not it.
  struct KernelSigaction {
    void* handler;
    unsigned long flags;
    void* restorer;
    std::uint64_t mask;
  } dfl{nullptr, 0, nullptr, 0};  // SIG_DFL is 0
  sys(SYS_rt_sigaction, SIGTERM, GENESIS_SYS_ARG(&dfl), 0, sizeof(std::uint64_t));
  const std::uint64_t blocked = ~std::uint64_t{0} & ~(std::uint64_t{1} << (SIGTERM - 1));
  sys(SYS_rt_sigprocmask, SIG_SETMASK, GENESIS_SYS_ARG(&blocked), 0, sizeof blocked);
  struct pollfd pfd {};
  pfd.fd = own.wait_fd;
  pfd.events = POLLIN;
  for (;;) {
    pfd.revents = 0;
    const long r = sys(SYS_ppoll, GENESIS_SYS_ARG(&pfd), 1, 0, 0, sizeof(std::uint64_t));
    if (r > 0) break;
    // Unable to wait: leave the names alone rather than remove live ones.
    if (r < 0 && r != -EINTR) raw_exit(1);
  }
  remove_segments(own);
  raw_exit(0);
}

// The middle process: a new session, then the watcher, then gone.
[[noreturn]] GENESIS_WATCHER_CODE void middle_main(const WatchPlan& plan) {
  if (plan.pipe_write >= 0) sys(SYS_close, plan.pipe_write);
  sys(SYS_setsid);
  if (sys(SYS_clone, SIGCHLD, 0, 0, 0, 0) == 0) watcher_main(plan);
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

#else  // no watcher here (only x86-64 and AArch64 Linux): destructors unlink.

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
