// How genesis-mem writes JSON.
#pragma once

#include <nlohmann/json.hpp>

namespace genesis::tools {

/// The error handler of every dump: bytes that are not UTF-8 (a file name is
/// any bytes on Linux, and reports carry trace and output paths) are written
/// as U+FFFD instead of failing the whole output.
inline constexpr nlohmann::json::error_handler_t kBadUtf8 = nlohmann::json::error_handler_t::replace;

}  // namespace genesis::tools
