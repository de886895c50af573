// Helpers for tests that need a second process or an error's message.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "genesis/core/error.h"

namespace genesis::test {

/// Runs `fn` in a forked child and returns its exit status (-1 if it did not
/// exit normally, -2/-3 if fork/wait failed). The child leaves with _exit so
/// that no destructor, atexit handler or gtest state of the parent runs twice.
inline int run_in_child(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    int code = 100;
    try {
      code = fn();
    } catch (...) {
      code = 101;
    }
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -3;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The message of the InvalidArgumentError `fn` throws, or a marker string.
inline std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgumentError& e) {
    return e.message();
  }
  return "<no InvalidArgumentError>";
}

}  // namespace genesis::test
