// The allocator source: exact figures of CachingAllocators in this process,
// on the steady clock (Note [Memory sources]).
#include <memory>
#include <mutex>

#include "genesis/core/error.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/runtime.h"
#include "genesis/debug/memory_source.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "source_util.h"

namespace genesis::debug {

namespace {

class AllocatorSource final : public MemorySource {
 public:
  explicit AllocatorSource(std::vector<NamedAllocator> allocators) : allocators_(std::move(allocators)) {
    for (const NamedAllocator& a : allocators_) {
      GENESIS_CHECK(a.allocator != nullptr, "allocator source: allocator '", a.id, "' is null");
      GENESIS_CHECK(!a.id.empty(), "allocator source: an allocator has an empty id");
      for (const SourceDevice& d : devices_) GENESIS_CHECK(d.id != a.id, "allocator source: id '", a.id, "' twice");
      const std::uint64_t total = a.allocator->upstream().mem_info().total_bytes;
      devices_.push_back(SourceDevice{a.id, a.name.empty() ? a.allocator->upstream().name() : a.name, total});
    }
    peaks_.resize(allocators_.size());
    free_blocks_.assign(allocators_.size(), 0);
    free_blocks_at_.assign(allocators_.size(), 0);
    // The first look at each allocator's peaks, so that peaks from before
    // the source opened are not reported as peaks seen while it was open.
    for (std::size_t i = 0; i < allocators_.size(); ++i) {
      MemorySample ignored;
      source_util::fill_from_stats(ignored, allocators_[i].allocator->stats(), peaks_[i]);
    }
  }

  std::string describe() const override {
    std::string ids;
    for (const SourceDevice& d : devices_) ids += (ids.empty() ? "" : ", ") + d.id;
    return "allocators (" + ids + ")";
  }
  std::vector<SourceDevice> devices() const override { return devices_; }

  MemorySample sample(const std::string& device) override {
    const std::size_t i = index(device);
    const memory::CachingAllocator& a = *allocators_[i].allocator;
    MemorySample s;
    s.time_ns = now_ns();
    const memory::MemoryStats stats = a.stats();
    std::lock_guard<std::mutex> lock(mutex_);
    source_util::fill_from_stats(s, stats, peaks_[i]);
    // Counting free blocks walks every block of the allocator (a snapshot):
    // with tens of thousands of live allocations that is most of a round's
    // cost, so it is refreshed at most once a second; the count changes
    // slowly next to the other figures, which are exact every round.
    if (s.time_ns >= free_blocks_at_[i] + kFreeBlocksEvery || free_blocks_at_[i] == 0) {
      free_blocks_[i] = source_util::count_free_blocks(a.snapshot());
      free_blocks_at_[i] = s.time_ns;
    }
    s.free_blocks = free_blocks_[i];
    s.total = devices_[i].total;
    source_util::set_free(s);
    return s;
  }

  bool has_sites() const override { return true; }
  std::vector<SiteStat> sites(const std::string& device) override {
    return source_util::sites_of(allocators_[index(device)].allocator->large_allocations(0));
  }

  std::uint64_t now_ns() const override { return source_util::steady_now_ns(); }

  bool advance_to(std::uint64_t time_ns, const StopFlag& stop) override {
    return source_util::sleep_until_steady(time_ns, stop);
  }

 private:
  static constexpr std::uint64_t kFreeBlocksEvery = 1'000'000'000;  // ns
  std::vector<std::uint64_t> free_blocks_;     // last count per allocator (guarded by mutex_)
  std::vector<std::uint64_t> free_blocks_at_;  // when it was taken (steady ns; 0: never)

  std::size_t index(const std::string& device) const {
    for (std::size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i].id == device) return i;
    source_util::throw_unknown_device(device, describe(), devices_);
  }

  std::vector<NamedAllocator> allocators_;
  std::vector<SourceDevice> devices_;
  std::mutex mutex_;  // peaks_
  std::vector<source_util::PeakTracker> peaks_;
};

}  // namespace

std::unique_ptr<MemorySource> open_allocator_source(std::vector<NamedAllocator> allocators) {
  return std::make_unique<AllocatorSource>(std::move(allocators));
}

std::vector<NamedAllocator> process_cuda_allocators() {
  std::vector<NamedAllocator> out;
  const int n = cuda::device_count();
  for (int i = 0; i < n; ++i) {
    std::string name = "cuda:" + std::to_string(i);
    try {
      name += " (" + cuda::get_device_name(i) + ")";
    } catch (const Error&) {
      // The name is only for reports.
    }
    out.push_back(NamedAllocator{std::to_string(i), std::move(name), &memory::cuda_allocator(i)});
  }
  return out;
}

}  // namespace genesis::debug
