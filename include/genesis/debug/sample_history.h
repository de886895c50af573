// A bounded record of one device's MemorySamples over a whole run.
//
// Note [Bounded history]: the debugger may watch a job for days at 0.1 s, so
// the history of one device never grows past a byte bound. Each sample is
// kept as a bucket of one; when the next one would pass the bound, adjacent
// pairs of the OLDEST half are merged, so old history loses resolution while
// recent history keeps it. A merged bucket keeps its sample count, its time
// range and the exact minimum, maximum and sum of every figure, so nothing
// is dropped silently: merged() counts the samples that no longer have a
// bucket of their own. The running totals (averages, peaks) are kept apart
// from the buckets and are exact over the whole run whatever was merged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/debug/memory_source.h"

namespace genesis::debug {

/// Minimum, maximum and sum of one figure over the samples of a bucket.
struct FigureRange {
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  double sum = 0;  ///< double: exact up to 2^53 bytes per sample summed
};

/// One or more consecutive samples of a device (Note [Bounded history]).
struct SampleBucket {
  std::uint64_t count = 0;     ///< samples folded into this bucket (>= 1)
  std::uint64_t first_ns = 0;  ///< time of its first sample
  std::uint64_t last_ns = 0;   ///< time of its last sample
  std::uint64_t total = 0;     ///< device capacity at its last sample
  FigureRange allocated;
  FigureRange used;
  FigureRange reserved;
  double fragmentation_min = 0;  ///< fractions in [0, 1]
  double fragmentation_max = 0;
  double fragmentation_sum = 0;
  std::uint64_t min_largest_free_block = 0;
  std::uint64_t max_free_blocks = 0;
  std::uint64_t max_host_rss = 0;

  double mean_allocated() const noexcept { return allocated.sum / static_cast<double>(count); }
  double mean_used() const noexcept { return used.sum / static_cast<double>(count); }
  double mean_reserved() const noexcept { return reserved.sum / static_cast<double>(count); }
  double mean_fragmentation() const noexcept { return fragmentation_sum / static_cast<double>(count); }
  /// Mean of reserved - allocated (exact: the difference of the means).
  double mean_cached() const noexcept { return mean_reserved() - mean_allocated(); }
  /// Middle of the bucket's time range.
  std::uint64_t mid_ns() const noexcept { return first_ns + (last_ns - first_ns) / 2; }

  static SampleBucket of(const MemorySample& s) noexcept;
  /// Folds `later` (the next bucket in time) into this one.
  void merge(const SampleBucket& later) noexcept;
};

/// The samples of one device, bounded in memory (Note [Bounded history]).
/// Not thread-safe: the owner serialises add() and the readers.
class SampleHistory {
 public:
  // 5 MB, not MiB: the bound users are promised per device, whatever the run length.
  static constexpr std::size_t kDefaultMaxBytes = 5'000'000;

  /// Throws InvalidArgumentError when `max_bytes` holds fewer than 16 buckets.
  explicit SampleHistory(std::size_t max_bytes = kDefaultMaxBytes);

  /// Appends a sample; samples are expected in time order (an earlier time
  /// is kept as given, it only widens nothing).
  void add(const MemorySample& sample);

  /// Oldest first.
  const std::vector<SampleBucket>& buckets() const noexcept { return buckets_; }
  bool empty() const noexcept { return count_ == 0; }
  /// Samples added over the whole run.
  std::uint64_t count() const noexcept { return count_; }
  /// Samples that share a bucket with an earlier one: count() - buckets().size().
  std::uint64_t merged() const noexcept { return count_ - buckets_.size(); }
  /// The latest sample, exactly as added (a default sample when empty).
  const MemorySample& last() const noexcept { return last_; }
  std::uint64_t first_ns() const noexcept { return first_ns_; }
  std::uint64_t last_ns() const noexcept { return last_.time_ns; }
  /// Source time covered, last_ns() - first_ns(), in seconds.
  double duration_seconds() const noexcept;

  // Exact over every sample ever added.
  double avg_utilization_percent() const noexcept;
  double max_utilization_percent() const noexcept { return max_utilization_; }
  double avg_fragmentation() const noexcept;  ///< fraction in [0, 1]
  double max_fragmentation() const noexcept { return max_fragmentation_; }
  double sum_utilization_percent() const noexcept { return sum_utilization_; }
  double sum_fragmentation() const noexcept { return sum_fragmentation_; }
  std::uint64_t peak_allocated() const noexcept { return peak_allocated_; }
  std::uint64_t peak_used() const noexcept { return peak_used_; }
  std::uint64_t peak_reserved() const noexcept { return peak_reserved_; }

  /// Bytes this history holds (its buckets' storage included); stays below
  /// the bound given to the constructor.
  std::size_t bytes() const noexcept;
  std::size_t max_buckets() const noexcept { return max_buckets_; }

 private:
  void compact();

  std::size_t max_buckets_;
  std::vector<SampleBucket> buckets_;
  MemorySample last_;
  std::uint64_t count_ = 0;
  std::uint64_t first_ns_ = 0;
  double sum_utilization_ = 0;
  double max_utilization_ = 0;
  double sum_fragmentation_ = 0;
  double max_fragmentation_ = 0;
  std::uint64_t peak_allocated_ = 0;
  std::uint64_t peak_used_ = 0;
  std::uint64_t peak_reserved_ = 0;
};

}  // namespace genesis::debug
