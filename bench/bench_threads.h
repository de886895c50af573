// The thread patterns of the allocator benchmarks (bench/bench_common.h):
// the order in which benchmark threads take CPUs, pinning, threads started in
// lockstep, and thread counts interleaved within each repetition
// (Note [Interleaved thread counts]).
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "bench_patterns.h"
#include "bench_report.h"

namespace genesis_bench {

/// The order in which benchmark threads take CPUs: one CPU of each physical
/// core first (cores taken from the highest-numbered CPUs down), then the
/// second hardware thread of each core, and so on. Two benchmark threads on
/// the two hyper-threads of one core share its pipelines and L1, so a
/// scaling figure with thread 7 next to thread 0 measured the core, not the
/// allocator (with plain top-down pinning the 16-vCPU GPU machine's own
/// thread-local ceiling, a loop without an allocator, read well under 8x). Topology from sysfs
/// (topology/core_id, physical_package_id); without it, plain top-down order.
/// Staying off CPU 0 as long as possible keeps interrupts and unpinned helper
/// threads (the CUDA driver's) away. Same order for every allocator measured.
inline std::vector<int> bench_cpu_order() {
  std::vector<int> order;
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return order;
  auto read_int = [](int cpu, const char* what) {
    char path[128];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    long v = -1;
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fscanf(f, "%ld", &v) != 1) v = -1;
      std::fclose(f);
    }
    return v;
  };
  // (package, core) -> its CPUs, each list from the highest CPU down.
  std::map<std::pair<long, long>, std::vector<int>> cores;
  std::vector<std::pair<long, long>> core_order;  // cores by their highest CPU, descending
  for (int c = CPU_SETSIZE - 1; c >= 0; --c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    std::pair<long, long> key{read_int(c, "physical_package_id"), read_int(c, "core_id")};
    if (key.second < 0) key = {-1, c};  // no topology: every CPU its own core
    auto [it, inserted] = cores.try_emplace(key);
    if (inserted) core_order.push_back(key);
    it->second.push_back(c);
  }
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (const auto& key : core_order) {
      const std::vector<int>& cpus = cores[key];
      if (round < cpus.size()) {
        order.push_back(cpus[round]);
        any = true;
      }
    }
    if (!any) break;
  }
#endif
  return order;
}

/// "thread CPUs: 15 14 ..." for the report (the first 16).
inline std::string describe_cpu_order() {
  const std::vector<int> order = bench_cpu_order();
  std::string s = "thread CPUs (physical cores first):";
  for (std::size_t i = 0; i < order.size() && i < 16; ++i) s += " " + std::to_string(order[i]);
  if (order.empty()) s += " unpinned";
  return s;
}

