#include "genesis/core/device.h"

#include <charconv>
#include <string>

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis {

Device Device::parse(std::string_view text) {
  auto fail = [&]() {
    GENESIS_CHECK(false, "invalid device string '", std::string(text),
                  "': expected 'cpu', 'cuda' or 'cuda:N' with N a non-negative integer");
  };
  if (text == "cpu") return Device(DeviceType::kCPU);
  if (text == "cuda") {
    Device d(DeviceType::kCUDA, cuda::current_device_or_zero());
    d.validate();
    return d;
  }
  if (text.substr(0, 5) != "cuda:") fail();
  std::string_view digits = text.substr(5);
  if (digits.empty() || digits.size() > 6) fail();
  int index = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || index < 0) fail();
  Device d(DeviceType::kCUDA, index);
  d.validate();
  return d;
}

void Device::validate() const {
  if (!is_cuda()) return;
  int count = cuda::device_count();
  GENESIS_CHECK(count > 0, "device '", str(), "' requested but no CUDA GPU is available on this machine",
                cuda::compiled_with_cuda() ? "" : " (Genesis was built without CUDA)");
  GENESIS_CHECK(index_ >= 0 && index_ < count, "device '", str(), "' does not exist: this machine has ", count,
                " CUDA device", count == 1 ? "" : "s", " (valid indices 0..", count - 1, ")");
}

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace genesis
