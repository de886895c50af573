// Byte sizes written by people: "2GB", "512 MiB", "1.5gb", "4096".
#pragma once

#include <cstddef>
#include <string_view>

namespace genesis {

/// Parses a size. Units (case-insensitive): B; KB, MB, GB, TB (powers of
/// 1000); KiB, MiB, GiB, TiB (powers of 1024); a bare number is bytes.
/// Fractions are allowed ("1.5GB"). Throws InvalidArgumentError naming the
/// accepted forms for anything else, for negative values and for overflow.
std::size_t parse_bytes(std::string_view text);

}  // namespace genesis
