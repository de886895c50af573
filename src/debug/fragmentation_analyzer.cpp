#include "genesis/debug/fragmentation_analyzer.h"

#include <algorithm>

#include "genesis/core/error.h"

namespace genesis::debug {

double external_fragmentation(std::uint64_t largest_free_block, std::uint64_t cached) noexcept {
  if (cached == 0) return 0.0;
  const double ratio = static_cast<double>(std::min(largest_free_block, cached)) / static_cast<double>(cached);
  return 1.0 - ratio;
}

FragmentationAnalyzer::FragmentationAnalyzer(std::size_t max_history_bytes) : max_history_bytes_(max_history_bytes) {
  SampleHistory probe(max_history_bytes);  // validates the bound once, here
  (void)probe;
}

void FragmentationAnalyzer::add(const std::string& device, const MemorySample& s) {
  auto it = devices_.find(device);
  if (it == devices_.end()) {
    it = devices_.emplace(device, DeviceState{SampleHistory(max_history_bytes_)}).first;
    order_.push_back(device);
  }
  DeviceState& st = it->second;
  st.history.add(s);
  const std::uint64_t cached = s.reserved > s.allocated ? s.reserved - s.allocated : 0;
  const double ext = external_fragmentation(s.largest_free_block, cached);
  st.sum_external += ext;
  st.max_external = std::max(st.max_external, ext);
  st.sum_cached += static_cast<double>(cached);
  st.max_cached = std::max(st.max_cached, cached);
  st.max_free_blocks = std::max(st.max_free_blocks, s.free_blocks);
}

const FragmentationAnalyzer::DeviceState& FragmentationAnalyzer::existing(const std::string& device) const {
  const auto it = devices_.find(device);
  GENESIS_CHECK(it != devices_.end(), "fragmentation analyser: no samples of device '", device, "'");
  return it->second;
}

const SampleHistory& FragmentationAnalyzer::history(const std::string& device) const {
  return existing(device).history;
}

FragmentationSummary FragmentationAnalyzer::summary(const std::string& device) const {
  const DeviceState& st = existing(device);
  const SampleHistory& h = st.history;
  const MemorySample& last = h.last();
  const double n = static_cast<double>(std::max<std::uint64_t>(1, h.count()));
  FragmentationSummary f;
  f.device = device;
  f.samples = h.count();
  f.current_fragmentation = last.fragmentation();
  f.avg_fragmentation = h.avg_fragmentation();
  f.max_fragmentation = h.max_fragmentation();
  f.current_cached = last.reserved > last.allocated ? last.reserved - last.allocated : 0;
  f.current_external = external_fragmentation(last.largest_free_block, f.current_cached);
  f.avg_external = st.sum_external / n;
  f.max_external = st.max_external;
  f.avg_cached = st.sum_cached / n;
  f.max_cached = st.max_cached;
  f.current_largest_free_block = last.largest_free_block;
  f.current_free_blocks = last.free_blocks;
  f.max_free_blocks = st.max_free_blocks;
  return f;
}

}  // namespace genesis::debug
