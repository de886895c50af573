// The single-thread patterns of the allocator benchmarks (bench/bench_common.h
// describes them): calibration and warm-up, timed repetitions, the hot pair
// loop and the mixed pattern's live set.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_config.h"
#include "bench_report.h"

namespace genesis_bench {

// ------------------------------------------------------------- patterns ---

/// Calibration and warm-up: runs batch(n) for n = 1, 2, 4, ... until one
/// batch of at least 4 ops takes at least `min_ms` (the first batches carry
/// one-time costs: segments, thread caches, event rings) or n reaches
/// `max_n`; returns the ns per op of the last batch.
template <class Batch>
double calibrate(Batch&& batch, double min_ms, std::uint64_t max_n) {
  double per_op = 0;
  for (std::uint64_t n = 1;; n *= 2) {
    n = std::min(n, std::max<std::uint64_t>(max_n, 1));
    const auto t0 = Clock::now();
    batch(n);
    const double ns = elapsed_ns(t0, Clock::now());
    per_op = ns / static_cast<double>(n);
    if ((ns >= min_ms * 1e6 && n >= 4) || n >= max_n) break;
  }
  return per_op;
}

/// Times `reps` runs of batch(iters); returns ns per op.
template <class Batch>
Timing time_reps(Batch&& batch, std::uint64_t iters, int reps) {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    batch(iters);
    v.push_back(elapsed_ns(t0, Clock::now()) / static_cast<double>(iters));
  }
  return summarize(std::move(v));
}

/// The hot pair loop: n x (alloc(size), free).
template <class A>
inline void hot_loop(A& a, std::size_t size, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    void* p = a.alloc(size);
    keep(p);
    a.free(p);
  }
}

/// State of the mixed pattern: 64 live allocations and a position in the
/// sequence. Frees what it holds when destroyed (or at release()).
template <class A>
class MixedState {
 public:
  MixedState(A& a, const MixedSequence& seq) : a_(a), seq_(seq), mask_(seq.size.size() - 1) {
    for (int i = 0; i < kMixedLive; ++i) {
      live_[static_cast<std::size_t>(i)] = a_.alloc(seq_.initial[static_cast<std::size_t>(i)]);
      keep(live_[static_cast<std::size_t>(i)]);
    }
  }
  ~MixedState() { release(); }
  MixedState(const MixedState&) = delete;
  MixedState& operator=(const MixedState&) = delete;

  /// n steps of (free slot, alloc into slot).
  void run(std::uint64_t n) {
    const std::uint32_t* sizes = seq_.size.data();
    const std::uint8_t* slots = seq_.slot.data();
    std::size_t pos = pos_;
    for (std::uint64_t i = 0; i < n; ++i, ++pos) {
      const std::size_t k = pos & mask_;
      void*& s = live_[slots[k]];
      a_.free(s);
      s = a_.alloc(sizes[k]);
      keep(s);
    }
    pos_ = pos;
  }

  void release() {
    if (released_) return;
    released_ = true;
    for (void*& p : live_) {
      if (p != nullptr) a_.free(p);
      p = nullptr;
    }
  }

 private:
  A& a_;
  const MixedSequence& seq_;
  const std::size_t mask_;  // sequence length is a power of two
  std::array<void*, kMixedLive> live_{};
  std::size_t pos_ = 0;
  bool released_ = false;
};

/// Pattern hot at one size on the calling thread.
template <class A>
Result run_hot(A& a, std::size_t size, const Config& cfg, std::vector<std::pair<std::string, std::string>> labels) {
  auto batch = [&](std::uint64_t n) { hot_loop(a, size, n); };
  const double est = calibrate(batch, cfg.calib_ms, cfg.hot_iters);
  const std::uint64_t iters = cfg.iterations(cfg.hot_iters, est);
  a.sync();
  const Timing t = time_reps(batch, iters, cfg.reps);
  labels.emplace_back("pattern", "hot");
  labels.emplace_back("size", std::to_string(size));
  labels.emplace_back("threads", "1");
  Result r;
  r.labels = std::move(labels);
  r.ns_per_pair = t.median;
  r.min_ns = t.min;
  r.max_ns = t.max;
  r.iters = iters;
  r.reps = cfg.reps;
  return r;
}

/// Pattern mixed on the calling thread.
template <class A>
Result run_mixed(A& a, const MixedSequence& seq, const Config& cfg,
                 std::vector<std::pair<std::string, std::string>> labels, const char* pattern = "mixed") {
  MixedState<A> state(a, seq);
  auto batch = [&](std::uint64_t n) { state.run(n); };
  const double est = calibrate(batch, cfg.calib_ms, cfg.mixed_iters);
  const std::uint64_t iters = cfg.iterations(cfg.mixed_iters, est);
  a.sync();
  const Timing t = time_reps(batch, iters, cfg.reps);
  state.release();
  labels.emplace_back("pattern", pattern);
  labels.emplace_back("size", "mixed");
  labels.emplace_back("threads", "1");
  Result r;
  r.labels = std::move(labels);
  r.ns_per_pair = t.median;
  r.min_ns = t.min;
  r.max_ns = t.max;
  r.iters = iters;
  r.reps = cfg.reps;
  return r;
}

}  // namespace genesis_bench
