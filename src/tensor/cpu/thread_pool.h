// parallel_for: the CPU backend's multithreading (a pool of std::threads,
// started on first use, sized by get_num_threads(): Note [Thread count] in
// genesis/core/threads.h; fork-safe: Note [Fork] in genesis/core/fork.h).
#pragma once

#include <cstdint>
#include <functional>

namespace genesis::kernels::cpu {

/// Element count from which kernels split their work across threads.
inline constexpr std::int64_t kParallelGrain = std::int64_t{1} << 15;

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` on the pool
/// and the calling thread; returns when all chunks are done. Runs inline for
/// small n, with one thread (set_num_threads(1), a one-CPU machine or
/// quota), and when called from inside a pool worker
/// (no nested parallelism, so no deadlock). The first exception a chunk
/// throws is rethrown after every chunk finished.
void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn);

/// Number of threads parallel_for may use (pool workers + the caller):
/// get_num_threads(), which throws InvalidArgumentError for an invalid
/// GENESIS_NUM_THREADS.
int num_threads();

}  // namespace genesis::kernels::cpu
