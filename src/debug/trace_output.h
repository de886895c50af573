// Writing trace files: a plain or gzip-compressed output file written in
// chunks, shared by the writers of the CSV trace format (trace.cpp: the
// allocator's own history; torch_snapshot_csv.cpp: PyTorch snapshots).
// Private to src/debug.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

// Defined by CMake (1 when zlib was found); 0 when built some other way.
#ifndef GENESIS_WITH_ZLIB
#define GENESIS_WITH_ZLIB 0
#endif
#if GENESIS_WITH_ZLIB
#include <zlib.h>
#endif

namespace genesis::debug::detail {

/// True when `path` ends in ".gz": the writers compress exactly then.
inline bool gzip_name(std::string_view path) noexcept {
  return path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
}

/// A file written in chunks, gzip-compressed when asked. Throws
/// InvalidArgumentError when it cannot be created (or gzip without zlib) and
/// genesis::Error when a write or the final close fails (disk full): close()
/// must be called for the data to count as written.
class OutputFile {
 public:
  OutputFile(const std::string& path, bool gzip);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);
  void close();

 private:
  std::string path_;
  std::FILE* plain_ = nullptr;
#if GENESIS_WITH_ZLIB
  gzFile gz_ = nullptr;
#endif
};

/// Appends `v` in decimal.
inline void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 24 digits always suffice for 64 bits
  out.append(buf, end);
}

}  // namespace genesis::debug::detail
