#include "genesis/debug/memory_debugger.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "genesis/core/error.h"
#include "genesis/debug/reports.h"

namespace genesis::debug {

namespace {

std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

double SamplerCost::percent_of_core() const noexcept {
  if (source_elapsed_ns == 0) return 0.0;
  return 100.0 * static_cast<double>(sampling_cpu_ns) / static_cast<double>(source_elapsed_ns);
}

MemoryDebugger::MemoryDebugger(MemorySource& source, DebugOptions options)
    : source_(source), options_(std::move(options)), source_description_(source.describe()) {
  GENESIS_CHECK(options_.interval_s > 0 && std::isfinite(options_.interval_s),
                "sampling interval must be positive, got ", options_.interval_s, " s");
  GENESIS_CHECK(options_.duration_s >= 0, "duration must not be negative, got ", options_.duration_s, " s");
  GENESIS_CHECK(options_.sites_every >= 1, "sites_every must be at least 1");
  const std::vector<SourceDevice> all = source_.devices();
  if (options_.devices.empty()) {
    devices_ = all;
  } else {
    for (const std::string& id : options_.devices) {
      const auto it = std::find_if(all.begin(), all.end(), [&](const SourceDevice& d) { return d.id == id; });
      GENESIS_CHECK(it != all.end(), "device '", id, "' is not one of the source's (", source_.describe(), ")");
      devices_.push_back(*it);
    }
  }
  if (options_.profile) {
    profiler_ = std::make_unique<MemoryProfiler>(options_.history_bytes_per_device);
    for (const SourceDevice& d : devices_) profiler_->add_device(d);
  }
  if (options_.oom) {
    OOMDetectorOptions o;
    o.threshold_percent = options_.oom_threshold_percent;
    oom_ = std::make_unique<OOMDetector>(o);
  }
  if (options_.leak) {
    leak_ = std::make_unique<LeakDetector>(options_.leak_threshold_mb_per_min, options_.leak_window_s,
                                           options_.tracking);
  }
  if (options_.fragment) fragment_ = std::make_unique<FragmentationAnalyzer>();
}

MemoryDebugger::~MemoryDebugger() {
  try {
    stop();
  } catch (...) {
    // A destructor never throws; the error was the sampler's, seen by wait().
  }
}

void MemoryDebugger::on_sample(SampleListener listener) { listeners_.push_back(std::move(listener)); }
void MemoryDebugger::on_oom_warning(WarningCallback callback) { warning_callbacks_.push_back(std::move(callback)); }

void MemoryDebugger::start() {
  std::lock_guard<std::mutex> g(mutex_);
  GENESIS_CHECK(!started_, "the memory debugger was already started");
  started_ = true;
  running_ = true;
  owner_pid_ = static_cast<int>(getpid());
  thread_ = std::thread([this] { run(); });
}

void MemoryDebugger::stop() {
  stop_ = true;
  if (in_forked_child(owner_pid_)) {
    // Note [Fork]: the sampler is the parent's; nothing here will ever set
    // done_, and its lock may have been held when the process forked.
    if (thread_.joinable()) thread_.detach();
    return;
  }
  {
    std::unique_lock<std::mutex> g(mutex_);
    if (!started_) return;
    done_cv_.wait(g, [this] { return done_; });
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    std::lock_guard<std::mutex> j(join_mutex_);
    if (thread_.joinable()) thread_.join();
  }
}

void MemoryDebugger::wait() {
  if (in_forked_child(owner_pid_)) return;  // the sampler is the parent's (see stop())
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> g(mutex_);
    if (!started_) return;
    done_cv_.wait(g, [this] { return done_; });
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void MemoryDebugger::run_for_duration() {
  bool start_now;
  {
    std::lock_guard<std::mutex> g(mutex_);
    start_now = !started_;
  }
  if (start_now) start();
  wait();
}

void MemoryDebugger::sample_round(std::uint64_t round, bool last,
                                  std::vector<std::pair<std::string, OOMPrediction>>& warnings) {
  // The last round always reads sites, so reports end with where memory is
  // held at the end, not sites_every - 1 rounds before it.
  const bool want_sites = options_.tracking && (leak_ || oom_) && (last || round % options_.sites_every == 0) &&
                          source_.has_sites();
  std::vector<MemorySample> samples;
  std::vector<std::vector<SiteStat>> sites(want_sites ? devices_.size() : 0);
  samples.reserve(devices_.size());
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    samples.push_back(source_.sample(devices_[i].id));
    if (want_sites) sites[i] = source_.sites(devices_[i].id);
  }
  {
    std::lock_guard<std::mutex> g(mutex_);
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      const std::string& id = devices_[i].id;
      const MemorySample& s = samples[i];
      if (profiler_) profiler_->add(id, s);
      if (fragment_) fragment_->add(id, s);
      if (leak_) {
        leak_->add(id, s);
        if (want_sites) leak_->add_sites(id, s.time_ns, sites[i]);
      }
      if (oom_) {
        if (want_sites) oom_->add_sites(id, s.time_ns, sites[i]);
        if (auto w = oom_->add(id, s)) warnings.emplace_back(id, std::move(*w));
      }
      if (cost_.rounds == 0 && i == 0) first_ns_ = s.time_ns;
      last_ns_ = std::max(last_ns_, s.time_ns);
    }
  }
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    for (const auto& l : listeners_) l(devices_[i].id, samples[i]);
  }
}