/// Pins the calling thread to the `cpu`-th CPU of bench_cpu_order() (modulo
/// their number), so that thread-scaling figures do not depend on where the
/// scheduler happens to move threads. No-op where unsupported.
inline void pin_to_cpu(int cpu) {
#if defined(__linux__)
  static const std::vector<int> order = bench_cpu_order();
  if (order.empty()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(order[static_cast<std::size_t>(cpu) % order.size()], &one);
  (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
#else
  (void)cpu;
#endif
}

/// Runs `nthreads` threads, each with its own adaptor from make_worker(tid)
/// (created on that thread), in lockstep: warm-up, a start barrier, the
/// pattern, an end barrier. Returns the wall time per pair over all threads
/// (one repetition: run_thread_suite repeats, taking turns between thread
/// counts, Note [Interleaved thread counts]). The pattern is either
///   fixed work (window_ns == 0): `pairs` pairs per thread, so the wall time
///     is the slowest thread's; or
///   a fixed window (window_ns > 0): every thread runs chunks of pairs until
///     the window ends, and the pairs of all threads are counted. On the GPU
///     machines the vCPUs run at different speeds from second to second, and
///     with fixed work 8 threads waited for the slowest one, so the speed-up
///     moved with the one-thread figure, not with the allocator (figures:
///     bench/HISTORY.md, "Eight threads: the slowest vCPU sets the fixed-work
///     figure").
/// Throws std::runtime_error if a worker failed.
/// Thread tid runs on the (tid + first_cpu)-th CPU of bench_cpu_order().
template <class MakeWorker>
double run_threads(MakeWorker&& make_worker, int nthreads, bool mixed, std::uint64_t pairs,
                   const std::vector<MixedSequence>& seqs, double window_ns = 0, int first_cpu = 0) {
  constexpr std::uint64_t kChunk = 256;  // pairs between looks at the stop flag (~6 us)
  const bool window = window_ns > 0;
  std::atomic<bool> stop{false};
  std::vector<std::uint64_t> done(static_cast<std::size_t>(nthreads), 0);
  std::barrier<> bar(nthreads + 1);
  std::mutex err_mu;
  std::string error;
  auto fail = [&](const char* what) {
    std::lock_guard<std::mutex> lk(err_mu);
    if (error.empty()) error = what;
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(nthreads));
  for (int tid = 0; tid < nthreads; ++tid) {
    threads.emplace_back([&, tid] {
      pin_to_cpu(tid + first_cpu);
      bool ok = true;
      const std::uint64_t warm = std::max<std::uint64_t>(pairs / 10, 16);
      auto body = [&](auto& w) {
        using W = std::remove_reference_t<decltype(w)>;
        std::unique_ptr<MixedState<W>> st;
        try {
          if (mixed) {
            st = std::make_unique<MixedState<W>>(w, seqs[static_cast<std::size_t>(tid) % seqs.size()]);
            st->run(warm);
          } else {
            hot_loop(w, kThreadHotSize, warm);
          }
          w.sync();
        } catch (const std::exception& e) {
          fail(e.what());
          ok = false;
        }
        bar.arrive_and_wait();  // ready
        bar.arrive_and_wait();  // start
        if (ok) {
          try {
            auto run = [&](std::uint64_t n) {
              if (mixed) {
                st->run(n);
              } else {
                hot_loop(w, kThreadHotSize, n);
              }
            };
            if (window) {
              std::uint64_t n = 0;
              for (; !stop.load(std::memory_order_relaxed); n += kChunk) run(kChunk);
              done[static_cast<std::size_t>(tid)] = n;
            } else {
              run(pairs);
            }
          } catch (const std::exception& e) {
            fail(e.what());
            ok = false;
          }
        }
        bar.arrive_and_wait();  // end
        try {
          if (st) st->release();
        } catch (const std::exception& e) {
          fail(e.what());
        }
      };
      try {
        auto w = make_worker(tid);
        body(w);
      } catch (const std::exception& e) {
        // make_worker failed: still take part in every barrier phase.
        fail(e.what());
        bar.arrive_and_wait();
        bar.arrive_and_wait();
        bar.arrive_and_wait();
      }
    });
  }
  bar.arrive_and_wait();  // ready
  const auto t0 = Clock::now();
  bar.arrive_and_wait();  // start
  if (window) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(window_ns)));
    stop.store(true, std::memory_order_relaxed);
  }
  bar.arrive_and_wait();  // end
  const double elapsed = elapsed_ns(t0, Clock::now());
  double total = static_cast<double>(pairs) * nthreads;
  if (window) {
    total = 0;
    for (std::uint64_t n : done) total += static_cast<double>(n);
  }
  for (auto& t : threads) t.join();
  if (!error.empty()) throw std::runtime_error("worker thread failed: " + error);
  return elapsed / std::max(total, 1.0);
}

