#include "interrupt.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace genesis::tools {

namespace {

debug::StopFlag g_stop{false};
volatile std::sig_atomic_t g_count = 0;
bool g_installed = false;
struct sigaction g_old_int {};
struct sigaction g_old_term {};

void on_signal(int) {
  g_count = g_count + 1;
  if (g_count == 1) {
    g_stop.store(true, std::memory_order_relaxed);
    return;
  }
  // Only async-signal-safe calls from here.
  const char msg[] =
      "\ngenesis-mem: error: interrupted twice: stopped without finishing; the report may be "
      "incomplete (press Ctrl-C once to stop and write it)\n";
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
