#pragma once
// Real child processes for end-to-end tests: run a binary to completion with a deadline, or keep
// one in the background and read its stdout line by line. Every child is killed by PID when its
// owner goes away, so a failing test never leaves processes behind.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tessera::e2e {

struct RunResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with `argv`, stdin from /dev/null, the CLI's TESSERA_* settings and
// config file out of reach, plus `env` ("NAME=VALUE" entries).
RunResult RunProcess(const std::vector<std::string>& argv,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30),
                     const std::vector<std::string>& env = {});

// A child whose stdout is a pipe read by the test and whose stderr goes to `stderr_path`.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::string& stderr_path);
  ~BackgroundProcess();  // SIGKILLs the child (and its recorded children) if still running
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of stdout, or nullopt on EOF or timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // Waits for exit; nullopt on timeout. Exit code as in RunResult.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // PIDs descending from this process right now (children, theirs...; from /proc); remembered
  // for cleanup.
  std::vector<pid_t> Children();

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
  std::vector<pid_t> known_children_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// True while a process with this PID exists and is not a zombie.
bool ProcessAlive(pid_t pid);

}  // namespace tessera::e2e
