// The memory debugger: one sampling thread that reads a MemorySource at a
// fixed interval of the source's clock and feeds the analysis tools.
//
// Note [Sampler]: the sampler never sleeps by itself; it asks the source to
// advance_to() the next sample time (Note [Memory sources]), so a trace
// replayed at full speed is sampled at the same trace times as at real
// speed. Each round samples every watched device, feeds the enabled tools
// under the debugger's lock, then calls the sample listeners and OOM warning
// callbacks outside it. Sites are read every `sites_every` rounds only: they
// cost a walk over the allocator's live blocks. Nothing runs in the
// allocator's hot path. The CPU time of the sampling work (not the time the
// source spends inside advance_to, which for a trace is the replay itself)
// is measured with the thread's CPU clock, so its cost can be shown.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "genesis/core/fork.h"
#include "genesis/debug/fragmentation_analyzer.h"
#include "genesis/debug/leak_detector.h"
#include "genesis/debug/memory_profiler.h"
#include "genesis/debug/memory_source.h"
#include "genesis/debug/oom_detector.h"

namespace genesis::debug {

struct DebugOptions {
  double interval_s = 0.1;           ///< source seconds between samples
  std::vector<std::string> devices;  ///< empty: every device of the source
  double duration_s = 0;             ///< source seconds; 0: until stop() or the source ends
  bool profile = true;
  bool oom = true;
  bool leak = true;
  bool fragment = true;
  double oom_threshold_percent = 85;
  double leak_threshold_mb_per_min = 10;
  double leak_window_s = 60;
  bool tracking = true;          ///< sample allocation sites (when the source has them)
  std::size_t sites_every = 10;  ///< read sites every this many rounds (>= 1)
  std::size_t history_bytes_per_device = SampleHistory::kDefaultMaxBytes;
};

/// What the sampler has cost so far.
struct SamplerCost {
  std::uint64_t rounds = 0;           ///< sampling rounds (one sample of every device each)
  std::uint64_t sampling_cpu_ns = 0;  ///< CPU time of sampling and analysis
  std::uint64_t thread_cpu_ns = 0;    ///< CPU time of the whole thread (advance_to included)
  std::uint64_t source_elapsed_ns = 0;  ///< source time from the first round to the last
  /// sampling_cpu_ns / source_elapsed_ns in percent of one core (0 before two rounds).
  double percent_of_core() const noexcept;
};

/// Runs the tools over a source (Note [Sampler]). The source must outlive
/// the debugger and is used only by the sampling thread while it runs.
/// Public methods are thread-safe unless noted.
class MemoryDebugger {
 public:
  using SampleListener = std::function<void(const std::string& device, const MemorySample&)>;
  using WarningCallback = OOMDetector::WarningCallback;

  /// Throws InvalidArgumentError for bad options (interval <= 0, negative
  /// duration, sites_every 0, a device the source does not have, or what
  /// the tools reject).
  MemoryDebugger(MemorySource& source, DebugOptions options = {});
  /// Stops and joins the sampler.
  ~MemoryDebugger();
  MemoryDebugger(const MemoryDebugger&) = delete;
  MemoryDebugger& operator=(const MemoryDebugger&) = delete;

  /// Launches the sampling thread; throws InvalidArgumentError when it was
  /// started before.
  void start();
  /// Asks the sampler to stop (it takes a last sample) and joins it. Safe to
  /// call more than once, or before start().
  void stop();
  /// Blocks until the sampler finished: duration elapsed (source time), the
  /// source ended, or a stop was requested. Rethrows an error the sampler
  /// hit. Returns at once when not started.
  void wait();
  /// start() (unless started) then wait().
  void run_for_duration();
  /// Set it (from a signal handler too: it is a lock-free atomic) to stop.
  StopFlag& stop_flag() noexcept { return stop_; }
  /// False in a forked child: the sampling thread is the parent's (Note
  /// [Fork] in genesis/core/fork.h); there stop() and wait() return at once.
  bool running() const noexcept { return running_.load() && !in_forked_child(owner_pid_); }

  /// Called on the sampling thread after every sample, outside the lock.
  /// Register before start().
  void on_sample(SampleListener listener);
  /// Called on the sampling thread when the OOM detector warns, outside the
  /// lock. Register before start().
  void on_oom_warning(WarningCallback callback);

  /// Every enabled tool in one JSON object (reports.h formats).
  std::string status_report() const;
  std::string get_status_report() const { return status_report(); }

  /// Tools. Not synchronised with the sampler: read them after wait() or
  /// stop(), or while holding lock(). Null when the tool is disabled.
  const MemoryProfiler* profiler() const noexcept { return profiler_.get(); }
  const OOMDetector* oom_detector() const noexcept { return oom_.get(); }
  const LeakDetector* leak_detector() const noexcept { return leak_.get(); }
  const FragmentationAnalyzer* fragmentation() const noexcept { return fragment_.get(); }
  /// Holds the sampler off while the tools are read.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mutex_); }

  SamplerCost cost() const;
  /// cost() for a caller that holds lock().
  const SamplerCost& cost_unlocked() const noexcept { return cost_; }
  /// The source's describe(), taken at construction.
  const std::string& source_description() const noexcept { return source_description_; }
  /// The source's end_reason() once the sampler saw it end (empty before).
  /// The caller holds lock().
  const std::string& end_reason_unlocked() const noexcept { return end_reason_; }
  const DebugOptions& options() const noexcept { return options_; }
  const std::vector<SourceDevice>& devices() const noexcept { return devices_; }
  MemorySource& source() noexcept { return source_; }
  const MemorySource& source() const noexcept { return source_; }
  /// Source seconds from the first sample to the latest.
  double elapsed_seconds() const;

 private:
  void run();
  void sample_round(std::uint64_t round, bool last, std::vector<std::pair<std::string, OOMPrediction>>& warnings);

  MemorySource& source_;
  DebugOptions options_;
  std::vector<SourceDevice> devices_;
  std::unique_ptr<MemoryProfiler> profiler_;
  std::unique_ptr<OOMDetector> oom_;
  std::unique_ptr<LeakDetector> leak_;
  std::unique_ptr<FragmentationAnalyzer> fragment_;
  std::vector<SampleListener> listeners_;
  std::vector<WarningCallback> warning_callbacks_;

  mutable std::mutex mutex_;  // guards the tools and cost_
  std::condition_variable done_cv_;
  std::mutex join_mutex_;  // two stop() calls must not join at once
  SamplerCost cost_;
  std::string source_description_;
  std::string end_reason_;
  std::uint64_t first_ns_ = 0;
  std::uint64_t last_ns_ = 0;
  std::exception_ptr error_;
  bool started_ = false;
  bool done_ = false;
  StopFlag stop_{false};
  std::atomic<bool> running_{false};
  int owner_pid_ = 0;  // the process that started thread_ (set by start())
  std::thread thread_;
};

}  // namespace genesis::debug
