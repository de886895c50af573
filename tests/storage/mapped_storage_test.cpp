#include "../support/process_util.h"
#include "genesis/storage/mapped_storage.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "genesis/core/error.h"

namespace genesis::storage {
namespace {

// A fresh directory under /tmp (mkdtemp), removed with its contents when the
// test ends, pass or fail.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/genesis-mapped-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p != nullptr) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> iota_bytes(std::size_t n) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

using genesis::test::error_message;
using genesis::test::run_in_child;

TEST(MappedStorageTest, WritePlusFlushCloseThenReadInAnotherProcess) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("data.bin");
  {
    MappedStorage m(path, {100}, DType::kInt32, "w+");
    EXPECT_EQ(m.nbytes(), 400u);
    EXPECT_EQ(m.mode(), "w+");
    EXPECT_TRUE(m.is_writable());
    auto* p = static_cast<int32_t*>(m.mutable_data());
    for (int i = 0; i < 100; ++i) p[i] = i * i - 50;
    m.flush();
    m.close();
    EXPECT_TRUE(m.is_closed());
  }
  EXPECT_EQ(std::filesystem::file_size(path), 400u);
  const int rc = run_in_child([&] {
    MappedStorage r(path, {100}, DType::kInt32, "r");
    const auto* q = static_cast<const int32_t*>(r.data());
    for (int i = 0; i < 100; ++i) {
      if (q[i] != i * i - 50) return 3;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(MappedStorageTest, WritePlusOverwritesAndSizesTheFile) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("old.bin");
  write_file(path, iota_bytes(10000));
  {
    MappedStorage m(path, {2, 3}, DType::kFloat64, "w+", 16);
    const auto* p = static_cast<const uint8_t*>(m.data());
    for (std::size_t i = 0; i < m.nbytes(); ++i) ASSERT_EQ(p[i], 0) << "w+ must start from an empty file";
  }
  EXPECT_EQ(std::filesystem::file_size(path), 16u + 48u);
}

TEST(MappedStorageTest, ReadPlusModificationPersists) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("rp.bin");
  auto bytes = iota_bytes(64);
  write_file(path, bytes);
  {
    MappedStorage m(path, {64}, DType::kUInt8, "r+");
    EXPECT_EQ(static_cast<const uint8_t*>(m.data())[10], bytes[10]);
    static_cast<uint8_t*>(m.mutable_data())[10] = 0xEE;
  }  // destructor flushes and unmaps
  bytes[10] = 0xEE;
  EXPECT_EQ(read_bytes(path), bytes);
}

TEST(MappedStorageTest, CopyOnWriteModificationDoesNotPersist) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("cow.bin");
  const auto bytes = iota_bytes(4096 + 100);
  write_file(path, bytes);
  {
    MappedStorage m(path, {4096 + 100}, DType::kUInt8, "c");
    EXPECT_TRUE(m.is_writable());
    auto* p = static_cast<uint8_t*>(m.mutable_data());
    std::memset(p, 0x11, m.nbytes());
    EXPECT_EQ(p[4100], 0x11);  // visible through this mapping
    m.flush();                 // no-op in mode 'c'
    m.close();
  }
  EXPECT_EQ(read_bytes(path), bytes);
}

TEST(MappedStorageTest, ReadOnlyMutableDataThrows) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("ro.bin");
  write_file(path, iota_bytes(8));
  MappedStorage m(path, {8}, DType::kUInt8);  // default mode 'r'
  EXPECT_FALSE(m.is_writable());
  const auto msg = error_message([&] { m.mutable_data(); });
  EXPECT_NE(msg.find("read-only"), std::string::npos) << msg;
  EXPECT_NO_THROW(m.flush());  // no-op
  EXPECT_EQ(static_cast<const uint8_t*>(m.data())[1], iota_bytes(8)[1]);
}

TEST(MappedStorageTest, ShortFileNamesBothSizes) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("short.bin");
  write_file(path, iota_bytes(30));
  for (const char* mode : {"r", "c"}) {
    const auto msg = error_message([&] { MappedStorage(path, {8}, DType::kFloat32, mode); });
    EXPECT_NE(msg.find("30"), std::string::npos) << mode << ": " << msg;
    EXPECT_NE(msg.find("32"), std::string::npos) << mode << ": " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << mode << ": " << msg;
  }
  // The offset counts towards the required size.
  const auto msg = error_message([&] { MappedStorage(path, {6}, DType::kFloat32, "r", 10); });
  EXPECT_NE(msg.find("34"), std::string::npos) << msg;
  EXPECT_EQ(std::filesystem::file_size(path), 30u) << "a failed open must not change the file";
}

TEST(MappedStorageTest, ReadWriteGrowsAShortFileWithZerosAsNumpyMemmapDoes) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("grow.bin");
  write_file(path, iota_bytes(30));
  {
    MappedStorage m(path, {40}, DType::kUInt8, "readwrite");  // numpy.memmap's name for r+
    EXPECT_EQ(m.mode(), "r+");
    const auto* p = static_cast<const unsigned char*>(m.data());
    EXPECT_EQ(p[29], iota_bytes(30)[29]);
    EXPECT_EQ(p[30], 0);
    EXPECT_EQ(p[39], 0);
  }
  EXPECT_EQ(std::filesystem::file_size(path), 40u);
  // A longer file is never shrunk.
  { MappedStorage m(path, {10}, DType::kUInt8, "r+"); }
  EXPECT_EQ(std::filesystem::file_size(path), 40u);
}

