// CPUs a process may use (cgroup CPU quotas read from fake /proc and
// /sys/fs/cgroup trees) and the thread-count setting (Note [Thread count]).
#include "genesis/core/threads.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "genesis/core/error.h"

namespace genesis {
namespace {

namespace fs = std::filesystem;

// A fake root: files written under a fresh directory, removed at the end.
class FakeRoot {
 public:
  FakeRoot() {
    char tmpl[] = "/tmp/genesis-cgroup-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = p;
  }
  ~FakeRoot() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = fs::path(dir_) / rel.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

constexpr const char* kV2Mount =
    "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CgroupCpuLimit, NoFilesMeansNoLimit) {
  FakeRoot root;
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 0);
}

TEST(CgroupCpuLimit, V2QuotaRoundsUp) {
  FakeRoot root;
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/job\n");
  root.write("/sys/fs/cgroup/job/cpu.max", "250000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 3);  // 2.5 CPUs: 3 threads
  root.write("/sys/fs/cgroup/job/cpu.max", "50000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 1);  // half a CPU: still one thread
  root.write("/sys/fs/cgroup/job/cpu.max", "400000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 4);
}

TEST(CgroupCpuLimit, V2MaxIsNoLimit) {
  FakeRoot root;
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/job\n");
  root.write("/sys/fs/cgroup/job/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 0);
}

TEST(CgroupCpuLimit, V2AncestorLimitBinds) {
  // The job's own limit is looser than its parent's: the parent's applies.
  FakeRoot root;
  root.write("/proc/self/mountinfo", kV2Mount);
  root.write("/proc/self/cgroup", "0::/slice/job/step\n");
  root.write("/sys/fs/cgroup/slice/job/step/cpu.max", "max 100000\n");
  root.write("/sys/fs/cgroup/slice/job/cpu.max", "800000 100000\n");
  root.write("/sys/fs/cgroup/slice/cpu.max", "200000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 2);
}

TEST(CgroupCpuLimit, V2InsideAContainerMount) {
  // The mount shows the container's cgroup (/docker/abc) as its root: the
  // process's path is relative to it, and the container's cpu.max sits at
  // the mount point itself.
  FakeRoot root;
  root.write("/proc/self/mountinfo",
             "40 30 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n");
  root.write("/proc/self/cgroup", "0::/docker/abc\n");
  root.write("/sys/fs/cgroup/cpu.max", "150000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 2);
}

TEST(CgroupCpuLimit, V2PathOutsideTheMountRootUsesTheMountPoint) {
  FakeRoot root;
  root.write("/proc/self/mountinfo", "40 30 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  root.write("/proc/self/cgroup", "0::/elsewhere\n");
  root.write("/sys/fs/cgroup/cpu.max", "300000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 3);
}

TEST(CgroupCpuLimit, V1CfsQuota) {
  FakeRoot root;
  root.write("/proc/self/mountinfo",
             "25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
             "26 24 0:23 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n");
  root.write("/proc/self/cgroup", "5:memory:/job\n4:cpu,cpuacct:/job\n0::/\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "150000\n");
  root.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 2);
  root.write("/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 0);
}

TEST(CgroupCpuLimit, SmallestOfV1AndV2) {
  FakeRoot root;
  root.write("/proc/self/mountinfo",
             std::string(kV2Mount) + "25 24 0:22 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  root.write("/proc/self/cgroup", "4:cpu:/a\n0::/b\n");
  root.write("/sys/fs/cgroup/b/cpu.max", "600000 100000\n");
  root.write("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "300000\n");
  root.write("/sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 3);
}

TEST(CgroupCpuLimit, EscapedMountPoint) {
  // mountinfo writes a blank as \040.
  FakeRoot root;
  root.write("/proc/self/mountinfo", "30 23 0:26 / /my\\040cgroups rw - cgroup2 cgroup2 rw\n");
  root.write("/proc/self/cgroup", "0::/\n");
  root.write("/my cgroups/cpu.max", "100000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 1);
}

TEST(CgroupCpuLimit, MalformedFilesMeanNoLimit) {
  FakeRoot root;
  root.write("/proc/self/mountinfo", std::string("garbage line\n") + kV2Mount);
  root.write("/proc/self/cgroup", "no colons here\n0::/job\n");
  for (const char* bad : {"", "abc 100000", "100000 0", "100000", "-5 100000", "99999999999999999999 1"}) {
    root.write("/sys/fs/cgroup/job/cpu.max", bad);
    EXPECT_EQ(cgroup_cpu_limit(root.dir()), 0) << "cpu.max: '" << bad << "'";
  }
}

TEST(CgroupCpuLimit, OtherControllersDoNotCount) {
  // A v1 hierarchy without the cpu controller ("cpuacct" alone, "cpuset")
  // carries no quota.
  FakeRoot root;
  root.write("/proc/self/mountinfo", "25 24 0:22 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n");
  root.write("/proc/self/cgroup", "3:cpuacct:/job\n");
  root.write("/sys/fs/cgroup/cpuacct/job/cpu.cfs_quota_us", "100000\n");
  root.write("/sys/fs/cgroup/cpuacct/job/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_limit(root.dir()), 0);
}

TEST(AvailableCpus, AtMostTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int affinity = CPU_COUNT(&set);
  const int n = available_cpus();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, affinity);
  const int quota = cgroup_cpu_limit();
  EXPECT_EQ(n, quota > 0 && quota < affinity ? quota : affinity);
}

TEST(NumThreads, SetAndGet) {
  const int before = get_num_threads();
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(before);
  EXPECT_EQ(get_num_threads(), before);
}

TEST(NumThreads, InvalidCountsAreClearErrors) {
  for (int bad : {0, -1, kMaxThreads + 1}) {
    try {
      set_num_threads(bad);
      FAIL() << "set_num_threads(" << bad << ") did not throw";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find("from 1 to 1024"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(std::to_string(bad)), std::string::npos) << e.message();
    }
  }
}

TEST(NumThreads, ParsesTheEnvironmentValue) {
  EXPECT_EQ(parse_num_threads("1"), 1);
  EXPECT_EQ(parse_num_threads("16"), 16);
  EXPECT_EQ(parse_num_threads("1024"), 1024);
  for (const char* bad : {"", "0", "-2", "1025", "4.0", " 4", "4 ", "abc", "99999999999999999999"}) {
    try {
      parse_num_threads(bad);
      FAIL() << "'" << bad << "' was accepted";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(e.message().find("GENESIS_NUM_THREADS"), std::string::npos) << e.message();
    }
  }
}

}  // namespace
}  // namespace genesis
