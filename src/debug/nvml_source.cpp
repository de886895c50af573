// The NVML source: every GPU's used memory as the driver counts it (Note
// [Memory sources]). No allocator behind the figures: exact = false.
#include <memory>

#include "genesis/core/error.h"
#include "genesis/debug/memory_source.h"
#include "nvml_loader.h"
#include "source_util.h"

namespace genesis::debug {

namespace {

class NvmlSource final : public MemorySource {
 public:
  explicit NvmlSource(const std::vector<int>& wanted) : gpus_(nvml::open_gpus(session_, wanted)) {
    for (const nvml::Gpu& g : gpus_) devices_.push_back(SourceDevice{std::to_string(g.index), g.name, g.total});
  }

  std::string describe() const override { return "nvml"; }
  std::vector<SourceDevice> devices() const override { return devices_; }

  MemorySample sample(const std::string& device) override {
    const nvml::Gpu& g = gpu(device);
    const nvml::Api& api = session_.api();
    nvml::MemoryFigures m;
    const nvml::Return r = nvml::memory_figures(api, g.handle, m);
    if (r != nvml::kSuccess) {
      GENESIS_THROW(Error, "NVML cannot read the memory of GPU ", g.index, ": ", nvml::error_text(api, r));
    }
    MemorySample s;
    s.time_ns = now_ns();
    s.total = m.total;
    s.used = m.used;
    s.free = m.free;  // total - used: the driver's reserve is in neither
    // No allocator behind the figures: the driver's used memory stands for them.
    s.allocated = s.reserved = s.active = m.used;
    s.exact = false;
    return s;
  }

  std::uint64_t now_ns() const override { return source_util::steady_now_ns(); }

  bool advance_to(std::uint64_t time_ns, const StopFlag& stop) override {
    return source_util::sleep_until_steady(time_ns, stop);
  }

 private:
  const nvml::Gpu& gpu(const std::string& device) const {
    for (std::size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i].id == device) return gpus_[i];
    source_util::throw_unknown_device(device, describe(), devices_);
  }

  nvml::Session session_;  // first: initialised before and shut down after the GPUs' use
  std::vector<nvml::Gpu> gpus_;
  std::vector<SourceDevice> devices_;
};

}  // namespace

bool nvml_available() {
  static const bool available = [] {
    try {
      nvml::Session session;
      return true;
    } catch (...) {
      return false;
    }
  }();
  return available;
}

std::unique_ptr<MemorySource> open_nvml_source(const std::vector<int>& devices) {
  return std::make_unique<NvmlSource>(devices);
}

}  // namespace genesis::debug
