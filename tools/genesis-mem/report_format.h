// Numbers for people: bytes, seconds and percentages in genesis-mem's
// tables and live view.
#pragma once

#include <cstdint>
#include <string>

namespace genesis::tools {

/// "512 B", "1.5 KiB", "12.3 GiB".
std::string format_bytes(std::uint64_t bytes);
/// "0.25 s", "42.0 s", "12 min 5 s", "3 h 20 min".
std::string format_seconds(double seconds);
/// "15.3%".
std::string format_percent(double percent);

}  // namespace genesis::tools
