// Shared timing and allocation patterns of the allocator benchmarks
// (bench/alloc_bench.cpp for Genesis, bench/torch_alloc_bench.cpp for PyTorch,
// cudaMallocAsync and cudaMalloc). Header-only, no Genesis or CUDA includes,
// so that both programs measure exactly the same loops.
//
// An allocator is benchmarked through an adaptor, any type with
//     void* alloc(std::size_t bytes);   // never nullptr for bytes > 0
//     void  free(void* ptr);
//     void  sync();                     // before timing (cudaDeviceSynchronize)
// The patterns are templates over the adaptor, so an inline hot path (Genesis)
// stays inline: no virtual call is added to what is measured.
//
// Patterns (same parameters in both programs):
//   hot            allocate(size) + free, repeated; sizes 512 B .. 256 MiB.
//   mixed          64 live allocations; each step frees the one in a
//                  pseudo-random slot and allocates a pseudo-random size into
//                  it (sizes: an octave 512 B * 2^k, k uniform in 0..15, then
//                  uniform inside the octave: 512 B .. 32 MiB - 1, roughly
//                  log-uniform). Fixed seed: every run sees the same sequence.
//   threads_hot    1, 4, 8 threads each doing the hot pair at 1 MiB for the
//                  same number of pairs, started together (std::barrier);
//                  ns_per_pair = wall time / total pairs of all threads,
//                  speedup = ns_per_pair(1 thread) / ns_per_pair(N threads),
//                  per repetition, the thread counts taking turns (see
//                  run_thread_suite); the median of those ratios.
//   threads_mixed  the same with the mixed pattern (each thread its own 64
//                  live allocations and its own sequence).
//   threads_*_window  the same, each thread running for a fixed window
//                  instead of a fixed number of pairs (aggregate throughput
//                  not bounded by the slowest thread: see run_threads).
// Timing: std::chrono::steady_clock around whole loops. A calibration pass
// (batches of 1, 2, 4, ... pairs until one batch takes a few ms) doubles as
// the warm-up, so segments are reserved and caches hot before timing; the
// iteration count is the nominal one (1e6 pairs, --quick: 1e5) or less when
// the allocator is so slow that a repetition would exceed the time budget
// (cudaMalloc). Each figure is the median of several repetitions.
//
// Output: one machine-readable line per measurement,
//   RESULT allocator=genesis upstream=host api=ptr events=off pattern=hot
//          size=512 threads=1 ns_per_pair=12.3 min_ns=.. max_ns=.. iters=.. reps=..
// (one line; threads_* lines add speedup=..), SKIP lines for configurations
// that cannot run, then a human-readable table; --json FILE writes the same
// results as JSON ({"results": [...], metadata}).
#pragma once

// One header per concern; the benchmark programs include this one.
#include "bench_config.h"     // options common to both programs
#include "bench_patterns.h"   // single-thread patterns: calibration, hot, mixed
#include "bench_report.h"     // statistics, RESULT lines, table, JSON
#include "bench_sequences.h"  // clock, sizes, the mixed sequence
#include "bench_threads.h"    // CPU order, pinning, interleaved thread counts
