#include "genesis/debug/sample_history.h"

#include <algorithm>

#include "genesis/core/error.h"

namespace genesis::debug {

SampleBucket SampleBucket::of(const MemorySample& s) noexcept {
  SampleBucket b;
  b.count = 1;
  b.first_ns = b.last_ns = s.time_ns;
  b.total = s.total;
  b.allocated = {s.allocated, s.allocated, static_cast<double>(s.allocated)};
  b.used = {s.used, s.used, static_cast<double>(s.used)};
  b.reserved = {s.reserved, s.reserved, static_cast<double>(s.reserved)};
  const double f = s.fragmentation();
  b.fragmentation_min = b.fragmentation_max = b.fragmentation_sum = f;
  b.min_largest_free_block = s.largest_free_block;
  b.max_free_blocks = s.free_blocks;
  b.max_host_rss = s.host_rss;
  return b;
}

namespace {
void merge_range(FigureRange& a, const FigureRange& b) noexcept {
  a.min = std::min(a.min, b.min);
  a.max = std::max(a.max, b.max);
  a.sum += b.sum;
}
}  // namespace

void SampleBucket::merge(const SampleBucket& later) noexcept {
  count += later.count;
  first_ns = std::min(first_ns, later.first_ns);
  last_ns = std::max(last_ns, later.last_ns);
  total = later.total;
  merge_range(allocated, later.allocated);
  merge_range(used, later.used);
  merge_range(reserved, later.reserved);
  fragmentation_min = std::min(fragmentation_min, later.fragmentation_min);
  fragmentation_max = std::max(fragmentation_max, later.fragmentation_max);
  fragmentation_sum += later.fragmentation_sum;
  min_largest_free_block = std::min(min_largest_free_block, later.min_largest_free_block);
  max_free_blocks = std::max(max_free_blocks, later.max_free_blocks);
  max_host_rss = std::max(max_host_rss, later.max_host_rss);
}

SampleHistory::SampleHistory(std::size_t max_bytes) {
  const std::size_t fixed = sizeof(SampleHistory);
  GENESIS_CHECK(max_bytes > fixed && (max_bytes - fixed) / sizeof(SampleBucket) >= 16,
                "SampleHistory: max_bytes ", max_bytes, " holds fewer than 16 samples (",
                sizeof(SampleBucket), " bytes each)");
  max_buckets_ = (max_bytes - fixed) / sizeof(SampleBucket);
}

void SampleHistory::add(const MemorySample& s) {
  if (buckets_.size() == max_buckets_) compact();
  if (buckets_.size() == buckets_.capacity()) {
    // Grow by doubling but never past the bound, so bytes() stays under it.
    buckets_.reserve(std::min(max_buckets_, std::max<std::size_t>(64, buckets_.capacity() * 2)));
  }
  buckets_.push_back(SampleBucket::of(s));

  if (count_ == 0) first_ns_ = s.time_ns;
  ++count_;
  last_ = s;
  const double u = s.utilization_percent();
  const double f = s.fragmentation();
  sum_utilization_ += u;
  max_utilization_ = std::max(max_utilization_, u);
  sum_fragmentation_ += f;
  max_fragmentation_ = std::max(max_fragmentation_, f);
  // Exact sources also report the allocator's own peaks, which see what
  // happened between two samples.
  peak_allocated_ = std::max({peak_allocated_, s.allocated, s.peak_allocated});
  peak_used_ = std::max({peak_used_, s.used, s.exact ? s.peak_reserved : 0});
  peak_reserved_ = std::max({peak_reserved_, s.reserved, s.peak_reserved});
}

void SampleHistory::compact() {
  // Merge adjacent pairs of the oldest half: frees a quarter of the buckets.
  const std::size_t half = buckets_.size() / 2 & ~std::size_t{1};
  std::size_t out = 0;
  for (std::size_t i = 0; i < half; i += 2) {
    SampleBucket b = buckets_[i];
    b.merge(buckets_[i + 1]);
    buckets_[out++] = b;
  }
  for (std::size_t i = half; i < buckets_.size(); ++i) buckets_[out++] = buckets_[i];
  buckets_.resize(out);
}

double SampleHistory::duration_seconds() const noexcept {
  if (count_ == 0 || last_.time_ns < first_ns_) return 0;
  return static_cast<double>(last_.time_ns - first_ns_) * 1e-9;
}

double SampleHistory::avg_utilization_percent() const noexcept {
  return count_ == 0 ? 0.0 : sum_utilization_ / static_cast<double>(count_);
}

double SampleHistory::avg_fragmentation() const noexcept {
  return count_ == 0 ? 0.0 : sum_fragmentation_ / static_cast<double>(count_);
}

std::size_t SampleHistory::bytes() const noexcept {
  return sizeof(SampleHistory) + buckets_.capacity() * sizeof(SampleBucket);
}

}  // namespace genesis::debug
