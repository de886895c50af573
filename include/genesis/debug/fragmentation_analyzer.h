// Fragmentation of the allocator's cache over time.
//
// Two measures: the fragmentation ratio (reserved - allocated) / reserved,
// the share of what the allocator holds that no tensor uses; and the
// external fragmentation 1 - largest_free_block / cached, how much of the
// cache is in pieces too small for the largest request it could serve (0
// when all cached bytes are one block, near 1 when they are crumbs). Both
// are fractions in [0, 1]; reports print them in percent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "genesis/debug/memory_source.h"
#include "genesis/debug/sample_history.h"

namespace genesis::debug {

/// 1 - largest_free_block / cached, in [0, 1]; 0 when nothing is cached.
double external_fragmentation(std::uint64_t largest_free_block, std::uint64_t cached) noexcept;

struct FragmentationSummary {
  std::string device;
  std::uint64_t samples = 0;
  double current_fragmentation = 0;  ///< fractions in [0, 1]
  double avg_fragmentation = 0;
  double max_fragmentation = 0;
  double current_external = 0;
  double avg_external = 0;
  double max_external = 0;
  std::uint64_t current_cached = 0;
  double avg_cached = 0;
  std::uint64_t max_cached = 0;
  std::uint64_t current_largest_free_block = 0;
  std::uint64_t current_free_blocks = 0;
  std::uint64_t max_free_blocks = 0;
};

/// Fragmentation figures per device, exact over the run, with a bounded
/// sample history (Note [Bounded history]). Not thread-safe.
class FragmentationAnalyzer {
 public:
  /// `max_history_bytes` bounds each device's history (InvalidArgumentError
  /// when too small for 16 samples).
  explicit FragmentationAnalyzer(std::size_t max_history_bytes = std::size_t{1} << 20);

  void add(const std::string& device, const MemorySample& sample);
  /// Throws InvalidArgumentError for a device never added.
  FragmentationSummary summary(const std::string& device) const;
  const SampleHistory& history(const std::string& device) const;
  std::vector<std::string> devices() const { return order_; }

 private:
  struct DeviceState {
    SampleHistory history;
    double sum_external = 0;
    double max_external = 0;
    double sum_cached = 0;
    std::uint64_t max_cached = 0;
    std::uint64_t max_free_blocks = 0;
  };
  const DeviceState& existing(const std::string& device) const;

  std::size_t max_history_bytes_;
  std::map<std::string, DeviceState> devices_;
  std::vector<std::string> order_;
};

}  // namespace genesis::debug
