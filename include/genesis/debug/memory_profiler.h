// The profiler: every device's samples over a run, bounded per device
// (Note [Bounded history] in sample_history.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "genesis/debug/memory_source.h"
#include "genesis/debug/sample_history.h"

namespace genesis::debug {

/// Not thread-safe: MemoryDebugger serialises access.
class MemoryProfiler {
 public:
  /// Throws InvalidArgumentError when the bound is too small (SampleHistory).
  explicit MemoryProfiler(std::size_t max_bytes_per_device = SampleHistory::kDefaultMaxBytes);

  /// Names a device (for reports); add() of an unknown id registers it too,
  /// named after its id.
  void add_device(const SourceDevice& device);
  void add(const std::string& device, const MemorySample& sample);

  /// Devices in the order they were registered.
  std::vector<std::string> devices() const { return order_; }
  /// Throws InvalidArgumentError for an unknown device.
  const SourceDevice& device(const std::string& id) const;
  const SampleHistory& history(const std::string& id) const;
  /// Bytes held by all histories.
  std::size_t bytes() const noexcept;

 private:
  struct Entry {
    SourceDevice device;
    SampleHistory history;
  };
  const Entry& existing(const std::string& id) const;

  std::size_t max_bytes_per_device_;
  std::map<std::string, Entry> devices_;
  std::vector<std::string> order_;
};

}  // namespace genesis::debug
