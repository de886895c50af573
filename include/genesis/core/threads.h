// How many CPU threads Genesis uses, and how many CPUs it may use at all.
//
// Note [Thread count]: std::thread::hardware_concurrency() counts the
// machine's CPUs, not the ones this process may run on. In a container
// limited to 2 CPUs of a 128-CPU host (a cgroup CPU quota), or under
// `taskset`, a pool of 128 threads time-slices on 2 CPUs: every parallel
// operation then waits for preempted workers. So the default is
//   min(CPUs in the affinity mask (sched_getaffinity),
//       cgroup v2 cpu.max quota / period, rounded up,
//       cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up),
// over the process's cgroup and every ancestor (a parent's limit binds its
// children), capped at kDefaultMaxThreads. GENESIS_NUM_THREADS replaces the
// default; set_num_threads() replaces both (torch.set_num_threads). The CPU
// tensor backend splits work over get_num_threads() threads; large host
// copies use at most that many.
#pragma once

#include <string>

namespace genesis {

/// Most threads set_num_threads() and GENESIS_NUM_THREADS accept.
inline constexpr int kMaxThreads = 1024;
/// Most threads the default picks (more rarely pays for element-wise work).
inline constexpr int kDefaultMaxThreads = 64;

/// CPUs this process may run on (Note [Thread count]); at least 1.
int available_cpus();

/// The cgroup CPU limit (quota / period rounded up) of the calling process,
/// the smallest over its cgroup v1 and v2 directories and their ancestors;
/// 0 when there is none. Reads `root` + "/proc/self/mountinfo",
/// `root` + "/proc/self/cgroup" and the limit files under the mount points
/// they name (prefixed by `root`): tests pass a directory of fake files.
/// Unreadable or malformed files count as "no limit".
int cgroup_cpu_limit(const std::string& root = "");

/// Threads the CPU backend uses from now on (this process; a forked child
/// inherits it). InvalidArgumentError unless 1 <= n <= kMaxThreads.
void set_num_threads(int n);

/// The thread count in effect: set_num_threads(), else GENESIS_NUM_THREADS,
/// else the default of Note [Thread count]. InvalidArgumentError when
/// GENESIS_NUM_THREADS is set to anything but a whole number in
/// [1, kMaxThreads] (and set_num_threads() was not called).
int get_num_threads();

/// Parses a GENESIS_NUM_THREADS value (exposed for tests): the count, or
/// InvalidArgumentError naming the variable and the accepted range.
int parse_num_threads(const std::string& text);

}  // namespace genesis
