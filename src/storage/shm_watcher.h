// The watcher that removes a process's unnamed shared memory segments when
// the process ends, however it ends (not installed; used by SharedStorage).
//
// Note [Shared memory watcher]: an unnamed SharedStorage ("/genesis-<pid>-<n>")
// is unlinked by its destructor, but destructors do not run when a process
// leaves by _exit/os._exit, dies of a signal (SIGKILL, SIGSEGV, abort), or
// exits while daemon threads still hold Python objects; the segment then
// stays in /dev/shm, taking memory, until someone removes it. The name
// cannot simply be unlinked right after creation: other processes attach by
// name (pickling, multiprocessing spawn), at any time while the creator
// lives. So, as Python's multiprocessing resource tracker does, a small
// process outlives the creator and removes its names:
// - Started (once per process, lazily) before the first unnamed segment is
//   created, so no unnamed segment ever exists unwatched. A fork()ed child
//   that creates unnamed segments starts its own (its names carry its pid).
// - It is a grandchild made with raw clone() calls and then runs only
//   system calls it makes itself: no allocation, no lock, no libc, nothing of
//   the sanitizer runtimes, which is what a child of a multi-threaded process
//   may safely do (x86-64 and AArch64 Linux; elsewhere there is no watcher). The middle process exits at once, so the watcher is no
//   child of the user's process (no zombie, nothing for its wait() calls).
//   It starts its own session (terminal signals such as Ctrl-C do not reach
//   it), closes every inherited descriptor but the one it waits on (pipes
//   the user's process closes must really close), blocks every signal but
//   SIGTERM and SIGKILL, and uses "/" as its working directory. ps and top
//   show it as "genesis-watcher".
// - It gives back the memory the clone copied: every private writable page
//   is dropped (else it would keep the old copy of every page the process
//   changes later, up to doubling the process's memory, and the OOM killer
//   would see it as big as the process), shared mappings are unmapped (else
//   storages, mapped files and device memory the process releases would
//   stay alive). What is left is its stack and the code. The clone
//   itself copies the page tables once, like a fork, when the first unnamed
//   segment is made; there is no exec, so no helper program has to exist.
// - It waits for the end of the whole process (all threads): a pidfd of the
//   process (pidfd_open, Linux 5.3+) becomes readable then. Where pidfds are
//   refused (older kernels, seccomp), it waits for end-of-file on a pipe
//   whose write end only the process holds; a fork()ed child inherits that
//   end too, so then cleanup waits until such children have also ended.
// - Then it unlinks every "/dev/shm/genesis-<pid>-<digits>" of that pid and
//   exits. Mappings stay valid for every process still using them; only the
//   names go, which is what the destructor would have done.
// What survives: named segments (their owner decides), and unnamed ones if
// the watcher itself is killed together with the process (`kill -9` of both,
// the OOM killer choosing it) or is switched off (GENESIS_SHM_WATCHER=off).
// GENESIS_SHM_WATCHER: "auto" (default; pidfd, else pipe), "pipe" or "off".
#pragma once

#include <string>

namespace genesis::storage::detail {

/// Starts this process's watcher unless it already runs (also when an
/// earlier attempt failed: it is not retried). Thread-safe; safe to call in
/// a fork()ed child. Throws InvalidArgumentError for an unknown
/// GENESIS_SHM_WATCHER value; a watcher that cannot be started is reported
/// once on stderr and the storages work without it.
void ensure_shm_watcher();

/// The prefix of this process's generated segment names, without the
/// leading '/': "genesis-<pid>-".
std::string unnamed_shm_prefix();

}  // namespace genesis::storage::detail
