// CPUs this process may use: affinity and cgroup CPU quotas (Note [Thread
// count] in genesis/core/threads.h).
//
// Where the limit files are: /proc/self/cgroup names the process's cgroup
// per hierarchy ("0::/user.slice/x" for v2, "4:cpu,cpuacct:/docker/abc" for
// v1), and /proc/self/mountinfo where each hierarchy is mounted and which of
// its directories the mount shows (inside a container the mount's root is
// the container's own cgroup, so the path must be taken relative to it). A
// path outside the mount's root (a cgroup namespace moved the process)
// falls back to the mount point itself.
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/threads.h"

namespace genesis {
namespace {

bool read_first_line(const std::string& path, std::string& line) {
  std::ifstream f(path);
  return static_cast<bool>(f) && static_cast<bool>(std::getline(f, line));
}

// A whole number, or nothing (so that "max", "-1" and junk read as no limit).
bool parse_positive(const std::string& s, long long& out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  out = std::stoll(s);
  return out > 0;
}

int ceil_ratio(long long quota, long long period) {
  const long long n = (quota + period - 1) / period;
  return static_cast<int>(std::min<long long>(std::max<long long>(n, 1), 1 << 30));
}

// cgroup v2: "max 100000" (no limit) or "<quota> <period>".
int v2_limit(const std::string& dir) {
  std::string line;
  if (!read_first_line(dir + "/cpu.max", line)) return 0;
  std::istringstream in(line);
  std::string quota, period;
  in >> quota >> period;
  long long q = 0, p = 0;
  if (!parse_positive(quota, q) || !parse_positive(period, p)) return 0;
  return ceil_ratio(q, p);
}

// cgroup v1: cpu.cfs_quota_us is -1 without a limit.
int v1_limit(const std::string& dir) {
  std::string quota, period;
  if (!read_first_line(dir + "/cpu.cfs_quota_us", quota) || !read_first_line(dir + "/cpu.cfs_period_us", period)) {
    return 0;
  }
  long long q = 0, p = 0;
  if (!parse_positive(quota, q) || !parse_positive(period, p)) return 0;
  return ceil_ratio(q, p);
}

// mountinfo escapes blanks and backslashes in paths as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto octal = [&](std::size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

struct Mount {
  std::string root;   // the directory of the hierarchy the mount shows
  std::string point;  // where it is mounted
  bool v2 = false;
};

// cgroup mounts that carry the cpu controller (v1) or the unified hierarchy (v2).
std::vector<Mount> cgroup_mounts(const std::string& root) {
  std::vector<Mount> out;
  std::ifstream f(root + "/proc/self/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash)), post(line.substr(dash + 3));
    std::string id, parent, dev, mroot, point, fstype, source, options;
    if (!(pre >> id >> parent >> dev >> mroot >> point) || !(post >> fstype >> source >> options)) continue;
    Mount m{unescape(mroot), unescape(point), fstype == "cgroup2"};
    if (!m.v2) {
      if (fstype != "cgroup") continue;
      bool cpu = false;
      std::istringstream opts(options);
      for (std::string o; std::getline(opts, o, ',');) cpu = cpu || o == "cpu";
      if (!cpu) continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The process's cgroup path in the v2 hierarchy ("0::/path") or in the v1
// hierarchy that has the cpu controller ("N:cpu,cpuacct:/path").
bool own_cgroup(const std::string& root, bool v2, std::string& path) {
  std::ifstream f(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const std::size_t a = line.find(':');
    const std::size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    bool match = false;
    if (v2) {
      match = line.compare(0, a, "0") == 0 && controllers.empty();
    } else {
      std::istringstream c(controllers);
      for (std::string one; std::getline(c, one, ',');) match = match || one == "cpu";
    }
    if (match) {
      path = line.substr(b + 1);
      return true;
    }
  }
  return false;
}

// The smallest limit of `dir` and its ancestors up to `top`.
int limit_up_to(const std::string& top, std::string rel, bool v2) {
  int best = 0;
  for (;;) {
    while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
    const std::string dir = rel.empty() || rel == "/" ? top : top + rel;
    const int l = v2 ? v2_limit(dir) : v1_limit(dir);
    if (l > 0 && (best == 0 || l < best)) best = l;
    if (rel.empty() || rel == "/") return best;
    const std::size_t slash = rel.find_last_of('/');
    rel = slash == std::string::npos ? std::string() : rel.substr(0, slash);
  }
}

int affinity_cpus() {
  // A set sized for large machines: the fixed cpu_set_t stops at 1024 CPUs.
  for (int n = 1024; n <= (1 << 16); n *= 4) {
    cpu_set_t* set = CPU_ALLOC(static_cast<std::size_t>(n));
    if (set == nullptr) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(static_cast<std::size_t>(n));
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      const int count = CPU_COUNT_S(bytes, set);
      CPU_FREE(set);
      return count;
    }
    const int err = errno;
    CPU_FREE(set);
    if (err != EINVAL) break;  // EINVAL: the kernel's mask is larger, retry
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int cgroup_cpu_limit(const std::string& root) {
  int best = 0;
  for (const Mount& m : cgroup_mounts(root)) {
    std::string path;
    if (!own_cgroup(root, m.v2, path)) continue;
    std::string rel;
    if (m.root == "/") {
      rel = path;
    } else if (path.compare(0, m.root.size(), m.root) == 0 &&
               (path.size() == m.root.size() || path[m.root.size()] == '/')) {
      rel = path.substr(m.root.size());
    }  // else: outside the mount's root; the mount point itself is ours
    const int l = limit_up_to(root + m.point, rel, m.v2);
    if (l > 0 && (best == 0 || l < best)) best = l;
  }
  return best;
}

int available_cpus() {
  int n = affinity_cpus();
  const int quota = cgroup_cpu_limit();
  if (quota > 0 && (n <= 0 || quota < n)) n = quota;
  return std::max(n, 1);
}

}  // namespace genesis
