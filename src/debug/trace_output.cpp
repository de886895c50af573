// Trace output files (trace_output.h).
#include "trace_output.h"

#include <cerrno>
#include <cstring>

#include "genesis/core/error.h"

namespace genesis::debug::detail {

OutputFile::OutputFile(const std::string& path, bool gzip) : path_(path) {
  if (!gzip) {
    plain_ = std::fopen(path.c_str(), "wb");
    if (plain_ == nullptr) GENESIS_THROW_FILE(path, errno, "cannot create trace '", path, "'");
    return;
  }
#if GENESIS_WITH_ZLIB
  gz_ = gzopen(path.c_str(), "wb6");
  if (gz_ == nullptr) GENESIS_THROW_FILE(path, errno != 0 ? errno : EIO, "cannot create trace '", path, "'");
#else
  GENESIS_THROW(InvalidArgumentError, "cannot write '", path,
                "': this Genesis was built without zlib (no gzip); write a .csv instead");
#endif
}

OutputFile::~OutputFile() {
  if (plain_ != nullptr) std::fclose(plain_);
#if GENESIS_WITH_ZLIB
  if (gz_ != nullptr) gzclose(gz_);
#endif
}

void OutputFile::write(std::string_view data) {
  if (data.empty()) return;
  bool ok = true;
  if (plain_ != nullptr) {
    ok = std::fwrite(data.data(), 1, data.size(), plain_) == data.size();
  } else {
#if GENESIS_WITH_ZLIB
    ok = gzwrite(gz_, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size());
#endif
  }
  if (!ok) GENESIS_THROW(Error, "error writing trace '", path_, "': ", std::strerror(errno));
}

void OutputFile::close() {
  int rc = 0;
  if (plain_ != nullptr) {
    rc = std::fclose(plain_);
    plain_ = nullptr;
  }
#if GENESIS_WITH_ZLIB
  if (gz_ != nullptr) {
    rc = gzclose(gz_) == Z_OK ? 0 : -1;
    gz_ = nullptr;
  }
#endif
  if (rc != 0) GENESIS_THROW(Error, "error writing trace '", path_, "': ", std::strerror(errno));
}

}  // namespace genesis::debug::detail
