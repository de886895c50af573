#include "genesis/core/error.h"

#include <cstdio>
#include <cstring>

namespace genesis {

namespace {
std::string with_location(const std::string& message, const char* file, int line) {
  // Only the file's base name: full build paths make messages unreadable.
  std::string f = file ? file : "?";
  auto slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return message + " [" + f + ":" + std::to_string(line) + "]";
}
}  // namespace

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(with_location(message, file, line)), message_(std::move(message)), file_(file), line_(line) {}

namespace detail {

void throw_invalid_argument(const char* file, int line, const std::string& msg) {
  throw InvalidArgumentError(msg, file, line);
}
void throw_type_mismatch(const char* file, int line, const std::string& msg) {
  throw TypeMismatchError(msg, file, line);
}
void throw_index_error(const char* file, int line, const std::string& msg) { throw IndexError(msg, file, line); }
void throw_out_of_memory(const char* file, int line, const std::string& msg) {
  throw OutOfMemoryError(msg, file, line);
}

void throw_file_error(const char* file, int line, const std::string& path, int err, const std::string& msg) {
  throw FileError(msg + ": " + std::strerror(err), err, path, file, line);
}

std::string format_address(unsigned long long value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", value);
  return buf;
}

std::string format_bytes(unsigned long long bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace detail
}  // namespace genesis
