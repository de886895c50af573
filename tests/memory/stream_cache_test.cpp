// The thread cache's small bins (detail::StreamCache), against a model:
// whichever search pop_small runs (Note [Adaptive near-fit search]), it
// returns the smallest cached block of the bins first..last, the masks stay
// exact (small_mask) or a superset (small_words), and the search switches
// between exact mode and branch-free mode on the exact-hit rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "genesis/memory/detail/thread_cache.h"

namespace genesis::memory::detail {
namespace {

constexpr std::uint64_t kNearMul4 = ((std::uint64_t{1} << 32) + 3) / 4;  // near fits up to 1/4 larger

class StreamCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sc_ = std::make_unique<StreamCache>();
    pool_ = std::make_unique<Block[]>(kRecords);
    for (std::size_t i = 0; i < kRecords; ++i) free_records_.push_back(&pool_[i]);
  }

  // What hot_free_path does with a block of `bins` * 512 bytes.
  void push(std::size_t bin) {
    ASSERT_FALSE(free_records_.empty());
    Block* b = free_records_.back();
    free_records_.pop_back();
    b->size = bin << kAlignShift;
    BlockList* list = sc_->list_for_push(b->size);
    ASSERT_NE(list, nullptr);
    b->cache_next = list->head;
    list->head = b;
    ++list->count;
    ++model_[bin];
  }

  // pop_small, checked against the model; returns the bin popped, 0 for none.
  std::size_t pop(std::size_t first, std::uint64_t near_mul) {
    const std::size_t last = std::min(first + ((first * near_mul) >> 32), kNumSmallBins - 1);
    auto it = model_.lower_bound(first);
    const std::size_t want = it != model_.end() && it->first <= last ? it->first : 0;
    Block* b = sc_->pop_small(first, near_mul, clock_);
    const std::size_t got = b == nullptr ? 0 : b->size >> kAlignShift;
    EXPECT_EQ(got, want) << "first " << first << " last " << last << " exact mode " << sc_->exact_mode;
    if (b != nullptr) {
      clock_.add(1);  // the allocator counts small allocations from the cache
      if (--model_[got] == 0) model_.erase(got);
      free_records_.push_back(b);
    }
    return got;
  }

  // small_mask is exact; small_words covers every non-empty mask word.
  void check_marks() {
    for (std::size_t i = 0; i < kNumSmallBins; ++i) {
      const bool marked = (sc_->small_mask[i >> 6] >> (i & 63)) & 1;
      ASSERT_EQ(marked, sc_->small[i].count != 0) << "bin " << i;
      ASSERT_EQ(sc_->small[i].count != 0, model_.count(i) != 0) << "bin " << i;
    }
    for (std::size_t w = 0; w < StreamCache::kMaskWords; ++w) {
      if (sc_->small_mask[w] != 0) {
        ASSERT_TRUE((sc_->small_words >> w) & 1) << "word " << w;
      }
    }
  }

  std::unique_ptr<StreamCache> sc_;
  static constexpr std::size_t kRecords = 4096;
  std::unique_ptr<Block[]> pool_;
  std::vector<Block*> free_records_;
  std::map<std::size_t, int> model_;  // bin -> blocks cached
  OwnedCounter clock_;
};

TEST_F(StreamCacheTest, StartsInExactMode) {
  EXPECT_TRUE(sc_->exact_mode);
  push(8);
  EXPECT_EQ(pop(8, kNearMul4), 8u);
  EXPECT_EQ(pop(8, kNearMul4), 0u);
  check_marks();
}

TEST_F(StreamCacheTest, RandomSizesMatchTheModelAndSwitchToBranchFreeMode) {
  std::mt19937_64 rng(7);
  // Log-uniform bins, as `mixed` asks: exact sizes are cached now and then.
  auto draw = [&] {
    const std::size_t octave = std::size_t{1} << (rng() % 11);
    return std::min(octave + rng() % octave, kNumSmallBins - 1);
  };
  for (int i = 0; i < 300; ++i) push(draw());
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 2 == 0 || model_.empty()) push(draw());
    else pop(draw(), rng() % 8 == 0 ? 0 : kNearMul4);
    if (step % 997 == 0) check_marks();
  }
  check_marks();
  EXPECT_FALSE(sc_->exact_mode) << "random sizes miss the exact size on most pops";
}

TEST_F(StreamCacheTest, RepeatedSizesSwitchBackToExactMode) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) push(1 + rng() % 2000);
  for (int i = 0; i < 400; ++i) {  // misses of the exact size: branch-free mode
    pop(1 + rng() % 2000, kNearMul4);
    push(1 + rng() % 2000);
  }
  ASSERT_FALSE(sc_->exact_mode);
  for (int i = 0; i < 400; ++i) {  // a program that repeats three sizes
    const std::size_t bin = 100 * (1 + i % 3);
    push(bin);
    EXPECT_EQ(pop(bin, kNearMul4), bin);
  }
  EXPECT_TRUE(sc_->exact_mode);
  check_marks();
}

TEST_F(StreamCacheTest, NearFitSkipsWordsPoppedEmpty) {
  // Blocks in three mask words; emptying the middle one leaves its summary
  // bit set until a search meets it, which must then look further on.
  push(70);
  push(200);
  push(300);
  sc_->exact_mode = false;  // the branch-free search from the start
  EXPECT_EQ(pop(200, 0), 200u);
  EXPECT_TRUE((sc_->small_words >> (200 / 64)) & 1) << "a word popped empty keeps its mark";
  EXPECT_EQ(pop(130, std::uint64_t{1} << 33), 300u);  // near_mul 2^33: up to three times the size
  EXPECT_FALSE((sc_->small_words >> (200 / 64)) & 1) << "the search cleared the stale mark";
  EXPECT_EQ(pop(60, 0), 0u);  // exact only: 60 is not cached
  EXPECT_EQ(pop(60, kNearMul4), 70u);
  EXPECT_EQ(pop(1, std::uint64_t{1} << 40), 0u);  // nothing left at all
  check_marks();
}

TEST_F(StreamCacheTest, TopBinAndLimits) {
  push(kNumSmallBins - 1);  // exactly 1 MiB, in the last mask word
  push(kNumSmallBins - 2);
  sc_->exact_mode = false;
  EXPECT_EQ(pop(kNumSmallBins - 3, kNearMul4), kNumSmallBins - 2);
  EXPECT_EQ(pop(kNumSmallBins - 1, 0), kNumSmallBins - 1);
  EXPECT_EQ(pop(kNumSmallBins - 1, kNearMul4), 0u);
  check_marks();
}

}  // namespace
}  // namespace genesis::memory::detail
