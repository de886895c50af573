// The Storage factories over shared memory and memory-mapped files
// (genesis/storage/storage_factories.h): the Storage's bytes are the mapping,
// the mapping lives as long as the Storage or a copy of it does, mode "r"
// gives a read-only Storage, writes reach the segment or the file, and bad
// arguments are clear errors.
#include "genesis/storage/storage_factories.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "genesis/core/error.h"

namespace genesis::storage {
namespace {

std::string unique_shm_name(const char* what) {
  static int counter = 0;
  return "/genesis-factory-test-" + std::to_string(::getpid()) + "-" + what + "-" + std::to_string(counter++);
}

// A file under a fresh /tmp directory, removed with it when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::vector<std::uint8_t>& bytes) {
    char tmpl[] = "/tmp/genesis-factory-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr) return;
    dir_ = dir;
    path_ = dir_ + "/data.bin";
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::vector<std::uint8_t> contents() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  std::string dir_, path_;
};

TEST(SharedMemoryStorageTest, IsTheMappingOfTheSegment) {
  const std::string name = unique_shm_name("mapping");
  auto shm = std::make_shared<SharedStorage>(std::vector<std::int64_t>{2, 3}, DType::kInt32, name);
  const Storage s = shared_memory_storage(shm);
  EXPECT_EQ(s.data_ptr(), shm->data());
  EXPECT_EQ(s.shape(), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(s.dtype(), DType::kInt32);
  EXPECT_EQ(s.nbytes(), 24u);
  EXPECT_EQ(s.device().type(), DeviceType::kCPU);
  EXPECT_FALSE(s.is_read_only());
  // A write through the Storage is seen by another mapping of the name.
  for (int i = 0; i < 6; ++i) s.data<std::int32_t>()[i] = 10 * i + 1;
  SharedStorage other = SharedStorage::attach(name, {2, 3}, DType::kInt32);
  const auto* seen = static_cast<const std::int32_t*>(other.data());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(seen[i], 10 * i + 1) << i;
  EXPECT_TRUE(shm->unlink());
}

TEST(SharedMemoryStorageTest, TheLastUserClosesTheMapping) {
  auto shm = std::make_shared<SharedStorage>(std::vector<std::int64_t>{8}, DType::kFloat32);
  Storage s = shared_memory_storage(shm);
  Storage copy = s;
  s = Storage();
  EXPECT_FALSE(shm->is_closed()) << "a copy still uses the mapping";
  copy.data<float>()[7] = 2.5f;
  copy = Storage();
  EXPECT_TRUE(shm->is_closed()) << "nothing uses the mapping any more";
  EXPECT_FALSE(shm->name().empty());  // the handle still names the segment
}

TEST(SharedMemoryStorageTest, UnnamedSegmentIsGoneWithItsLastUser) {
  std::string name;
  {
    auto shm = std::make_shared<SharedStorage>(std::vector<std::int64_t>{4}, DType::kUInt8);
    name = shm->name();
    ASSERT_TRUE(shm->auto_unlink());
    Storage s = shared_memory_storage(std::move(shm));
    s.data<std::uint8_t>()[0] = 7;
  }
  EXPECT_THROW(SharedStorage::attach(name, {4}, DType::kUInt8), InvalidArgumentError) << name << " still exists";
}

TEST(SharedMemoryStorageTest, CreatesFromShapeAndDtype) {
  const Storage s = shared_memory_storage({3}, DType::kFloat64);
  ASSERT_TRUE(s.defined());
  EXPECT_EQ(s.nbytes(), 24u);
  s.data<double>()[2] = 1.5;
  EXPECT_EQ(s.data<double>()[2], 1.5);
  const Storage empty = shared_memory_storage({0}, DType::kFloat32);
  EXPECT_EQ(empty.nbytes(), 0u);
}

TEST(SharedMemoryStorageTest, RefusesNullClosedAndBadArguments) {
  EXPECT_THROW(shared_memory_storage(std::shared_ptr<SharedStorage>()), InvalidArgumentError);
  auto shm = std::make_shared<SharedStorage>(std::vector<std::int64_t>{2}, DType::kUInt8);
  shm->close();
  try {
    shared_memory_storage(shm);
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(shared_memory_storage({-1}, DType::kUInt8), InvalidArgumentError);
  EXPECT_THROW(shared_memory_storage({2}, DType::kUInt8, std::string("no-leading-slash")), InvalidArgumentError);
}

TEST(MappedFileStorageTest, ModeRIsReadOnlyAndHoldsTheFile) {
  TempFile f({1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_TRUE(f.ok());
  const Storage s = mapped_file_storage(f.path(), {2, 2}, DType::kUInt8, "r", 2);
  EXPECT_TRUE(s.is_read_only());
  EXPECT_EQ(s.shape(), (std::vector<std::int64_t>{2, 2}));
  const auto* p = s.data<std::uint8_t>();
  EXPECT_EQ(std::vector<std::uint8_t>(p, p + 4), (std::vector<std::uint8_t>{3, 4, 5, 6}));
  EXPECT_THROW(s.check_writable("a test write"), Error);
}

TEST(MappedFileStorageTest, ModeRPlusWritesReachTheFileWhenTheLastUserGoes) {
  TempFile f({0, 0, 0, 0});
  ASSERT_TRUE(f.ok());
  auto map = std::make_shared<MappedStorage>(f.path(), std::vector<std::int64_t>{4}, DType::kUInt8, "r+");
  Storage s = mapped_file_storage(map);
  EXPECT_FALSE(s.is_read_only());
  std::memcpy(s.data_ptr(), "\x09\x08\x07\x06", 4);
  s = Storage();
  EXPECT_TRUE(map->is_closed());
  EXPECT_EQ(f.contents(), (std::vector<std::uint8_t>{9, 8, 7, 6}));
}

TEST(MappedFileStorageTest, ModeCNeverChangesTheFile) {
  TempFile f({1, 1, 1, 1});
  ASSERT_TRUE(f.ok());
  {
    const Storage s = mapped_file_storage(f.path(), {4}, DType::kUInt8, "c");
    EXPECT_FALSE(s.is_read_only());
    s.data<std::uint8_t>()[0] = 42;
    EXPECT_EQ(s.data<std::uint8_t>()[0], 42);
  }
  EXPECT_EQ(f.contents(), (std::vector<std::uint8_t>{1, 1, 1, 1}));
}

TEST(MappedFileStorageTest, RefusesNullClosedAndBadArguments) {
  EXPECT_THROW(mapped_file_storage(std::shared_ptr<MappedStorage>()), InvalidArgumentError);
  TempFile f({1, 2, 3, 4});
  ASSERT_TRUE(f.ok());
  auto map = std::make_shared<MappedStorage>(f.path(), std::vector<std::int64_t>{4}, DType::kUInt8, "r");
  map->close();
  EXPECT_THROW(mapped_file_storage(map), InvalidArgumentError);
  EXPECT_THROW(mapped_file_storage(f.path(), {4}, DType::kUInt8, "x"), InvalidArgumentError);
  EXPECT_THROW(mapped_file_storage(f.path(), {5}, DType::kUInt8, "r"), InvalidArgumentError);  // file too short
  EXPECT_THROW(mapped_file_storage(f.path() + ".missing", {1}, DType::kUInt8, "r"), InvalidArgumentError);
}

}  // namespace
}  // namespace genesis::storage
