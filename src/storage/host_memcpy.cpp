// parallel_memcpy: large host copies on several threads.
//
// One core's memcpy tops out near 10-20 GB/s on server CPUs, under both the
// DRAM bandwidth and the PCIe link that staged copies feed (~55 GB/s on an
// H200 host). Several cores together get close to those limits, so the
// staging pipeline and big CPU storage copies split the range over a small
// persistent pool (threads are started once: spawning per call would cost
// more than copying a chunk).
//
// The pool is sized by the CPUs this process may use (affinity and cgroup
// quota), a call's default width follows get_num_threads() (Note [Thread
// count] in genesis/core/threads.h). It is never destroyed (its workers
// sleep through exit), and a forked child, which lacks the workers, forgets
// it and starts its own on its first large copy (Note [Fork] in
// genesis/core/fork.h).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/core/fork.h"
#include "genesis/core/threads.h"
#include "genesis/storage/copy.h"
#include "host_memcpy.h"

namespace genesis {
namespace {

constexpr std::size_t kParallelThreshold = std::size_t{4} << 20;  // below: one thread is as fast
constexpr std::size_t kMinPart = std::size_t{1} << 20;
constexpr std::size_t kPartAlign = 4096;

class MemcpyPool {
 public:
  explicit MemcpyPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  MemcpyPool(const MemcpyPool&) = delete;
  MemcpyPool& operator=(const MemcpyPool&) = delete;
  int workers() const noexcept { return static_cast<int>(threads_.size()); }

  MemcpyPool* forgotten_next = nullptr;  // pools that forked children left behind

  // Copies in `parts` pieces, the caller taking its share. One job at a time.
  void run(char* dst, const char* src, std::size_t n, int parts) {
    std::lock_guard call(call_mutex_);
    {
      std::lock_guard lock(mutex_);
      dst_ = dst;
      src_ = src;
      n_ = n;
      parts_ = parts;
      next_.store(0, std::memory_order_relaxed);
      unfinished_ = parts;
      ++generation_;
    }
    wake_.notify_all();
    help();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return unfinished_ == 0; });
  }

 private:
  void copy_part(int i) {
    // Equal parts rounded to pages so that no two threads share a page.
    const std::size_t per = ((n_ / static_cast<std::size_t>(parts_)) + kPartAlign - 1) & ~(kPartAlign - 1);
    const std::size_t begin = std::min(n_, per * static_cast<std::size_t>(i));
    const std::size_t end = (i + 1 == parts_) ? n_ : std::min(n_, begin + per);
    if (end > begin) std::memcpy(dst_ + begin, src_ + begin, end - begin);
  }

  void help() {
    int done = 0;
    for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < parts_;
         i = next_.fetch_add(1, std::memory_order_relaxed)) {
      copy_part(i);
      ++done;
    }
    if (done > 0) {
      std::lock_guard lock(mutex_);
      unfinished_ -= done;
      if (unfinished_ == 0) done_.notify_all();
    }
  }

  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
      }
      help();
    }
  }

  std::mutex call_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;  // never joined (see the file comment)
  std::uint64_t generation_ = 0;
  // The job (written under mutex_ before generation_ moves).
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  std::size_t n_ = 0;
  int parts_ = 0;
  std::atomic<int> next_{0};
  int unfinished_ = 0;
};

// The CPUs this process may use, counted once (the pool's size depends on it).
int usable_cpus() {
  static const int n = available_cpus();
  return n;
}

// Eight threads saturate a socket's memory bandwidth on the machines we
// measured; the pool can still serve callers that ask for more (up to 16).
int default_threads() { return std::min({8, usable_cpus(), get_num_threads()}); }

std::mutex g_create;
std::atomic<MemcpyPool*> g_pool{nullptr};
MemcpyPool* g_forgotten = nullptr;  // reachable, so leak checkers stay quiet

void prepare_fork() { g_create.lock(); }
void parent_after_fork() { g_create.unlock(); }
void child_after_fork() {
  if (MemcpyPool* old = g_pool.load(std::memory_order_relaxed); old != nullptr) {
    old->forgotten_next = g_forgotten;
    g_forgotten = old;
    g_pool.store(nullptr, std::memory_order_relaxed);
  }
  g_create.unlock();  // taken by this thread in prepare_fork
}
constexpr ForkHandlers kForkHandlers{&prepare_fork, &parent_after_fork, &child_after_fork};
// Installed at load, before any thread can take the locks (Note [Fork]).
[[maybe_unused]] const bool kForkRegistered = (register_fork_handlers(ForkRank::kMemcpyPool, &kForkHandlers), true);

MemcpyPool& pool() {
  if (MemcpyPool* p = g_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(g_create);
  MemcpyPool* p = g_pool.load(std::memory_order_relaxed);
  if (p == nullptr) {
    p = new MemcpyPool(std::min(16, usable_cpus()) - 1);
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

namespace storage_detail {

int staging_threads() { return std::min(16, usable_cpus()); }

void memcpy_threads(void* dst, const void* src, std::size_t nbytes, int threads) {
  if (nbytes == 0) return;
  GENESIS_CHECK(dst != nullptr && src != nullptr, "parallel_memcpy: null pointer for ", nbytes, " bytes");
  if (threads <= 0) threads = default_threads();
  const auto max_parts = static_cast<int>(std::min<std::size_t>(nbytes / kMinPart, 64));
  const int parts = std::min({threads, max_parts, pool().workers() + 1});
  if (nbytes < kParallelThreshold || parts <= 1) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  pool().run(static_cast<char*>(dst), static_cast<const char*>(src), nbytes, parts);
}

}  // namespace storage_detail

void parallel_memcpy(void* dst, const void* src, std::size_t nbytes) {
  if (nbytes > 0) {
    const auto d = reinterpret_cast<std::uintptr_t>(dst);
    const auto s = reinterpret_cast<std::uintptr_t>(src);
    GENESIS_CHECK(dst == nullptr || src == nullptr || d + nbytes <= s || s + nbytes <= d,
                  "parallel_memcpy: the source and destination ranges overlap");
  }
  storage_detail::memcpy_threads(dst, src, nbytes, 0);
}

}  // namespace genesis
