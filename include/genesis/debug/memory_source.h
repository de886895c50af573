// Where the memory debugger's figures come from: one interface, several
// sources (NVML, in-process allocators, another process, a recorded trace).
//
// Note [Memory sources]: every tool of the debugger (profiler, OOM detector,
// leak detector, fragmentation analyser, exporter) reads MemorySamples from a
// MemorySource and never asks where they came from. A source names its
// devices ("0", "1", ...; a trace is device "0"), answers sample(device) with
// what it knows (a source that only sees the driver's total leaves the exact
// allocator fields at the driver's figure and says so with `exact = false`),
// and owns the clock the tools use: live sources run on the steady clock,
// a trace source on the trace's own time stamps. The sampler never sleeps by
// itself: it asks the source to advance_to() the next sample time, so that a
// trace replayed at `--speed max` is sampled at the same trace times as one
// replayed at real speed, and every rate in a report is in the source's time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "genesis/debug/replay.h"

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis::debug {

/// One observation of one device's memory. Bytes unless noted.
struct MemorySample {
  std::uint64_t time_ns = 0;  ///< the source's clock (Note [Memory sources])
  std::uint64_t total = 0;    ///< device capacity
  /// What the device counts as in use: NVML's used memory, or the
  /// allocator's reserved bytes for allocator and trace sources.
  std::uint64_t used = 0;
  std::uint64_t free = 0;     ///< total - used
  /// Bytes in live allocations. Without an allocator behind the figures
  /// (exact = false): the process's (or device's) used memory.
  std::uint64_t allocated = 0;
  std::uint64_t reserved = 0;  ///< taken from the driver by the allocator
  std::uint64_t active = 0;    ///< allocated + freed blocks still in use by other streams
  std::uint64_t cached = 0;    ///< reserved - allocated
  std::uint64_t largest_free_block = 0;  ///< inside the reserved memory
  std::uint64_t free_blocks = 0;         ///< free blocks inside the reserved memory
  std::uint64_t num_ooms = 0;            ///< out-of-memory errors so far
  std::uint64_t num_allocs = 0;          ///< allocations so far
  std::uint64_t host_rss = 0;            ///< resident host memory of the watched process (0: unknown)
  /// Highest allocated / reserved bytes since the source opened, as the
  /// allocator counted them (exact sources; 0 otherwise). A peak between
  /// two samples is seen here even though no sample caught it.
  std::uint64_t peak_allocated = 0;
  std::uint64_t peak_reserved = 0;
  bool exact = false;                    ///< allocator figures (true) or the driver's only

  /// (reserved - allocated) / reserved in [0, 1]; 0 when nothing is reserved.
  double fragmentation() const noexcept;
  /// used / total in percent; 0 when total is 0.
  double utilization_percent() const noexcept;
};

/// Live bytes held by one allocation site (a Python or C++ call stack).
struct SiteStat {
  /// Frames, innermost first, each "file:line in function"; one line per
  /// frame joined with '\n' for display. "<unknown>" when nothing was
  /// recorded for those allocations.
  std::string site;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
};

/// A device a source can sample.
struct SourceDevice {
  std::string id;    ///< "0", "1", ... (the key in reports)
  std::string name;  ///< "NVIDIA H100 80GB HBM3", "sim:0 (trace gpt2.csv)", ...
  std::uint64_t total = 0;
};

/// Asked by a long-running call to give up early (Ctrl-C, stop_monitoring).
using StopFlag = std::atomic<bool>;

class MemorySource {
 public:
  virtual ~MemorySource();
  /// One line for reports: "nvml", "pid 1234 (nvml + genesis)", "trace FILE at 10x".
  virtual std::string describe() const = 0;
  /// The devices this source sees. Stable for the source's lifetime.
  virtual std::vector<SourceDevice> devices() const = 0;
  /// A sample of `device` (an id from devices()) at the source's current
  /// time. Throws InvalidArgumentError for an unknown device id.
  virtual MemorySample sample(const std::string& device) = 0;
  /// True when sites() can say which allocation sites hold memory.
  virtual bool has_sites() const { return false; }
  /// Live bytes per allocation site on `device`, largest first (empty when
  /// has_sites() is false or tracking is off).
  virtual std::vector<SiteStat> sites(const std::string& device);
  /// The source's clock now, in nanoseconds.
  virtual std::uint64_t now_ns() const = 0;
  /// Waits until the source's clock reaches `time_ns` (live sources sleep; a
  /// trace replays up to that time, pacing itself at its speed). Returns
  /// false when the source has ended (trace replayed to its end, process
  /// exited) or `stop` became true; the caller takes a last sample and stops.
  virtual bool advance_to(std::uint64_t time_ns, const StopFlag& stop) = 0;
  /// The time before which the source will not change and advancing to it
  /// costs no waiting (a trace replayed at max speed: its next event's
  /// time), or 0 when unknown. A sampler may skip the ticks until then,
  /// whose samples would all be the same: a trace with an idle gap of days
  /// must not be sampled every interval across it.
  virtual std::uint64_t idle_until_ns() const { return 0; }
  /// True once the source has ended (see advance_to).
  virtual bool ended() const { return false; }
  /// Whether a sample taken after the source ended still describes what was
  /// watched: a trace's final state does; a process that exited has given
  /// all its memory back, so the sampler stops at its last sample before.
  virtual bool samples_after_end() const { return true; }
  /// Why it ended, for reports ("trace finished", "process 1234 exited with 0").
  virtual std::string end_reason() const { return {}; }
  /// The allocation events of `device` recorded so far, oldest first, for
  /// timelines (Chrome trace export). Sources that drive an allocator
  /// themselves (a trace) record them; others return an empty list.
  virtual std::vector<memory::MemoryEvent> events(const std::string& device);
};

// --- NVML -------------------------------------------------------------------

/// True when the driver's libnvidia-ml.so.1 can be loaded and initialised.
bool nvml_available();

/// The GPUs through NVML (loaded at run time with dlopen). `devices` empty:
/// every GPU. Throws genesis::Error with a message that names the other
/// sources (--trace, --pid with a Genesis process) when there is no driver,
/// and InvalidArgumentError for a device index that does not exist.
std::unique_ptr<MemorySource> open_nvml_source(const std::vector<int>& devices = {});

// --- in-process allocators --------------------------------------------------

/// One allocator of this process, under the device id reports use.
struct NamedAllocator {
  std::string id;     ///< "0", "cpu", "sim:0", ...
  std::string name;
  memory::CachingAllocator* allocator = nullptr;  ///< outlives the source
};

/// Exact figures (and sites, when allocation contexts were recorded) of
/// allocators in this process, on the steady clock.
std::unique_ptr<MemorySource> open_allocator_source(std::vector<NamedAllocator> allocators);

/// The process-wide CUDA allocators (ids "0", "1", ...) that exist.
std::vector<NamedAllocator> process_cuda_allocators();

// --- another process --------------------------------------------------------

/// Another process: NVML's per-process used memory on each GPU, its resident
/// host memory from /proc (MemorySample::host_rss of every sample), and,
/// when that process publishes its Genesis allocators (Note [Published
/// figures] in publish.h), their exact figures and sites (Note [Watched
/// processes] in process_source.cpp). Devices: the GPUs NVML sees (empty
/// `devices`: all), or "host" alone on a machine without one (no driver):
/// used = allocated = the resident memory, total = the machine's memory, or
/// the host allocator's exact figures when published. has_sites() turns
/// true once the process has published sites. Throws InvalidArgumentError
/// when `pid` does not exist, and for a GPU index without NVML or beyond the
/// GPUs. advance_to() returns false once the process has exited (or its pid
/// belongs to another process).
std::unique_ptr<MemorySource> open_process_source(int pid, const std::vector<int>& devices = {});

/// Starts `argv` as a child process (posix_spawnp: searched in PATH, with
/// GENESIS_MEM_PUBLISH=1 in its environment, so a Genesis program publishes
/// its figures) and watches it like open_process_source. The source's
/// end_reason() carries the child's exit status ("process 1234 exited with
/// 3", "... was killed by signal 9 (Killed)"); child_exit_status() returns it
/// once it has ended. The child is always reaped (no zombie); destroying the
/// source while the child still runs ends it (SIGTERM, then SIGKILL after
/// 2 s). Throws InvalidArgumentError for a command that cannot be started
/// ("cannot run 'x': No such file or directory").
class ChildProcessSource;
std::unique_ptr<MemorySource> open_child_source(const std::vector<std::string>& argv,
                                                const std::vector<int>& devices = {});
/// The exit status of the child of an open_child_source source (128 + signal
/// when killed), or -1 while it runs or for another kind of source.
int child_exit_status(const MemorySource& source);

// --- a recorded trace -------------------------------------------------------

struct TraceSourceOptions {
  /// Trace time per wall time: 1 = real speed, 10 = ten times faster;
  /// 0 = as fast as possible ("max").
  double speed = 0;
  /// Simulated device capacity (0: default_simulated_capacity()). With a
  /// capacity the trace can run out of memory; OOMs are counted.
  std::size_t capacity = 0;
  /// Allocator configuration name (known_replay_configs()).
  std::string config = "genesis";
};

/// Replays a trace (read_trace) through a CachingAllocator on a simulated
/// device, following its time stamps (Note [Trace source clock] in
/// trace_source.cpp: trace time starts at 0 with the first event, clamped to
/// be monotonic; 1 us per event without time stamps). Device "0", of the
/// simulated capacity. Samples are exact (allocator statistics; free_blocks
/// from a snapshot); allocations that run out of memory are counted
/// (num_ooms) and skipped. Sites come from the trace's optional `site`
/// column; events() lists alloc, free and oom events in trace time (the
/// newest 2^20). Throws what read_trace throws, and InvalidArgumentError for
/// an unknown configuration, a capacity over 1 TiB, a negative speed or a
/// Trace that breaks its invariants.
std::unique_ptr<MemorySource> open_trace_source(const std::string& path, const TraceSourceOptions& options = {});
/// The same over a Trace already read (tests build them with TraceBuilder).
std::unique_ptr<MemorySource> open_trace_source(Trace trace, const TraceSourceOptions& options = {});

/// Parses "max" (0) or a positive number of times real speed; throws
/// InvalidArgumentError otherwise.
double parse_speed(const std::string& text);

}  // namespace genesis::debug
