// A small fixed thread pool for parallel_for (thread_pool.h).
#include "thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace genesis::kernels::cpu {
namespace {

thread_local bool t_in_worker = false;

class Pool {
 public:
  Pool() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const unsigned workers = std::min(hw, 64u) - 1;
    for (unsigned i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const noexcept { return static_cast<int>(threads_.size()) + 1; }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void work() {
    t_in_worker = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (stop_ && tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

int num_threads() noexcept { return pool().size(); }

void parallel_for(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const int threads = t_in_worker ? 1 : num_threads();
  const std::int64_t max_chunks = (n + grain - 1) / grain;
  const std::int64_t chunks = std::min<std::int64_t>(threads, max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  const std::int64_t per = (n + chunks - 1) / chunks;
  std::mutex mu;
  std::condition_variable done_cv;
  std::int64_t remaining = chunks - 1;
  std::exception_ptr error;
  for (std::int64_t c = 1; c < chunks; ++c) {
    const std::int64_t begin = c * per, end = std::min(n, begin + per);
    pool().submit([&, begin, end] {
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
