#include "genesis/core/device.h"

#include <charconv>
#include <string>

#include "genesis/core/error.h"

namespace genesis {

Device Device::from_string(std::string_view text, int unnamed_cuda_index) {
  auto fail = [&]() {
    GENESIS_CHECK(false, "invalid device string '", std::string(text),
                  "': expected 'cpu', 'cuda' or 'cuda:N' with N a non-negative integer");
  };
  if (text == "cpu") return Device(DeviceType::kCPU);
  if (text == "cuda") return Device(DeviceType::kCUDA, unnamed_cuda_index);
  if (text.substr(0, 5) != "cuda:") fail();
  std::string_view digits = text.substr(5);
  if (digits.empty() || digits.size() > 6) fail();
  int index = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || index < 0) fail();
  return Device(DeviceType::kCUDA, index);
}

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace genesis
