#include "genesis/cuda/device.h"

#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {

Device parse_device(std::string_view text) {
  // Syntax first: a malformed string is refused the same way on every machine.
  Device d = Device::from_string(text, 0);
  if (text == "cuda") d = Device(DeviceType::kCUDA, current_device_or_zero());
  validate_device(d);
  return d;
}

void validate_device(const Device& device) {
  if (!device.is_cuda()) return;
  const int count = device_count();
  GENESIS_CHECK(count > 0, "device '", device.str(), "' requested but no CUDA GPU is available on this machine",
                compiled_with_cuda() ? "" : " (Genesis was built without CUDA)");
  const int index = device.index();
  GENESIS_CHECK(index >= 0 && index < count, "device '", device.str(), "' does not exist: this machine has ", count,
                " CUDA device", count == 1 ? "" : "s", " (valid indices 0..", count - 1, ")");
}

}  // namespace genesis::cuda
