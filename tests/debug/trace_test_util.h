// Helpers of the trace and replay tests: a temporary directory per test,
// writing plain and gzip files, the message of an expected error, and where
// the bundled traces live.
#pragma once

#include "genesis/core/error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#if __has_include(<zlib.h>)
#include <zlib.h>
#define GENESIS_TEST_HAVE_ZLIB 1
#else
#define GENESIS_TEST_HAVE_ZLIB 0
#endif

namespace genesis::debug::testing_support {

// The message of the exception of type E (by default InvalidArgumentError)
// that `fn` throws ("" when none).
template <class E = InvalidArgumentError, class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

/// A fresh directory under the test temp dir, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("genesis_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write_plain(const std::string& name, const std::string& content) const {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  /// Writes `content` gzip-compressed; "" when the tests have no zlib.
  std::string write_gzip(const std::string& name, const std::string& content) const {
#if GENESIS_TEST_HAVE_ZLIB
    const std::string p = path(name);
    gzFile f = gzopen(p.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (f == nullptr) return "";
    EXPECT_EQ(gzwrite(f, content.data(), static_cast<unsigned>(content.size())), static_cast<int>(content.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return p;
#else
    (void)name;
    (void)content;
    return "";
#endif
  }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  std::filesystem::path dir_;
};

/// data/traces/<name> of this source tree ("" if it is not there).
inline std::string bundled_trace(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "data" /
                            "traces" / name;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace genesis::debug::testing_support
