// The thread-count setting (Note [Thread count] in genesis/core/threads.h).
#include "genesis/core/threads.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "genesis/core/error.h"

namespace genesis {
namespace {

// 0 until set_num_threads(): then the count. Read on every parallel
// operation, so a plain atomic, not a lock.
std::atomic<int> g_explicit{0};

// The default and the environment, resolved once (they cannot change while
// the process runs; a forked child inherits the resolved value, which is
// also what it would compute).
struct Resolved {
  int count = 1;
  std::optional<std::string> error;  // GENESIS_NUM_THREADS was invalid
};

const Resolved& resolved() {
  static const Resolved r = [] {
    Resolved out;
    if (const char* env = std::getenv("GENESIS_NUM_THREADS"); env != nullptr && *env != '\0') {
      try {
        out.count = parse_num_threads(env);
      } catch (const InvalidArgumentError& e) {
        out.error = e.message();
      }
      return out;
    }
    out.count = std::min(available_cpus(), kDefaultMaxThreads);
    return out;
  }();
  return r;
}

}  // namespace

int parse_num_threads(const std::string& text) {
  long long v = 0;
  bool ok = !text.empty() && text.size() <= 9;
  for (char c : text) ok = ok && c >= '0' && c <= '9';
  if (ok) v = std::stoll(text);
  GENESIS_CHECK(ok && v >= 1 && v <= kMaxThreads, "GENESIS_NUM_THREADS='", text,
                "': expected a whole number of threads from 1 to ", kMaxThreads);
  return static_cast<int>(v);
}

void set_num_threads(int n) {
  GENESIS_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected a thread count from 1 to ", kMaxThreads,
                ", got ", n);
  g_explicit.store(n, std::memory_order_relaxed);
}

int get_num_threads() {
  if (const int n = g_explicit.load(std::memory_order_relaxed); n > 0) return n;
  const Resolved& r = resolved();
  if (r.error) GENESIS_THROW(InvalidArgumentError, *r.error, " (or call set_num_threads)");
  return r.count;
}

}  // namespace genesis
