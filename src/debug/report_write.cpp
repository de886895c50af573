#include <cerrno>
#include <cstdio>
#include <cstring>

#include "genesis/core/error.h"
#include "genesis/debug/reports.h"

namespace genesis::debug {

void write_report(const std::string& path, const std::string& text) {
  GENESIS_CHECK(!path.empty(), "report path is empty");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    GENESIS_THROW_FILE(path, errno, "cannot write report '", path, "'");
  }
  const std::size_t written = text.empty() ? 0 : std::fwrite(text.data(), 1, text.size(), f);
  int err = written == text.size() ? 0 : errno;
  // Buffered writes fail late: a full disk shows up at flush or close.
  if (std::fflush(f) != 0 && err == 0) err = errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err != 0) {
    GENESIS_THROW_FILE(path, err, "cannot write report '", path, "'");
  }
}

}  // namespace genesis::debug
