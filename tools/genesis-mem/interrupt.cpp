#include "interrupt.h"

#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace genesis::tools {

namespace {

debug::StopFlag g_stop{false};
volatile std::sig_atomic_t g_count = 0;
// When the first signal came, in CLOCK_MONOTONIC nanoseconds.
volatile std::int64_t g_first_ns = 0;
// Signals this close to the first are the same request: GNU timeout (and
// kill of a process group) sends its signal both to the child and to the
// group, so one request arrives twice within microseconds.
constexpr std::int64_t kSameRequestNs = 1'000'000'000;

std::int64_t monotonic_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
bool g_installed = false;
struct sigaction g_old_int {};
struct sigaction g_old_term {};

void on_signal(int) {
  // Only async-signal-safe calls here.
  const std::int64_t now = monotonic_ns();
  if (g_count == 0) {
    g_count = 1;
    g_first_ns = now;
    g_stop.store(true, std::memory_order_relaxed);
    return;
  }
  if (now - g_first_ns < kSameRequestNs) return;  // the same request, delivered twice
  g_count = g_count + 1;
  const char msg[] =
      "\ngenesis-mem: error: interrupted twice: stopped without writing the report, or with part of it "
      "written (one SIGINT or SIGTERM, or Ctrl-C once, stops the command and writes it)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  ::_exit(130);
}

}  // namespace

debug::StopFlag& install_interrupt_handler() {
  g_stop.store(false, std::memory_order_relaxed);
  g_count = 0;
  if (!g_installed) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_installed = true;
  }
  return g_stop;
}

void remove_interrupt_handler() {
  if (!g_installed) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

}  // namespace genesis::tools
