// Device: where memory lives ("cpu", "cuda", "cuda:N").
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace genesis {

enum class DeviceType : std::uint8_t { kCPU = 0, kCUDA = 1 };

/// A device: a type and, for CUDA, an index. Cheap to copy and compare.
///
/// Construction from parts does not check that the GPU exists (so code and
/// tests can name "cuda:3" on any machine); Device::parse and validate() do.
class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index = 0) : type_(type), index_(type == DeviceType::kCPU ? 0 : index) {}

  /// Parses "cpu", "cuda" (the current device, index 0 unless a device guard
  /// changed it), "cuda:N". Throws InvalidArgumentError for any other string,
  /// and for a CUDA index that does not exist on this machine (including any
  /// CUDA device when the machine has no GPU).
  static Device parse(std::string_view text);

  /// Throws InvalidArgumentError if this is a CUDA device that does not exist.
  void validate() const;

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
