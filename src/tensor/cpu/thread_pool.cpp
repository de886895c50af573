// The CPU backend's thread pool for parallel_for (thread_pool.h).
//
// Workers start on first use and grow to get_num_threads() - 1 (Note [Thread
// count] in genesis/core/threads.h); a smaller setting leaves the extra
// workers idle rather than stopping them under a running parallel_for.
// The pool is never destroyed: at exit its workers sleep on the queue's
// condition variable and die with the process (joining them in a static
// destructor would race with kernels still running on other threads).
//
// Fork (Note [Fork] in genesis/core/fork.h): the workers are not in a forked
// child, so the child forgets the parent's pool (leaked, its threads gone)
// and starts a fresh one on its first parallel operation. The parent's pool
// carries on.
#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "genesis/core/fork.h"
#include "genesis/core/threads.h"

namespace genesis::kernels::cpu {
namespace {

thread_local bool t_in_worker = false;

class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Starts workers until there are `n`.
  void ensure_workers(int n) {
    if (workers_.load(std::memory_order_acquire) >= n) return;
    std::lock_guard<std::mutex> lock(mu_);
    while (static_cast<int>(threads_.size()) < n) threads_.emplace_back([this] { work(); });
    workers_.store(static_cast<int>(threads_.size()), std::memory_order_release);
  }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

  Pool* forgotten_next = nullptr;  // the chain of pools forked children left behind

 private:
  void work() {
    t_in_worker = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;  // only grows; never joined (see the file comment)
  std::atomic<int> workers_{0};       // threads_.size(), readable without mu_
};

// The process's pool, made on first use under g_create.
std::mutex g_create;
std::atomic<Pool*> g_pool{nullptr};
// Pools of the parent processes: still reachable, so leak checkers stay
// quiet about memory that is deliberately never freed.
Pool* g_forgotten = nullptr;

void prepare_fork() { g_create.lock(); }
void parent_after_fork() { g_create.unlock(); }
void child_after_fork() {
  if (Pool* old = g_pool.load(std::memory_order_relaxed); old != nullptr) {
    old->forgotten_next = g_forgotten;
    g_forgotten = old;
    g_pool.store(nullptr, std::memory_order_relaxed);
  }
  g_create.unlock();  // this thread took it in prepare_fork
}
constexpr ForkHandlers kForkHandlers{&prepare_fork, &parent_after_fork, &child_after_fork};
// Installed at load, before any thread can take the locks (Note [Fork]).
[[maybe_unused]] const bool kForkRegistered = (register_fork_handlers(ForkRank::kCpuPool, &kForkHandlers), true);

Pool& pool() {
  if (Pool* p = g_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(g_create);
  Pool* p = g_pool.load(std::memory_order_relaxed);
  if (p == nullptr) {
    p = new Pool;
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

int num_threads() { return get_num_threads(); }

void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks = (n + grain - 1) / grain;
  if (t_in_worker || max_chunks <= 1) {
    fn(0, n);
    return;
  }
  const int threads = num_threads();
  const std::int64_t chunks = std::min<std::int64_t>(threads, max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  Pool& workers = pool();
  workers.ensure_workers(static_cast<int>(chunks) - 1);
  const std::int64_t per = (n + chunks - 1) / chunks;
  std::mutex mu;
  std::condition_variable done_cv;
  std::int64_t remaining = chunks - 1;
  std::exception_ptr error;
  for (std::int64_t c = 1; c < chunks; ++c) {
    const std::int64_t begin = c * per, end = std::min(n, begin + per);
    workers.submit([&, begin, end] {
      std::exception_ptr e;
      try {
        if (begin < end) fn(begin, end);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (e && !error) error = e;
      if (--remaining == 0) done_cv.notify_one();
    });
  }
  std::exception_ptr mine;
  try {
    fn(0, std::min(n, per));
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu);
  done_cv.wait(lock, [&] { return remaining == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error) std::rethrow_exception(error);
}

}  // namespace genesis::kernels::cpu
