// Trace replay: runs a recorded allocation trace through a CachingAllocator
// configuration and measures what it reserves and how fast it answers.
//
// Note [Replay measurement]: the timed loop does nothing but the allocator
// calls: for each event, allocate() into or deallocate() from a preallocated
// slot table (Note [Trace slots] in trace.h), inside steady_clock reads
// taken around chunks of events (progress reports between chunks are not
// timed). Everything else is computed outside it: peak live bytes are
// recomputed from the trace afterwards, leaving out the allocations that
// failed; peak reserved is the allocator's own statistic. An allocation that
// fails with OutOfMemoryError is counted, its slot holds nullptr (so its
// free is a no-op) and the replay goes on.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/debug/trace.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "genesis/memory/stats.h"

namespace genesis::debug {

/// Where the allocator under test gets its segments.
enum class ReplayDevice : std::uint8_t {
  kSimulated,  ///< memory::SimulatedDevice: no GPU needed, deterministic
  /// memory::CudaDeviceResource: a real GPU. Each non-default stream of the
  /// trace becomes a CUDA stream created for the run.
  kCuda,
};

/// "sim" or "cuda".
std::string_view replay_device_name(ReplayDevice device) noexcept;
/// Parses "sim" / "cuda"; throws InvalidArgumentError naming both otherwise.
ReplayDevice parse_replay_device(std::string_view name);

/// Simulated capacity when ReplayConfig::capacity is 0: 128 GiB (a large GPU
/// of today), doubled while below four times the trace's peak live bytes, up
/// to the 1 TiB a SimulatedDevice allows; so that no real trace runs out of
/// memory unless a capacity is asked for. Not always 1 TiB: expandable
/// segments reserve a device-sized address range per pool and stream, and
/// the simulator's 4 TiB of address space would hold only four of them.
std::size_t default_simulated_capacity(const Trace& trace) noexcept;

/// One allocator configuration to replay a trace under.
struct ReplayConfig {
  /// A name for reports (known_replay_configs() names, or anything).
  std::string name = "genesis";
  ReplayDevice device = ReplayDevice::kSimulated;
  /// Simulated device: its capacity (0 = default_simulated_capacity(), at most
  /// 1 TiB). CUDA: a cap on reserved memory, applied as memory_fraction =
  /// capacity / device total when smaller (0 = the whole GPU).
  std::size_t capacity = 0;
  /// Simulated device: what mapping pages costs (Note [Simulated mapping
  /// costs]); none by default.
  memory::SimulatedDevice::VmmCost sim_vmm_cost;
  /// CUDA device index.
  int cuda_device = 0;
  memory::AllocatorOptions options;
};

/// A named configuration of known_replay_configs().
struct NamedReplayConfig {
  std::string name;
  std::string description;
  memory::AllocatorOptions options;
};

/// The configurations `--compare` runs, in report order:
///   genesis             defaults (expandable segments auto, thread cache on)
///   genesis-classic     expandable segments off
///   genesis-expandable  expandable segments on
///   genesis-no-tcache   thread cache off
const std::vector<NamedReplayConfig>& known_replay_configs();

/// The known configuration `name` on `device`. Throws InvalidArgumentError
/// listing the valid names for an unknown one.
ReplayConfig make_replay_config(std::string_view name, ReplayDevice device = ReplayDevice::kSimulated,
                                std::size_t capacity = 0);

/// The wall time of untimed runs that ReplayOptions::warmup = -1 asks for on
/// the simulated device.
inline constexpr std::chrono::milliseconds kReplayAutoWarmup{100};

/// How to run a replay (not what is replayed).
struct ReplayOptions {
  /// Replays the trace this many times, each on a fresh allocator and
  /// device; ns_per_event is the median (timing noise). Everything else comes
  /// from the first run (identical on the simulated device).
  unsigned repeat = 1;
  /// Untimed runs before the timed ones, each on a fresh allocator and
  /// device, to take the cold start out of the figure (CPU clock ramp, cold
  /// caches and page tables: the first of several identical configurations
  /// read 20-60% slower on the simulated device without them). -1 (auto,
  /// what `genesis-mem replay` uses unless told): on the simulated device as
  /// many as fit in kReplayAutoWarmup, at least one; none on CUDA (where the PyTorch
  /// reference run has none either).
  int warmup = 0;
  /// Called with (events done, events total over all repeats) every
  /// `progress_every` events and at the end. Not timed.
  std::function<void(std::uint64_t, std::uint64_t)> progress;
  std::uint64_t progress_every = std::uint64_t{1} << 16;
  /// Called once per run at the end of the trace, before the allocations
  /// still live are freed (tests look at snapshot() and events()).
  std::function<void(const memory::CachingAllocator&)> inspect;
};

/// What one configuration did with one trace.
struct ReplayResult {
  std::string config;             ///< ReplayConfig::name
  std::string upstream;           ///< "sim:0", "cuda:0"
  std::size_t capacity = 0;       ///< the device's total bytes
  std::uint64_t events = 0;       ///< alloc + free events replayed (per run)
  /// Largest sum of requested sizes of live allocations (successful ones).
  std::uint64_t peak_live_bytes = 0;
  /// The allocator's peak reserved bytes (stats().reserved_bytes[0].peak).
  std::uint64_t peak_reserved_bytes = 0;
  /// peak_reserved_bytes / peak_live_bytes (0 when nothing was live).
  double reserved_per_live = 0;
  /// Nanoseconds per event of the timed loop: the median over the runs.
  double ns_per_event = 0;
  std::vector<double> ns_per_event_runs;
  std::int64_t upstream_allocs = 0;  ///< segments taken from the upstream
  std::int64_t upstream_frees = 0;   ///< segments given back
  std::int64_t stream_borrows = 0;   ///< free blocks lent from one stream to another
  std::uint64_t ooms = 0;            ///< allocations that failed (skipped)
  std::uint64_t unknown_frees = 0;   ///< frees of addresses the trace never allocated
  std::uint64_t live_at_end = 0;     ///< allocations never freed by the trace
  /// Allocated bytes after the replay freed what the trace left live: 0
  /// unless the allocator lost track of something.
  std::int64_t allocated_after_cleanup = 0;
  /// Statistics at the end of the trace (before the cleanup).
  memory::MemoryStats final_stats;
};

/// Replays `trace` under `config` (Note [Replay measurement]). Throws
/// InvalidArgumentError for a bad configuration, for a Trace that breaks its
/// invariants, and for device "cuda" on a machine without a GPU; CudaError
/// for CUDA failures. Out-of-memory during the replay is counted, not thrown.
/// Thread safety: concurrent calls are allowed (each run owns its allocator
/// and device); the callbacks run on the calling thread.
ReplayResult replay(const Trace& trace, const ReplayConfig& config, const ReplayOptions& options = {});

}  // namespace genesis::debug