/// Patterns threads_hot and threads_mixed for every thread count of the
/// config. make_worker(tid) returns an adaptor by value (it may hold
/// per-thread state such as a stream) and is called on the worker thread;
/// it is also called once with tid = -1 on the calling thread to estimate
/// the single-thread cost, which fixes the pairs per thread.
template <class MakeWorker>
void run_thread_suite(MakeWorker&& make_worker, const Config& cfg, Reporter& rep,
                      const std::vector<std::pair<std::string, std::string>>& labels, bool hot_only = false) {
  if (cfg.threads.empty()) return;
  std::vector<int> counts = cfg.threads;  // ascending, so that 1 thread (the base) comes first
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  const int max_threads = counts.back();
  std::vector<MixedSequence> random_seqs, set_seqs;
  for (int t = 0; t < max_threads; ++t) {
    random_seqs.push_back(MixedSequence::make(kMixedSeed + 1 + static_cast<std::uint64_t>(t)));
    set_seqs.push_back(MixedSequence::make(kMixedSeed + 1 + static_cast<std::uint64_t>(t), kMixedSteps, 64));
  }
  for (const int variant : {0, 1, 2}) {
    if (hot_only && variant != 0) continue;
    const bool mixed = variant != 0;
    const char* name = variant == 0 ? "threads_hot" : variant == 1 ? "threads_mixed" : "threads_mixed_set";
    const std::vector<MixedSequence>& seqs = variant == 2 ? set_seqs : random_seqs;
    double est = 0;
    {
      auto w = make_worker(-1);
      if (mixed) {
        MixedState<decltype(w)> st(w, seqs[0]);
        est = calibrate([&](std::uint64_t n) { st.run(n); }, cfg.calib_ms, cfg.thread_pairs);
      } else {
        est = calibrate([&](std::uint64_t n) { hot_loop(w, kThreadHotSize, n); }, cfg.calib_ms, cfg.thread_pairs);
      }
    }
    // Same pairs per thread for every thread count; budget for the largest,
    // assuming no parallelism at all. The windowed runs (pattern name
    // + "_window", see run_threads) last what one thread's fixed work does.
    const std::uint64_t pairs = cfg.iterations(cfg.thread_pairs, est, max_threads);
    for (const bool windowed : {false, true}) {
      const std::string pattern = std::string(name) + (windowed ? "_window" : "");
      const double window_ns = windowed ? std::max(est * static_cast<double>(pairs), 1e6) : 0;
      // Note [Interleaved thread counts]: the GPU machines' vCPUs change
      // speed by a quarter from one second to the next, and each on its own
      // (bench/RESULTS.md). Timed one after the other, the 1-thread base and
      // the 8-thread run fell in different phases, and one CPU stood for
      // "one thread": the same code read speed-ups a factor two apart. So
      // each repetition times every thread count in turn, the speed-up is
      // the median of the repetitions' own ratios, and the single thread
      // moves to the next CPU each repetition.
      std::vector<std::vector<double>> samples(counts.size());
      std::vector<bool> failed(counts.size(), false);
      for (int rep_i = 0; rep_i < cfg.thread_reps; ++rep_i) {
        for (std::size_t c = 0; c < counts.size(); ++c) {
          if (failed[c]) continue;
          const int n = counts[c];
          try {
            samples[c].push_back(run_threads(make_worker, n, mixed, pairs, seqs, window_ns, n == 1 ? rep_i : 0));
          } catch (const std::exception& e) {
            rep.note(pattern + " threads=" + std::to_string(n) + " failed: " + e.what());
            failed[c] = true;
          }
        }
      }
      const std::size_t one = static_cast<std::size_t>(std::find(counts.begin(), counts.end(), 1) - counts.begin());
      const bool have_base = one < counts.size() && !failed[one];
      for (std::size_t c = 0; c < counts.size(); ++c) {
        if (failed[c] || samples[c].empty()) continue;
        const Timing t = summarize(samples[c]);
        Result r;
        r.labels = labels;
        r.labels.emplace_back("pattern", pattern);
        r.labels.emplace_back("size", mixed ? std::string("mixed") : std::to_string(kThreadHotSize));
        r.labels.emplace_back("threads", std::to_string(counts[c]));
        r.ns_per_pair = t.median;
        r.min_ns = t.min;
        r.max_ns = t.max;
        r.iters = pairs;
        r.reps = static_cast<int>(samples[c].size());
        if (have_base) {
          std::vector<double> ratios;
          for (std::size_t i = 0; i < samples[c].size() && i < samples[one].size(); ++i)
            if (samples[c][i] > 0) ratios.push_back(samples[one][i] / samples[c][i]);
          r.speedup = ratios.empty() ? -1 : summarize(std::move(ratios)).median;
        }
        rep.add(std::move(r));
      }
    }
  }
}

}  // namespace genesis_bench
