// Device: where memory lives ("cpu", "cuda", "cuda:N").
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace genesis {

enum class DeviceType : std::uint8_t { kCPU = 0, kCUDA = 1 };

/// A device: a type and, for CUDA, an index. A plain value, cheap to copy
/// and compare: nothing here asks a driver whether the GPU exists (so code and
/// tests can name "cuda:3" on any machine). cuda::parse_device and
/// cuda::validate_device (genesis/cuda/device.h) check against the GPUs of
/// the machine.
class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index = 0) : type_(type), index_(type == DeviceType::kCPU ? 0 : index) {}

  /// Reads "cpu", "cuda" or "cuda:N" (N a non-negative integer of at most six
  /// digits). Plain "cuda" names no index: it becomes `unnamed_cuda_index`
  /// (cuda::parse_device passes the calling thread's current device). Throws
  /// InvalidArgumentError for any other string; never checks that the device
  /// exists.
  static Device from_string(std::string_view text, int unnamed_cuda_index = 0);

  constexpr DeviceType type() const noexcept { return type_; }
  constexpr int index() const noexcept { return index_; }
  constexpr bool is_cpu() const noexcept { return type_ == DeviceType::kCPU; }
  constexpr bool is_cuda() const noexcept { return type_ == DeviceType::kCUDA; }

  /// "cpu" or "cuda:N".
  std::string str() const;

  friend constexpr bool operator==(const Device& a, const Device& b) noexcept {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend constexpr bool operator!=(const Device& a, const Device& b) noexcept { return !(a == b); }

 private:
  DeviceType type_ = DeviceType::kCPU;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace genesis

template <>
struct std::hash<genesis::Device> {
  std::size_t operator()(const genesis::Device& d) const noexcept {
    return (static_cast<std::size_t>(d.type()) << 16) ^ static_cast<std::size_t>(d.index());
  }
};
