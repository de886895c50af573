// IpcHandle's text form: see include/genesis/cuda/ipc.h. Pure CPU code, kept
// apart from the CUDA calls in ipc.cpp so that it is tested everywhere.
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/cuda/ipc.h"

namespace genesis::cuda {

namespace {

constexpr std::string_view kPrefix = "genesis-ipc-v1";
constexpr char kHexDigits[] = "0123456789abcdef";

void append_hex(std::string& out, const std::uint8_t* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    out += kHexDigits[bytes[i] >> 4];
    out += kHexDigits[bytes[i] & 0xf];
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  // Show at most the start of the text: garbage may be long or binary.
  std::string shown(text.substr(0, 80));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  GENESIS_THROW(InvalidArgumentError, "IpcHandle::from_string: ", why, " in \"", shown,
                text.size() > 80 ? "...\"" : "\"",
                " (expected genesis-ipc-v1:<device>:<32 hex uuid>:<16 hex exporter>:<offset>:<nbytes>:"
                "<128 hex handle>, as IpcHandle::to_string() writes it)");
}

void parse_hex(std::string_view text, std::string_view field, const char* name, std::uint8_t* out,
               std::size_t n) {
  if (field.size() != 2 * n)
    bad(text, genesis::detail::str_cat("field ", name, " has ", field.size(), " characters, not ", 2 * n));
  for (std::size_t i = 0; i < n; ++i) {
    const int hi = hex_value(field[2 * i]);
    const int lo = hex_value(field[2 * i + 1]);
    if (hi < 0 || lo < 0) bad(text, genesis::detail::str_cat("field ", name, " is not hexadecimal"));
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
}

template <typename T>
T parse_decimal(std::string_view text, std::string_view field, const char* name) {
  T value{};
  // from_chars accepts no '+', no whitespace; a '-' only for signed T, which
  // is rejected below.
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc{} || end != field.data() + field.size())
    bad(text, genesis::detail::str_cat("field ", name, " is not a decimal number in range"));
  if (value < T{0}) bad(text, genesis::detail::str_cat("field ", name, " is negative"));
  return value;
}

}  // namespace

std::string IpcHandle::to_string() const {
  std::string s(kPrefix);
  s += ':';
  s += std::to_string(device);
  s += ':';
  append_hex(s, device_uuid.data(), device_uuid.size());
  s += ':';
  std::uint8_t ex[8];
  for (int i = 0; i < 8; ++i) ex[i] = static_cast<std::uint8_t>(exporter >> (56 - 8 * i));
  append_hex(s, ex, sizeof ex);
  s += ':';
  s += std::to_string(offset);
  s += ':';
  s += std::to_string(nbytes);
  s += ':';
  append_hex(s, handle.data(), handle.size());
  return s;
}

IpcHandle IpcHandle::from_string(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.front() == '\n' || t.front() == '\r'))
    t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\n' || t.back() == '\r'))
    t.remove_suffix(1);
  if (t.empty()) bad(text, "empty handle string");

  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = t.find(':', start);
    fields.push_back(t.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (fields[0] != kPrefix) {
    if (fields[0].starts_with("genesis-ipc-"))
      bad(text, genesis::detail::str_cat("unsupported handle version \"", fields[0], "\" (this build reads ",
                                         kPrefix, ")"));
    bad(text, "not a Genesis IPC handle (wrong prefix)");
  }
  if (fields.size() != 7)
    bad(text, genesis::detail::str_cat(fields.size(), " ':'-separated fields instead of 7"));

  IpcHandle h;
  h.device = parse_decimal<int>(text, fields[1], "device");
  parse_hex(text, fields[2], "uuid", h.device_uuid.data(), h.device_uuid.size());
  std::uint8_t ex[8];
  parse_hex(text, fields[3], "exporter", ex, sizeof ex);
  for (int i = 0; i < 8; ++i) h.exporter = h.exporter << 8 | ex[i];
  h.offset = parse_decimal<std::size_t>(text, fields[4], "offset");
  h.nbytes = parse_decimal<std::size_t>(text, fields[5], "nbytes");
  if (h.offset + h.nbytes < h.offset) bad(text, "offset + nbytes overflows");
  parse_hex(text, fields[6], "handle", h.handle.data(), h.handle.size());
  return h;
}

}  // namespace genesis::cuda
