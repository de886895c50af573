#include "genesis/core/bytes.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

#include "genesis/core/error.h"

namespace genesis {

std::size_t parse_bytes(std::string_view text) {
  const std::string original(text);
  auto fail = [&](const char* why) {
    GENESIS_CHECK(false, "invalid size '", original, "': ", why,
                  "; expected a number with an optional unit B, KB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB "
                  "(x1024), e.g. \"2GB\" or \"512MiB\"");
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty()) fail("empty");
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) fail(text.front() == '-' ? "negative sizes are not allowed" : "no number");
  const std::string number(text.substr(0, i));
  if (number.find('.') != number.rfind('.')) fail("malformed number");
  std::string_view unit = text.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.remove_prefix(1);
  std::string u;
  for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (u.empty() || u == "b") scale = 1;
  else if (u == "kb" || u == "k") scale = 1e3;
  else if (u == "mb" || u == "m") scale = 1e6;
  else if (u == "gb" || u == "g") scale = 1e9;
  else if (u == "tb" || u == "t") scale = 1e12;
  else if (u == "kib") scale = 1024.0;
  else if (u == "mib") scale = 1024.0 * 1024.0;
  else if (u == "gib") scale = 1024.0 * 1024.0 * 1024.0;
  else if (u == "tib") scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else fail("unknown unit");
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 62;
  // A whole number of bytes exactly (through a double, 2^53 and up would
  // come back as a neighbour, and text written from a size would not read
  // back as that size).
  if (scale == 1 && number.find('.') == std::string::npos) {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || end != number.data() + number.size() || n >= kLimit) fail("too large (the limit is 2^62 bytes)");
    return static_cast<std::size_t>(n);
  }
  const double value = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(value) || value >= static_cast<double>(kLimit)) fail("too large (the limit is 2^62 bytes)");
  return static_cast<std::size_t>(value + 0.5);
}

}  // namespace genesis
