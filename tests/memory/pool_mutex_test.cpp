// The arena lock biased towards its one thread (Note [Biased pool lock] in
// pool_mutex.h): mutual exclusion between the owner's fast entries and other
// threads' revocations, try_lock that never waits, and the ways the bias ends.
// The suite name matches the TSan stage's filter (Concurren).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "genesis/memory/detail/asymmetric_fence.h"
#include "genesis/memory/detail/pool_mutex.h"
#include "support/allocator_test_util.h"

namespace genesis::memory {
namespace {

using detail::PoolMutex;
using testing_support::scaled;

// A critical section that notices a second thread inside: `inside` is set on
// entry and cleared on exit, and a plain counter is bumped in between (TSan
// reports it if two threads ever get in together).
struct Guarded {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  long counter = 0;
  void enter_and_leave() {
    if (inside.exchange(1, std::memory_order_relaxed) != 0) overlaps.fetch_add(1);
    ++counter;
    inside.store(0, std::memory_order_relaxed);
  }
};

TEST(PoolMutexConcurrencyTest, OwnerIsBiasedOthersAreNot) {
  PoolMutex m;
  EXPECT_FALSE(m.biased_to_caller());
  m.lock();
  m.bias_to_caller();
  m.unlock();
  EXPECT_TRUE(m.biased_to_caller());
  bool other_biased = true;
  std::thread other([&] {
    m.lock();
    other_biased = m.biased_to_caller();
    m.unlock();
  });
  other.join();
  EXPECT_FALSE(other_biased);
  // A second bias_to_caller does not move the bias.
  std::thread second([&] {
    m.lock();
    m.bias_to_caller();
    other_biased = m.biased_to_caller();
    m.unlock();
  });
  second.join();
  EXPECT_FALSE(other_biased);
  EXPECT_TRUE(m.biased_to_caller());
}

TEST(PoolMutexConcurrencyTest, OwnerAndOthersExcludeEachOther) {
  PoolMutex m;
  Guarded g;
  const int owner_ops = scaled(200000);
  const int other_ops = scaled(3000);
  const int others = 3;
  std::atomic<bool> go{false};
  bool biased_at_start = false;
  std::thread owner([&] {
    m.lock();
    m.bias_to_caller();
    m.unlock();
    biased_at_start = m.biased_to_caller();
    go.store(true);
    for (int i = 0; i < owner_ops; ++i) {
      m.lock();
      g.enter_and_leave();
      m.unlock();
    }
  });
  std::vector<std::thread> rest;
  for (int t = 0; t < others; ++t) {
    rest.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < other_ops; ++i) {
        m.lock();
        g.enter_and_leave();
        m.unlock();
      }
    });
  }
  owner.join();
  for (auto& t : rest) t.join();
  EXPECT_TRUE(biased_at_start);
  EXPECT_EQ(g.overlaps.load(), 0);
  EXPECT_EQ(g.counter, static_cast<long>(owner_ops) + static_cast<long>(others) * other_ops);
}

// Two arenas out of memory try each other's locks (release_other_arenas):
// a try_lock that waited for a biased owner to leave could deadlock them.
TEST(PoolMutexConcurrencyTest, TryLockFailsWhileTheOwnerIsInside) {
  PoolMutex m;
  std::atomic<int> phase{0};
  std::thread owner([&] {
    m.lock();
    m.bias_to_caller();
    m.unlock();
    m.lock();  // a fast entry
    phase.store(1);
    while (phase.load() != 2) std::this_thread::yield();
    m.unlock();
    phase.store(3);
  });
  while (phase.load() != 1) std::this_thread::yield();
  EXPECT_FALSE(m.try_lock());
  phase.store(2);
  while (phase.load() != 3) std::this_thread::yield();
  owner.join();
  ASSERT_TRUE(m.try_lock());
  m.unlock();
}

TEST(PoolMutexConcurrencyTest, OwnersTryLockSucceedsWhenFree) {
  PoolMutex m;
  m.lock();
  m.bias_to_caller();
  m.unlock();
  ASSERT_TRUE(m.try_lock());
  std::atomic<bool> other_got{true};
  std::thread other([&] {
    other_got = m.try_lock();
    if (other_got) m.unlock();
  });
  other.join();
  EXPECT_FALSE(other_got.load());
  m.unlock();
}

TEST(PoolMutexConcurrencyTest, EndBiasTurnsTheBiasOffForGood) {
  PoolMutex m;
  m.lock();
  m.bias_to_caller();
  m.unlock();
  ASSERT_TRUE(m.biased_to_caller());
  m.lock();
  m.end_bias();  // by the owner, inside: only asks
  m.unlock();
  // The next other holder waits for the owner as usual, then ends the bias.
  EXPECT_TRUE(m.biased_to_caller());
  std::thread other([&] {
    m.lock();
    m.unlock();
  });
  other.join();
  EXPECT_FALSE(m.biased_to_caller());
  m.lock();
  m.bias_to_caller();  // no second bias
  m.unlock();
  EXPECT_FALSE(m.biased_to_caller());
  // Still a lock.
  Guarded g;
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < scaled(20000); ++i) {
        m.lock();
        g.enter_and_leave();
        m.unlock();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(g.overlaps.load(), 0);
  EXPECT_EQ(g.counter, 3L * scaled(20000));
}

TEST(PoolMutexConcurrencyTest, EndBiasByAnotherHolder) {
  PoolMutex m;
  m.lock();
  m.bias_to_caller();
  m.unlock();
  std::thread other([&] {
    m.lock();  // revokes
    m.end_bias();
    m.unlock();  // leaves the bias off
  });
  other.join();
  EXPECT_FALSE(m.biased_to_caller());
}

// Other threads that keep revoking turn the bias off (each revocation is a
// membarrier): after 64 revocations that outnumber 1/256 of the owner's
// entries.
// The owner enters `owner_entries` times, then another thread takes the lock
// `other_entries` times (each a revocation while the bias lasts). Returns
// whether the owner is still biased.
bool bias_survives(int owner_entries, int other_entries) {
  PoolMutex m;
  m.lock();
  m.bias_to_caller();
  m.unlock();
  for (int i = 0; i < owner_entries; ++i) {
    m.lock();
    m.unlock();
  }
  std::thread other([&] {
    for (int i = 0; i < other_entries; ++i) {
      m.lock();
      m.unlock();
    }
  });
  other.join();
  return m.biased_to_caller();
}

TEST(PoolMutexConcurrencyTest, FrequentRevocationsEndTheBias) { EXPECT_FALSE(bias_survives(10, 100)); }

TEST(PoolMutexConcurrencyTest, RareRevocationsKeepTheBias) { EXPECT_TRUE(bias_survives(100000, 100)); }

// Without membarrier the owner's entry uses a full fence (Note [Biased pool
// lock]); the decision is made once per process, so run the exclusion tests
// again in a child process with GENESIS_NO_MEMBARRIER=1.
TEST(PoolMutexConcurrencyTest, NoMembarrierFallbackInChildProcess) {
  const char* env = std::getenv("GENESIS_NO_MEMBARRIER");
  if (env != nullptr && env[0] == '1') {
    EXPECT_FALSE(detail::asymmetric_fence_available());
    GTEST_SKIP() << "already the child";
  }
  std::string out;
  const int rc = testing_support::run_self(
      "PoolMutexConcurrencyTest.OwnerAndOthersExcludeEachOther:PoolMutexConcurrencyTest.TryLockFailsWhileTheOwnerIsInside",
      {"GENESIS_NO_MEMBARRIER=1"}, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 2 tests"), std::string::npos) << out;
}

}  // namespace
}  // namespace genesis::memory