TEST(MappedStorageTest, BadModeListsValidModes) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("m.bin");
  write_file(path, iota_bytes(8));
  for (const char* mode : {"w", "rw", "", "x", "R", "read"}) {
    const auto msg = error_message([&] { MappedStorage(path, {8}, DType::kUInt8, mode); });
    EXPECT_NE(msg.find("unknown mode"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'r+'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'w+'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'c'"), std::string::npos) << msg;
  }
}

TEST(MappedStorageTest, MissingFileNamesPathAndReason) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("missing.bin");
  for (const char* mode : {"r", "r+", "c"}) {
    const auto msg = error_message([&] { MappedStorage(path, {8}, DType::kUInt8, mode); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(MappedStorageTest, FifoAndDeviceAreRefusedNotWaitedOn) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO for reading waits for a writer: without one the test
  // would hang, so run it in a child that an alarm ends after 10 s.
  const int status = run_in_child([&] {
    ::alarm(10);
    for (const char* mode : {"r", "r+", "c", "w+"}) {
      const auto msg = error_message([&] { MappedStorage(fifo, {4}, DType::kUInt8, mode); });
      if (msg.find("is not a regular file (a FIFO)") == std::string::npos) return 1;
    }
    const auto msg = error_message([] { MappedStorage("/dev/null", {4}, DType::kUInt8, "w+"); });
    return msg.find("is not a regular file (a character device)") == std::string::npos ? 2 : 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(MappedStorageTest, NegativeOffsetAndDimsAreRejected) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("neg.bin");
  EXPECT_THROW(MappedStorage(path, {8}, DType::kUInt8, "w+", -1), InvalidArgumentError);
  EXPECT_THROW(MappedStorage(path, {-8}, DType::kUInt8, "w+"), InvalidArgumentError);
}

TEST(MappedStorageTest, CloseWithoutExplicitFlushKeepsData) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("noflush.bin");
  {
    MappedStorage m(path, {1000}, DType::kUInt8, "w+");
    std::memset(m.mutable_data(), 0xAB, m.nbytes());
    m.close();
    m.close();  // idempotent
    EXPECT_THROW(m.data(), InvalidArgumentError);
    EXPECT_THROW(m.mutable_data(), InvalidArgumentError);
    EXPECT_THROW(m.flush(), InvalidArgumentError);
  }
  const int rc = run_in_child([&] {
    MappedStorage r(path, {1000}, DType::kUInt8);
    const auto* q = static_cast<const uint8_t*>(r.data());
    for (int i = 0; i < 1000; ++i) {
      if (q[i] != 0xAB) return 3;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(MappedStorageTest, NonPageAlignedOffset) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("offset.bin");
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  auto bytes = iota_bytes(3 * page);
  write_file(path, bytes);
  for (const int64_t offset : {int64_t{1}, int64_t{13}, static_cast<int64_t>(page) - 3,
                               static_cast<int64_t>(page) + 5}) {
    MappedStorage r(path, {int64_t(page)}, DType::kUInt8, "r", offset);
    EXPECT_EQ(r.offset(), offset);
    ASSERT_EQ(std::memcmp(r.data(), bytes.data() + offset, page), 0) << "offset " << offset;
  }
  {
    // Writing through an unaligned r+ mapping touches exactly the right bytes.
    const int64_t offset = 4097 % static_cast<int64_t>(page) + static_cast<int64_t>(page);
    MappedStorage m(path, {3}, DType::kInt16, "r+", offset);
    const int16_t vals[3] = {-1, 0x1234, 7};
    std::memcpy(m.mutable_data(), vals, sizeof(vals));
    m.close();
    std::memcpy(bytes.data() + offset, vals, sizeof(vals));
  }
  EXPECT_EQ(read_bytes(path), bytes);
  {
    // w+ with an unaligned offset sizes the file to offset + nbytes.
    const auto wpath = dir.file("offset_w.bin");
    MappedStorage w(wpath, {5}, DType::kInt32, "w+", 4099);
    // 4099 is not a multiple of 4: the pointer is misaligned for int32, so
    // go through memcpy rather than an int32_t* store.
    const int32_t v = 99;
    std::memcpy(static_cast<std::byte*>(w.mutable_data()) + 16, &v, sizeof(v));
    w.close();
    const auto out = read_bytes(wpath);
    ASSERT_EQ(out.size(), 4099u + 20u);
    int32_t last = 0;
    std::memcpy(&last, out.data() + 4099 + 16, 4);
    EXPECT_EQ(last, 99);
  }
}

TEST(MappedStorageTest, ZeroSizeAndMove) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const auto path = dir.file("zero.bin");
  {
    MappedStorage z(path, {0, 4}, DType::kFloat32, "w+");
    EXPECT_EQ(z.nbytes(), 0u);
    EXPECT_EQ(z.data(), nullptr);
  }
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
  MappedStorage r(path, {0}, DType::kFloat32, "r");
  EXPECT_EQ(r.data(), nullptr);

  const auto path2 = dir.file("move.bin");
  MappedStorage a(path2, {4}, DType::kUInt8, "w+");
  static_cast<uint8_t*>(a.mutable_data())[2] = 9;
  MappedStorage b(std::move(a));
  EXPECT_TRUE(a.is_closed());
  EXPECT_EQ(static_cast<const uint8_t*>(b.data())[2], 9);
  r = std::move(b);
  EXPECT_EQ(static_cast<const uint8_t*>(r.data())[2], 9);
  r.close();
  EXPECT_EQ(read_bytes(path2)[2], 9);
}

}  // namespace
}  // namespace genesis::storage
