// run_self: start this test binary again as a second, independent process
// (posix_spawn of /proc/self/exe, never fork() after CUDA is initialised).
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace genesis::test {

// Starts /proc/self/exe with `args` and `extra_env` added to this process's
// environment; returns its exit status, or -1 (with a failure) if it was
// killed, timed out or could not start.
inline int run_self(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
             std::chrono::seconds timeout) {
  std::vector<std::string> env_strings(extra_env);
  for (char** e = environ; *e != nullptr; ++e) {
    bool overridden = false;
    for (const auto& x : extra_env)
      if (std::strncmp(*e, x.c_str(), x.find('=') + 1) == 0) overridden = true;
    if (!overridden) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::vector<std::string> argv_strings{exe};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn(/proc/self/exe) failed: " << std::strerror(rc);
    return -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) {
      ADD_FAILURE() << "waitpid failed: " << std::strerror(errno);
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the child process did not finish within " << timeout.count() << " s and was killed";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFSIGNALED(status)) {
    ADD_FAILURE() << "the child process died of signal " << WTERMSIG(status);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace genesis::test
