// The fork handler table (Note [Fork] in genesis/core/fork.h).
#include "genesis/core/fork.h"

#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace genesis {
namespace {

constexpr int kRanks = static_cast<int>(ForkRank::kCount);

// One slot per rank, written by register_fork_handlers (at load) and read by
// the handlers below. Zero-initialised before any dynamic initializer runs,
// so registrations from other translation units' initializers are safe.
std::array<std::atomic<const ForkHandlers*>, kRanks> g_slots{};

// The sets prepare ran: parent and child release exactly those, even if a
// set was registered meanwhile (only the forking thread runs the handlers
// of one fork; concurrent forks are serialised by the C library).
thread_local std::array<const ForkHandlers*, kRanks> t_prepared{};

void run_prepare() {
  for (int r = 0; r < kRanks; ++r) {
    const ForkHandlers* h = g_slots[static_cast<std::size_t>(r)].load(std::memory_order_acquire);
    t_prepared[static_cast<std::size_t>(r)] = h;
    if (h != nullptr && h->prepare != nullptr) h->prepare();
  }
}

void run_parent() {
  for (int r = kRanks - 1; r >= 0; --r) {
    const ForkHandlers* h = t_prepared[static_cast<std::size_t>(r)];
    if (h != nullptr && h->parent != nullptr) h->parent();
  }
}

void run_child() {
  for (int r = kRanks - 1; r >= 0; --r) {
    const ForkHandlers* h = t_prepared[static_cast<std::size_t>(r)];
    if (h != nullptr && h->child != nullptr) h->child();
  }
}

void install_once() noexcept {
  static const bool installed = [] {
    if (pthread_atfork(&run_prepare, &run_parent, &run_child) != 0) {
      // Only ENOMEM is possible: forked children then behave as before.
      std::fputs("genesis: pthread_atfork failed: a fork()ed child may hang in Genesis calls\n", stderr);
    }
    return true;
  }();
  (void)installed;
}

}  // namespace

void register_fork_handlers(ForkRank rank, const ForkHandlers* handlers) noexcept {
  const int r = static_cast<int>(rank);
  if (r < 0 || r >= kRanks || handlers == nullptr) return;
  install_once();
  g_slots[static_cast<std::size_t>(r)].store(handlers, std::memory_order_release);
}

bool in_forked_child(int owner_pid) noexcept { return owner_pid != 0 && owner_pid != static_cast<int>(getpid()); }

void join_or_forget(std::thread& thread, int owner_pid) {
  if (!thread.joinable()) return;
  if (in_forked_child(owner_pid)) {
    thread.detach();  // the parent's thread: not in this process
    return;
  }
  thread.join();
}

}  // namespace genesis
