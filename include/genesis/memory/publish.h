// Published figures: a Genesis process shows the figures of its allocators
// to a memory debugger watching it from another process (genesis-mem --pid,
// genesis-mem -- CMD).
//
// Note [Published figures]: a process that publishes keeps a small shared-
// memory file, /dev/shm/genesis-mem.<pid>, of fixed layout (publish.cpp:
// Shared): a magic number and version, a seqlock counter, the writer's pid
// and the start time of that process (so that a file left by a process
// whose pid was reused is recognised), the time of the last update, and up
// to kPublishMaxDevices devices. Each device holds its id ("0", "1", ... for
// the CUDA allocators, "host", "pinned", or what publish_allocator named),
// the allocator's statistics (total, allocated, reserved, active, cached,
// largest free block, OOMs, allocations, peaks) and up to kPublishMaxSites
// allocation sites (live bytes and allocations per site, the site's text cut
// to kPublishSiteBytes - 1 bytes).
//
// A background thread rewrites it every kPublishInterval. The refresh is
// cheap: stats() of each allocator. Sites need a walk over every live
// allocation (large_allocations(0)), so they are gathered only when
// allocation contexts are captured at all (some thread set a
// ScopedAllocationContext), and less often than every refresh when the walk
// is slow: it may take at most 1/20 of the time (a walk of 10 ms waits
// 200 ms for the next); in between the last sites are published again.
//
// Writer and readers never lock each other out: the writer makes the counter
// odd, copies the new figures in and makes it even again; a reader copies
// the figures out and keeps them only when the counter was even and the
// same before and after (a seqlock; every word is copied with atomic
// accesses, release stores and acquire loads, so the copy is race-free for
// the memory model too). The file appears complete (written under a temporary name,
// then renamed), is removed when the process exits normally (atexit), and a
// reader removes a file whose writer is gone.
//
// Publishing starts with start_publishing(), or by itself when the first
// process-wide allocator is created in a process whose environment holds
// GENESIS_MEM_PUBLISH=1 (genesis-mem sets it for the command it starts).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "genesis/memory/stats.h"

namespace genesis::memory {

class CachingAllocator;

/// Layout version of the published file; a reader ignores other versions.
inline constexpr std::uint32_t kPublishVersion = 1;
inline constexpr std::size_t kPublishMaxDevices = 16;
inline constexpr std::size_t kPublishMaxSites = 64;
/// Bytes of a site's text, its terminating NUL included.
inline constexpr std::size_t kPublishSiteBytes = 256;
/// Bytes of a device id, its terminating NUL included.
inline constexpr std::size_t kPublishIdBytes = 32;
/// How often the background thread rewrites the figures.
inline constexpr std::chrono::milliseconds kPublishInterval{100};

/// "/dev/shm/genesis-mem.<pid>".
std::string published_path(int pid);

/// Starts publishing this process's allocators (Note [Published figures]).
/// Idempotent and thread-safe. Throws genesis::Error when the file cannot be
/// created (no /dev/shm, out of space).
void start_publishing();

/// Starts publishing when the environment has GENESIS_MEM_PUBLISH=1 (read
/// once per process). Never throws: a failure is reported on stderr once.
/// The process-wide allocators call it when they are created.
void start_publishing_if_requested() noexcept;

/// Stops the background thread and removes the file. Idempotent; publishing
/// may start again afterwards.
void stop_publishing();

/// True while this process publishes.
bool publishing() noexcept;

/// Rewrites the figures now, sites included (tests; a program about to
/// exit). Does nothing unless publishing.
void publish_now();

/// Publishes `allocator` under `id` (at most kPublishIdBytes - 1 bytes) as
/// well as the process-wide allocators; an id already registered is taken
/// over. The allocator must stay alive until unpublish_allocator() returns.
/// Registration works whether or not publishing has started.
void publish_allocator(std::string id, CachingAllocator* allocator);

/// Stops publishing `allocator`. When it returns, the publisher no longer
/// touches it (a refresh in progress has finished).
void unpublish_allocator(const CachingAllocator* allocator);

/// One allocation site of a published device.
struct PublishedSite {
  std::string site;  ///< frames separated by '\n'; "<unknown>" for allocations without a context
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
};

/// One published allocator.
struct PublishedDevice {
  std::string id;
  std::uint64_t total = 0;  ///< the upstream's capacity
  std::uint64_t allocated = 0;
  std::uint64_t reserved = 0;
  std::uint64_t active = 0;
  std::uint64_t cached = 0;
  std::uint64_t largest_free_block = 0;
  std::uint64_t num_ooms = 0;
  std::uint64_t num_allocs = 0;
  /// The allocator's peaks (since its creation or reset_peak_stats()).
  std::uint64_t peak_allocated = 0;
  std::uint64_t peak_reserved = 0;
  /// True when the writer gathered sites (allocation contexts are captured).
  bool has_sites = false;
  /// Largest first; at most kPublishMaxSites.
  std::vector<PublishedSite> sites;
};

/// Live allocations grouped by their location (AllocationInfo::location),
/// bytes (rounded block sizes) and count per site, largest first (ties by
/// site). Allocations without a context (location "0x...") are grouped as
/// "<unknown>".
std::vector<PublishedSite> group_by_site(const std::vector<AllocationInfo>& allocations);

/// What a process published, as read at one moment.
struct PublishedFigures {
  int pid = 0;
  /// When the writer last updated the figures: CLOCK_REALTIME nanoseconds.
  std::uint64_t update_time_ns = 0;
  /// Updates so far.
  std::uint64_t updates = 0;
  std::vector<PublishedDevice> devices;

  /// The device `id`, or nullptr.
  const PublishedDevice* find(const std::string& id) const noexcept;
};

/// The figures `pid` publishes, or std::nullopt when it publishes none (no
/// file, another layout version, a writer that is gone: its file is then
/// removed). Never blocks on the writer; never throws for a missing or
/// stale file.
std::optional<PublishedFigures> read_published(int pid);

namespace detail {
/// Field 3 (state) and field 22 (start time in clock ticks) of
/// /proc/<pid>/stat: together with the pid they name one process, so a
/// reused pid is told apart. False when the file cannot be read.
bool read_proc_stat(int pid, std::uint64_t& start_ticks, char& state);
}  // namespace detail

}  // namespace genesis::memory
