// The process sources: another process watched from outside (NVML's
// per-process used memory, /proc, and the figures a Genesis process
// publishes: Note [Published figures] in publish.h), and a child process
// started for the purpose (Note [Memory sources]).
//
// Note [Watched processes]: the devices are the GPUs NVML sees (or those
// asked for), or "host" alone when there is none (no driver, no GPU): the
// process's resident memory against the machine's. A GPU sample takes the
// process's used memory from NVML (matched by pid; 0 when it holds none)
// and, when the process publishes a device of the same id ("0", "1", ...:
// its CUDA ordinals, the same as NVML's indices unless CUDA_VISIBLE_DEVICES
// or CUDA_DEVICE_ORDER reorder them), the allocator's exact figures. The
// process has ended when it is gone, a zombie, or its pid now belongs to
// another process (its start time changed); a child is reaped with
// waitpid, so it never stays a zombie.
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "genesis/core/error.h"
#include "genesis/debug/memory_source.h"
#include "genesis/memory/publish.h"
#include "nvml_loader.h"
#include "source_util.h"

extern char** environ;

namespace genesis::debug {

namespace {

// VmRSS of /proc/<pid>/status in bytes; 0 when it cannot be read (gone,
// a kernel thread, no /proc).
std::uint64_t host_rss(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 6, "VmRSS:") != 0) continue;
    std::istringstream fields(line.substr(6));
    std::uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

// MemTotal of /proc/meminfo in bytes (0 when unknown).
std::uint64_t host_total() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 9, "MemTotal:") != 0) continue;
    std::istringstream fields(line.substr(9));
    std::uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

// State (field 3) and start time (field 22) of /proc/<pid>/stat.

bool process_exists(int pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

}  // namespace

