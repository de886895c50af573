#include "genesis/memory/detail/asymmetric_fence.h"

#include <cstdlib>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace genesis::memory::detail {

namespace {

bool register_membarrier() noexcept {
#if defined(__linux__) && defined(__NR_membarrier)
  // GENESIS_NO_MEMBARRIER=1 forces the symmetric fallback (tested in CI so
  // that both variants of the handshake stay correct).
  if (const char* env = std::getenv("GENESIS_NO_MEMBARRIER"); env && env[0] == '1') return false;
  long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
#else
  return false;
#endif
}

}  // namespace

bool asymmetric_fence_available() noexcept {
  static const bool available = register_membarrier();
  return available;
}

void heavy_fence() noexcept {
#if defined(__linux__) && defined(__NR_membarrier)
  if (asymmetric_fence_available()) {
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0) return;
    // Registration succeeded, so this cannot fail; if it ever did, a full
    // fence here would not be enough, so abort loudly rather than race.
    std::abort();
  }
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace genesis::memory::detail