namespace {
// Identical samples in a row beyond which an idle stretch is skipped (see run()).
constexpr std::uint64_t kMaxIdleTicks = 1000;
}  // namespace

void MemoryDebugger::run() {
  const std::uint64_t cpu_start = thread_cpu_ns();
  try {
    const auto interval_ns = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(options_.interval_s * 1e9)));
    const auto duration_ns = static_cast<std::uint64_t>(std::llround(options_.duration_s * 1e9));
    const std::uint64_t start = source_.now_ns();
    constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
    auto add = [](std::uint64_t a, std::uint64_t b) { return a > kNever - b ? kNever : a + b; };
    // The watch ends at start + duration, which gets a sample of its own
    // when the duration is not a whole number of intervals (and when it is
    // shorter than one), so that the reports cover all of it.
    const std::uint64_t end = duration_ns > 0 ? add(start, duration_ns) : kNever;
    std::uint64_t next = start;
    std::vector<std::pair<std::string, OOMPrediction>> warnings;
    for (std::uint64_t round = 0;; ++round) {
      const bool more = round == 0 ? !stop_.load() : source_.advance_to(next, stop_);
      const std::uint64_t now = source_.now_ns();
      std::uint64_t following = add(next, interval_ns);
      if (following <= now) following = add(following, ((now - following) / interval_ns + 1) * interval_ns);  // fell behind: skip missed ticks
      // Nothing changes until the source's next change and reaching it costs
      // no waiting (a trace at max speed): the ticks before it would all be
      // the same sample. A stretch of more than kMaxIdleTicks of them (a
      // trace with a gap of days would take hours of samples) is skipped to
      // its last tick; shorter ones are sampled as usual, so that averages
      // over samples stay averages over time for the traces people record.
      const std::uint64_t idle = source_.idle_until_ns();
      if (idle > following && (idle - following) / interval_ns > kMaxIdleTicks)
        following += (idle - following) / interval_ns * interval_ns;
      following = std::min(following, end);
      const bool last = !more || stop_.load() || source_.ended() || now >= end;
      // A process that exited has nothing left to sample: its last sample
      // before the exit stands (Note [Memory sources]).
      if (round > 0 && !more && source_.ended() && !source_.samples_after_end()) break;
      const std::uint64_t cpu0 = thread_cpu_ns();
      warnings.clear();
      sample_round(round, last, warnings);
      for (const auto& [device, prediction] : warnings) {
        for (const auto& cb : warning_callbacks_) cb(device, prediction);
      }
      const std::uint64_t cpu1 = thread_cpu_ns();
      {
        std::lock_guard<std::mutex> g(mutex_);
        ++cost_.rounds;
        cost_.sampling_cpu_ns += cpu1 - cpu0;
        cost_.thread_cpu_ns = cpu1 - cpu_start;
        cost_.source_elapsed_ns = last_ns_ - first_ns_;
      }
      // A stop that came while this round sampled gets a round of its own
      // (advance_to returns at once): the reports then end at the stop, with
      // its sites, not at a sample taken before the program's last changes.
      if (last) break;
      next = following;
    }
  } catch (...) {
    std::lock_guard<std::mutex> g(mutex_);
    error_ = std::current_exception();
  }
  std::string reason = source_.ended() ? source_.end_reason() : std::string();
  if (reason.empty()) reason = stop_.load() ? "stopped" : "duration elapsed";
  std::lock_guard<std::mutex> g(mutex_);
  if (error_) reason = "sampler error";
  end_reason_ = std::move(reason);
  cost_.thread_cpu_ns = thread_cpu_ns() - cpu_start;
  done_ = true;
  running_ = false;
  done_cv_.notify_all();
}

SamplerCost MemoryDebugger::cost() const {
  std::lock_guard<std::mutex> g(mutex_);
  return cost_;
}

double MemoryDebugger::elapsed_seconds() const {
  std::lock_guard<std::mutex> g(mutex_);
  return static_cast<double>(last_ns_ - first_ns_) * 1e-9;
}

std::string MemoryDebugger::status_report() const {
  std::lock_guard<std::mutex> g(mutex_);
  return status_report_json(*this);
}

}  // namespace genesis::debug