// Another process (Note [Watched processes]).
class ProcessMemorySource : public MemorySource {
 public:
  ProcessMemorySource(int pid, const std::vector<int>& gpus) : pid_(pid) {
    GENESIS_CHECK(pid > 0, "invalid pid ", pid, ": expected a process id > 0");
    GENESIS_CHECK(process_exists(pid), "no process with pid ", pid);
    char state = '?';
    if (!memory::detail::read_proc_stat(pid, start_ticks_, state)) start_ticks_ = 0;
    if (nvml_available()) {
      session_ = std::make_unique<nvml::Session>();
      gpus_ = nvml::open_gpus(*session_, gpus);
    } else if (!gpus.empty()) {
      GENESIS_THROW(InvalidArgumentError, "GPU ", gpus.front(), ": NVML is not available on this machine, ",
                    "so process ", pid, " can only be watched on device 'host'");
    }
    for (const nvml::Gpu& g : gpus_) devices_.push_back(SourceDevice{std::to_string(g.index), g.name, g.total});
    if (gpus_.empty()) devices_.push_back(SourceDevice{"host", "host memory", host_total()});
    peaks_.resize(devices_.size());
    // The first look at the published peaks, so that peaks from before the
    // source opened are not reported as peaks seen while it was open.
    if (const auto published = memory::read_published(pid_)) {
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        if (const memory::PublishedDevice* d = published->find(devices_[i].id)) {
          MemorySample ignored;
          fill_exact(ignored, *d, peaks_[i]);
        }
      }
    }
  }

  std::string describe() const override {
    std::string parts = gpus_.empty() ? "host" : "nvml";
    if (published_seen_.load(std::memory_order_relaxed)) parts += " + genesis";
    return what() + " (" + parts + ")";
  }

  std::vector<SourceDevice> devices() const override { return devices_; }

  MemorySample sample(const std::string& device) override {
    const std::size_t i = index(device);
    MemorySample s;
    s.time_ns = now_ns();
    s.total = devices_[i].total;
    s.host_rss = host_rss(pid_);
    const std::optional<memory::PublishedFigures> published = read_published_figures();
    const memory::PublishedDevice* exact = published ? published->find(device) : nullptr;
    if (i < gpus_.size()) {
      std::optional<std::uint64_t> used = process_gpu_used(gpus_[i]);
      if (exact != nullptr) {
        fill_exact(s, *exact, peaks_[i]);
        s.used = used.value_or(exact->reserved);
      } else {
        s.used = used.value_or(0);
        s.allocated = s.reserved = s.active = s.used;
      }
    } else {  // "host"
      s.used = s.host_rss;
      if (exact != nullptr) {
        fill_exact(s, *exact, peaks_[i]);
      } else {
        s.allocated = s.reserved = s.active = s.host_rss;
      }
    }
    source_util::set_free(s);
    return s;
  }

  bool has_sites() const override { return sites_seen_.load(std::memory_order_relaxed); }
  bool samples_after_end() const override { return false; }

  std::vector<SiteStat> sites(const std::string& device) override {
    (void)index(device);
    const std::optional<memory::PublishedFigures> published = read_published_figures();
    const memory::PublishedDevice* d = published ? published->find(device) : nullptr;
    if (d == nullptr || !d->has_sites) return {};
    return source_util::sites_of(d->sites);
  }

  std::uint64_t now_ns() const override { return source_util::steady_now_ns(); }

  bool advance_to(std::uint64_t time_ns, const StopFlag& stop) override {
    return source_util::sleep_until_steady(time_ns, stop, [this] { return !ended(); }) && !ended();
  }

  bool ended() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!exited_) exited_ = poll_exit_locked();
    return exited_;
  }

  std::string end_reason() const override {
    if (!ended()) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    return exit_text_locked();
  }

  int pid() const noexcept { return pid_; }

 protected:
  virtual std::string what() const { return "pid " + std::to_string(pid_); }
  // Whether the process has ended; under mutex_.
  virtual bool poll_exit_locked() const {
    if (!process_exists(pid_)) return true;
    char state = '?';
    std::uint64_t start = 0;
    if (!memory::detail::read_proc_stat(pid_, start, state)) return !process_exists(pid_);
    return state == 'Z' || state == 'X' || (start_ticks_ != 0 && start != start_ticks_);
  }
  virtual std::string exit_text_locked() const { return "process " + std::to_string(pid_) + " exited"; }

  const int pid_;
  mutable std::mutex mutex_;  // exited_ and what subclasses keep about the exit
  mutable bool exited_ = false;

 private:
  std::size_t index(const std::string& device) const {
    for (std::size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i].id == device) return i;
    source_util::throw_unknown_device(device, describe(), devices_);
  }

  std::optional<memory::PublishedFigures> read_published_figures() {
    std::optional<memory::PublishedFigures> p = memory::read_published(pid_);
    if (p) {
      published_seen_.store(true, std::memory_order_relaxed);
      for (const memory::PublishedDevice& d : p->devices)
        if (d.has_sites) sites_seen_.store(true, std::memory_order_relaxed);
    }
    return p;
  }

  void fill_exact(MemorySample& s, const memory::PublishedDevice& d, source_util::PeakTracker& peaks) {
    s.allocated = d.allocated;
    s.reserved = d.reserved;
    s.active = d.active;
    s.cached = d.cached;
    s.largest_free_block = d.largest_free_block;
    s.num_ooms = d.num_ooms;
    s.num_allocs = d.num_allocs;
    s.exact = true;
    std::lock_guard<std::mutex> lock(peaks_mutex_);
    peaks.observe(s, d.peak_allocated, d.peak_reserved);
  }

  // NVML's used memory of this process on `gpu` (0 when it has none there);
  // nullopt when the driver does not say.
  std::optional<std::uint64_t> process_gpu_used(const nvml::Gpu& gpu) const {
    std::vector<std::pair<unsigned, unsigned long long>> procs;
    if (!nvml::running_processes(session_->api(), gpu.handle, procs)) return std::nullopt;
    std::uint64_t used = 0;
    for (const auto& [pid, bytes] : procs) {
      if (static_cast<int>(pid) != pid_) continue;
      if (bytes == nvml::kValueNotAvailable) return std::nullopt;
      used += bytes;
    }
    return used;
  }

  std::uint64_t start_ticks_ = 0;
  std::unique_ptr<nvml::Session> session_;
  std::vector<nvml::Gpu> gpus_;
  std::vector<SourceDevice> devices_;
  std::atomic<bool> published_seen_{false};
  std::atomic<bool> sites_seen_{false};
  std::mutex peaks_mutex_;
  std::vector<source_util::PeakTracker> peaks_;  // per device

 protected:
  // A child's allocators are younger than the source: all their peaks count.
  void peaks_from_zero() {
    for (source_util::PeakTracker& p : peaks_) p.from_zero();
  }
};

