// A fork()ed child runs parallel CPU work (Note [Fork] in genesis/core/fork.h).
// Before fork handling the child's first parallel operation waited for ever
// for pool workers that only exist in the parent. Each child arms alarm():
// a hang kills it, and the test fails instead of hanging.
//
// The TSan stage runs these with die_after_fork=0: by default ThreadSanitizer
// kills a child that starts threads after its multi-threaded parent forked,
// which is exactly what is tested here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "../support/allocator_test_util.h"
#include "../support/process_util.h"
#include "genesis/core/threads.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/copy.h"
#include "genesis/tensor/api.h"

namespace genesis {
namespace {

constexpr unsigned kChildSeconds = 60;
constexpr std::int64_t kN = std::int64_t{1} << 20;

// Every kind of parallel kernel, checked against values known exactly.
// Returns 0 when all are right, else the number of the first wrong one.
int parallel_work() {
  const Tensor a = ones({kN}) + 1;
  if (a.sum().item().to_double() != 2.0 * static_cast<double>(kN)) return 1;
  const Tensor b = arange(kN, DType::kInt64) * 2;
  if (b.sum().item().to_int64() != kN * (kN - 1)) return 2;
  const Tensor m = ones({256, 256});
  if (matmul(m, m).sum().item().to_double() != 256.0 * 256.0 * 256.0) return 3;
  const Tensor t = ones({1024, 1024}).T().contiguous();
  if (t.sum().item().to_double() != 1024.0 * 1024.0) return 4;
  std::vector<char> src(std::size_t{32} << 20, 7), dst(src.size(), 0);
  parallel_memcpy(dst.data(), src.data(), src.size());
  if (std::memcmp(dst.data(), src.data(), src.size()) != 0) return 5;
  return 0;
}

int child(const std::function<int()>& fn) {
  return test::run_in_child([&] {
    ::alarm(kChildSeconds);
    return fn();
  });
}

class ForkSafety : public ::testing::Test {
 protected:
  // Several workers even on a small machine, so that a pool exists.
  void SetUp() override {
    before_ = get_num_threads();
    set_num_threads(4);
  }
  void TearDown() override { set_num_threads(before_); }
  int before_ = 1;
};

TEST_F(ForkSafety, ChildRunsParallelKernelsAfterTheParentDid) {
  ASSERT_EQ(parallel_work(), 0);  // the parent's pools are running now
  EXPECT_EQ(child(parallel_work), 0);
  EXPECT_EQ(parallel_work(), 0);  // and still work in the parent
}

TEST_F(ForkSafety, GrandchildAndChildSettings) {
  ASSERT_EQ(parallel_work(), 0);
  EXPECT_EQ(child([] {
              if (get_num_threads() != 4) return 20;  // inherited
              set_num_threads(2);
              if (const int r = parallel_work(); r != 0) return r;
              // ThreadSanitizer (GCC 12's) loses track of threads one fork
              // further down: the grandchild's first thread stops it with
              // "dup thread with used id". The other stages run this part.
              if (memory::testing_support::under_tsan()) return 0;
              return child(parallel_work);
            }),
            0);
}

TEST_F(ForkSafety, ForkWhileAnotherComputesAndAllocates) {
  // The other thread holds the allocator's and the pools' locks at random
  // instants; the children must find them free.
  ASSERT_EQ(parallel_work(), 0);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) {
      (ones({kN / 2}) * 3).sum();
      void* p = memory::host_allocator().allocate(std::size_t{6} << 20);
      memory::host_allocator().deallocate(p);
      memory::host_allocator().empty_cache();
    }
  });
  int failures = 0;
  for (int i = 0; i < 10; ++i) failures += child([] {
    // Grows the pool: the allocator reclaims every thread cache first.
    void* p = memory::host_allocator().allocate(std::size_t{64} << 20);
    memory::host_allocator().deallocate(p);
    memory::host_allocator().empty_cache();
    return parallel_work();
  }) != 0;
  stop.store(true);
  busy.join();
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace genesis
