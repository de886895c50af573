// A shared storage that /dev/shm cannot hold is refused when it is created,
// with a message, instead of killing the process with SIGBUS on a later
// write (Note [Reserving shared memory]).
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "genesis/core/error.h"
#include "genesis/storage/shared_storage.h"

namespace genesis::storage {
namespace {

struct Space {
  std::uint64_t free_bytes;
  std::uint64_t total_bytes;
};

Space shm_space() {
  struct statvfs vs {};
  EXPECT_EQ(::statvfs("/dev/shm", &vs), 0) << std::strerror(errno);
  return {static_cast<std::uint64_t>(vs.f_bavail) * vs.f_frsize,
          static_cast<std::uint64_t>(vs.f_blocks) * vs.f_frsize};
}

// Entries in /dev/shm whose name starts with `prefix`.
std::set<std::string> shm_entries(const std::string& prefix) {
  std::set<std::string> out;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0) out.insert(n);
  }
  ::closedir(d);
  return out;
}

std::string own_prefix() { return "genesis-" + std::to_string(::getpid()) + "-"; }

// The OutOfMemoryError message of creating `fn`'s storage, or a marker.
template <typename Fn>
std::string oom_message(Fn fn) {
  try {
    fn();
  } catch (const OutOfMemoryError& e) {
    return e.message();
  } catch (const Error& e) {
    return "<other genesis error: " + e.message() + ">";
  }
  return "<no error: the storage was created>";
}

void expect_explains_shortage(const std::string& msg, std::uint64_t asked) {
  EXPECT_NE(msg.find(std::to_string(asked) + " bytes"), std::string::npos) << msg;  // what was asked
  EXPECT_NE(msg.find("/dev/shm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free"), std::string::npos) << msg;  // what there is
  EXPECT_NE(msg.find("--shm-size"), std::string::npos) << msg;  // what to do
}

class SharedStorageSpaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shm_space().total_bytes == 0) GTEST_SKIP() << "/dev/shm reports no size limit here";
  }
};

TEST_F(SharedStorageSpaceTest, UnnamedLargerThanFreeSpaceIsRefusedAndLeavesNothing) {
  const auto before = shm_entries(own_prefix());
  const std::uint64_t asked = shm_space().free_bytes + (std::uint64_t{1} << 30);
  const std::string msg =
      oom_message([&] { SharedStorage s({static_cast<int64_t>(asked)}, DType::kUInt8); });
  expect_explains_shortage(msg, asked);
  EXPECT_EQ(shm_entries(own_prefix()), before) << "a refused storage must leave no segment behind";
}

TEST_F(SharedStorageSpaceTest, SparseRequestFarBeyondFreeSpaceIsRefused) {
  // 2^40 float64 = 8 TiB: more than any /dev/shm here, and more than a
  // sparse file plus a lazy mapping would have refused.
  const std::int64_t n = std::int64_t{1} << 40;
  const std::string msg = oom_message([&] { SharedStorage s({n}, DType::kFloat64); });
  expect_explains_shortage(msg, static_cast<std::uint64_t>(n) * 8);
}

TEST_F(SharedStorageSpaceTest, NamedCreateLargerThanFreeSpaceRemovesTheName) {
  const std::string name = "/genesis-test-space-" + std::to_string(::getpid());
  ::shm_unlink(name.c_str());
  const std::uint64_t asked = shm_space().free_bytes + (std::uint64_t{1} << 30);
  expect_explains_shortage(
      oom_message([&] { SharedStorage::create(name, {static_cast<int64_t>(asked)}, DType::kUInt8); }), asked);
  expect_explains_shortage(
      oom_message([&] { SharedStorage s({static_cast<int64_t>(asked)}, DType::kUInt8, name); }), asked);
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  EXPECT_LT(fd, 0) << name << " was left in /dev/shm";
  if (fd >= 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
  }
}

TEST_F(SharedStorageSpaceTest, CreatedStorageHasItsMemoryReservedBeforeAnyWrite) {
  constexpr std::uint64_t kBytes = 64ull << 20;
  if (shm_space().free_bytes < 4 * kBytes) GTEST_SKIP() << "less than 256 MiB free in /dev/shm";
  const std::uint64_t free_before = shm_space().free_bytes;
  SharedStorage s({static_cast<int64_t>(kBytes)}, DType::kUInt8);
  const std::uint64_t free_after = shm_space().free_bytes;
  // Half the size leaves room for other processes freeing memory meanwhile.
  EXPECT_LE(free_after + kBytes / 2, free_before)
      << "a new 64 MiB storage must take its memory from /dev/shm when it is created";
  // Every page is there: writing all of it cannot fault.
  std::memset(s.data(), 0x7f, s.nbytes());
  EXPECT_EQ(static_cast<unsigned char*>(s.data())[s.nbytes() - 1], 0x7f);
}

TEST_F(SharedStorageSpaceTest, ZeroByteStorageNeedsNoSpace) {
  SharedStorage s({0, 5}, DType::kFloat32);
  EXPECT_EQ(s.nbytes(), 0u);
  EXPECT_EQ(s.data(), nullptr);
}

}  // namespace
}  // namespace genesis::storage