// A child process started for watching (open_child_source).
class ChildProcessSource final : public ProcessMemorySource {
 public:
  ChildProcessSource(pid_t pid, std::string command, const std::vector<int>& gpus)
      : ProcessMemorySource(static_cast<int>(pid), gpus), command_(std::move(command)) {
    peaks_from_zero();
  }

  ~ChildProcessSource() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reaped_) return;
    if (poll_exit_locked()) return;  // ended and reaped now
    // Destroyed while the child runs (the watcher gives up early): end it.
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
      if (poll_exit_locked()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }

  int exit_status() const {
    (void)ended();
    std::lock_guard<std::mutex> lock(mutex_);
    return reaped_ ? exit_status_ : -1;
  }

 private:
  std::string what() const override { return "'" + command_ + "' (pid " + std::to_string(pid_) + ")"; }

  bool poll_exit_locked() const override {
    if (reaped_) return true;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return false;
    reaped_ = true;
    if (r < 0) {  // reaped by someone else (SIGCHLD ignored): the status is lost
      exit_status_ = -1;
      lost_status_ = true;
    } else if (WIFEXITED(status)) {
      exit_status_ = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      signal_ = WTERMSIG(status);
      exit_status_ = 128 + signal_;
    }
    return true;
  }

  std::string exit_text_locked() const override {
    const std::string who = "process " + std::to_string(pid_);
    if (lost_status_) return who + " exited";
    if (signal_ != 0) {
      const char* name = strsignal(signal_);
      return who + " was killed by signal " + std::to_string(signal_) + (name != nullptr ? std::string(" (") + name + ")" : "");
    }
    return who + " exited with " + std::to_string(exit_status_);
  }

  std::string command_;
  mutable bool reaped_ = false;
  mutable int exit_status_ = -1;
  mutable int signal_ = 0;
  mutable bool lost_status_ = false;
};

std::unique_ptr<MemorySource> open_process_source(int pid, const std::vector<int>& devices) {
  return std::make_unique<ProcessMemorySource>(pid, devices);
}

std::unique_ptr<MemorySource> open_child_source(const std::vector<std::string>& argv, const std::vector<int>& devices) {
  GENESIS_CHECK(!argv.empty() && !argv.front().empty(), "no command to run");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment, with GENESIS_MEM_PUBLISH=1 (Note [Published figures]).
  static const char kPublish[] = "GENESIS_MEM_PUBLISH=1";
  std::vector<char*> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "GENESIS_MEM_PUBLISH=", 20) != 0) env.push_back(*e);
  }
  env.push_back(const_cast<char*>(kPublish));
  env.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), env.data());
  if (rc != 0) GENESIS_THROW(InvalidArgumentError, "cannot run '", argv.front(), "': ", std::strerror(rc));
  try {
    return std::make_unique<ChildProcessSource>(pid, join(argv), devices);
  } catch (...) {
    // The source could not be made (a GPU that does not exist): do not leave the child behind.
    ::kill(pid, SIGTERM);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw;
  }
}

int child_exit_status(const MemorySource& source) {
  const auto* child = dynamic_cast<const ChildProcessSource*>(&source);
  return child != nullptr ? child->exit_status() : -1;
}

}  // namespace genesis::debug
