// Published figures (Note [Published figures]): writer and reader in one
// process, the background refresh, registration, a stale file of a process
// that is gone, and readers running beside the writer.
#include "genesis/memory/publish.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"

extern char** environ;

namespace genesis::memory {
namespace {

const PublishedDevice* find(const std::optional<PublishedFigures>& f, const std::string& id) {
  return f ? f->find(id) : nullptr;
}

class PublishTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = std::make_shared<SimulatedDevice>(std::size_t{1} << 30, 5);
    alloc_ = std::make_unique<CachingAllocator>(dev_);
    publish_allocator("sim:test", alloc_.get());
    start_publishing();
  }
  void TearDown() override {
    unpublish_allocator(alloc_.get());
    stop_publishing();
    alloc_.reset();
  }
  std::shared_ptr<SimulatedDevice> dev_;
  std::unique_ptr<CachingAllocator> alloc_;
};

TEST_F(PublishTest, ReadsBackExactFiguresAndSites) {
  EXPECT_TRUE(publishing());
  void* a = nullptr;
  {
    ScopedAllocationContext ctx("publish_test.py:3 in fill");
    a = alloc_->allocate(3 << 20);
  }
  void* b = alloc_->allocate(1000);
  publish_now();
  const auto figures = read_published(getpid());
  ASSERT_TRUE(figures.has_value());
  EXPECT_EQ(figures->pid, getpid());
  EXPECT_GT(figures->update_time_ns, 0u);
  EXPECT_GE(figures->updates, 2u);
  const PublishedDevice* d = figures->find("sim:test");
  ASSERT_NE(d, nullptr);
  const MemoryStats st = alloc_->stats();
  EXPECT_EQ(d->allocated, static_cast<std::uint64_t>(st.allocated_bytes[kStatAggregate].current));
  EXPECT_EQ(d->allocated, (std::uint64_t{3} << 20) + 1024);
  EXPECT_EQ(d->reserved, static_cast<std::uint64_t>(st.reserved_bytes[kStatAggregate].current));
  EXPECT_EQ(d->active, static_cast<std::uint64_t>(st.active_bytes[kStatAggregate].current));
  EXPECT_EQ(d->cached, d->reserved - d->allocated);
  EXPECT_EQ(d->largest_free_block, st.largest_free_block);
  EXPECT_EQ(d->num_allocs, 2u);
  EXPECT_EQ(d->num_ooms, 0u);
  EXPECT_EQ(d->peak_allocated, static_cast<std::uint64_t>(st.allocated_bytes[kStatAggregate].peak));
  EXPECT_EQ(d->peak_reserved, static_cast<std::uint64_t>(st.reserved_bytes[kStatAggregate].peak));
  EXPECT_EQ(d->total, std::uint64_t{1} << 30);
  EXPECT_TRUE(d->has_sites);
  ASSERT_EQ(d->sites.size(), 2u);
  EXPECT_EQ(d->sites[0].site, "publish_test.py:3 in fill");
  EXPECT_EQ(d->sites[0].bytes, std::uint64_t{3} << 20);
  EXPECT_EQ(d->sites[0].count, 1u);
  EXPECT_EQ(d->sites[1].site, "<unknown>");
  EXPECT_EQ(d->sites[1].bytes, 1024u);
  EXPECT_TRUE(std::filesystem::exists(published_path(getpid())));
  alloc_->deallocate(a);
  alloc_->deallocate(b);
}

TEST_F(PublishTest, TheBackgroundThreadRefreshes) {
  void* a = alloc_->allocate(7 << 20);
  // No publish_now(): the thread rewrites the figures every 100 ms.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    const auto figures = read_published(getpid());
    const PublishedDevice* d = find(figures, "sim:test");
    seen = d != nullptr && d->allocated == (std::uint64_t{7} << 20);
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(seen);
  alloc_->deallocate(a);
}

TEST_F(PublishTest, StartIsIdempotentAndStopRemovesTheFile) {
  start_publishing();
  start_publishing();
  EXPECT_TRUE(publishing());
  unpublish_allocator(alloc_.get());
  publish_now();
  EXPECT_EQ(find(read_published(getpid()), "sim:test"), nullptr);
  stop_publishing();
  EXPECT_FALSE(publishing());
  EXPECT_FALSE(read_published(getpid()).has_value());
  EXPECT_FALSE(std::filesystem::exists(published_path(getpid())));
  stop_publishing();  // again: nothing to do
  publish_allocator("sim:test", alloc_.get());
  start_publishing();
  EXPECT_NE(find(read_published(getpid()), "sim:test"), nullptr);
}

TEST_F(PublishTest, AFileWhoseWriterIsGoneIsRemoved) {
  // A process that has exited: its pid is free (reuse within the test is
  // improbable), so a file under it is stale.
  pid_t pid = 0;
  char arg0[] = "/bin/true";
  char* argv[] = {arg0, nullptr};
  ASSERT_EQ(posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string stale = published_path(pid);
  std::filesystem::copy_file(published_path(getpid()), stale, std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(read_published(pid).has_value());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_FALSE(read_published(-1).has_value());
}

TEST_F(PublishTest, RegistrationChecksItsArguments) {
  EXPECT_THROW(publish_allocator("", alloc_.get()), InvalidArgumentError);
  EXPECT_THROW(publish_allocator(std::string(kPublishIdBytes, 'x'), alloc_.get()), InvalidArgumentError);
  EXPECT_THROW(publish_allocator("x", nullptr), InvalidArgumentError);
}

TEST_F(PublishTest, ReadersBesideTheWriterSeeConsistentFigures) {
  // A consistent copy has cached == reserved - allocated (the writer computes
  // it so), and 0, 1 or 2 MiB allocated: a torn copy would mix the words of
  // two updates.
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, bad{0};
  std::thread reader([&] {
    while (!done.load()) {
      const auto f = read_published(getpid());
      const PublishedDevice* d = f ? f->find("sim:test") : nullptr;
      if (d == nullptr) continue;
      ++reads;
      const bool ok = d->allocated <= d->reserved && d->cached == d->reserved - d->allocated &&
                      d->allocated % (1 << 20) == 0 && d->allocated <= (2u << 20) && d->sites.size() <= kPublishMaxSites;
      if (!ok) ++bad;
    }
  });
  for (int i = 0; i < 200; ++i) {
    void* a = alloc_->allocate(1 << 20);
    void* b = alloc_->allocate(1 << 20);
    publish_now();
    alloc_->deallocate(a);
    alloc_->deallocate(b);
    publish_now();
  }
  while (reads.load() < 10) std::this_thread::yield();
  done.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(PublishGroupTest, GroupsBySiteLargestFirst) {
  std::vector<AllocationInfo> v(4);
  v[0].size = 100;
  v[0].location = "a";
  v[1].size = 300;
  v[1].location = "0x6000deadbeef";
  v[2].size = 50;
  v[2].location = "a";
  v[3].size = 200;
  v[3].location = "b";
  const auto g = group_by_site(v);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].site, "<unknown>");
  EXPECT_EQ(g[0].bytes, 300u);
  EXPECT_EQ(g[1].site, "b");
  EXPECT_EQ(g[2].site, "a");
  EXPECT_EQ(g[2].bytes, 150u);
  EXPECT_EQ(g[2].count, 2u);
}

}  // namespace
}  // namespace genesis::memory
