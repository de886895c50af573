#include "genesis/debug/memory_profiler.h"

#include "genesis/core/error.h"

namespace genesis::debug {

MemoryProfiler::MemoryProfiler(std::size_t max_bytes_per_device) : max_bytes_per_device_(max_bytes_per_device) {
  SampleHistory probe(max_bytes_per_device);  // validates the bound once, here
  (void)probe;
}

void MemoryProfiler::add_device(const SourceDevice& device) {
  auto it = devices_.find(device.id);
  if (it != devices_.end()) {
    it->second.device = device;
    return;
  }
  devices_.emplace(device.id, Entry{device, SampleHistory(max_bytes_per_device_)});
  order_.push_back(device.id);
}

void MemoryProfiler::add(const std::string& id, const MemorySample& sample) {
  auto it = devices_.find(id);
  if (it == devices_.end()) {
    add_device({id, id, sample.total});
    it = devices_.find(id);
  }
  it->second.history.add(sample);
  if (sample.total != 0) it->second.device.total = sample.total;
}

const MemoryProfiler::Entry& MemoryProfiler::existing(const std::string& id) const {
  const auto it = devices_.find(id);
  GENESIS_CHECK(it != devices_.end(), "profiler: unknown device '", id, "'");
  return it->second;
}

const SourceDevice& MemoryProfiler::device(const std::string& id) const { return existing(id).device; }
const SampleHistory& MemoryProfiler::history(const std::string& id) const { return existing(id).history; }

std::size_t MemoryProfiler::bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& [id, e] : devices_) total += e.history.bytes();
  return total;
}

}  // namespace genesis::debug
