// Private: the thread-pooled host memcpy behind parallel_memcpy.
#pragma once

#include <cstddef>

namespace genesis::storage_detail {

/// memcpy on up to `threads` threads (0 = automatic); small copies stay on
/// the calling thread. No overlap check (callers guarantee it).
void memcpy_threads(void* dst, const void* src, std::size_t nbytes, int threads);

/// Threads the staging pipeline uses by default: min(16, CPUs this process
/// may use: affinity and cgroup quota). Staged
/// copies are limited by memory bandwidth, which one socket's cores share,
/// and the DMA engine only keeps up when the host side is this wide.
int staging_threads();

}  // namespace genesis::storage_detail
