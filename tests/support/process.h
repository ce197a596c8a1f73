#pragma once
// Test support: real child processes -- the daemons under test, the `tessera` CLI, any program a
// test runs (ffmpeg, a shell) -- started with fork/exec, stdin from /dev/null. A child still
// running when its handle goes away is stopped by PID, and so is anything it started, so a
// failing test never leaves processes behind.
//
// Environments: a daemon gets the test's own (the daemons read the TESSERA_<SECTION>_<KEY>
// overrides a test sets); a client run (RunProcess, Process::StartClient) gets it without the
// CLI's settings (server, token, CA file, config file) plus the entries the test gives, so a
// developer's own configuration never leaks into a test.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tessera::testing {

struct RunResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with `argv` to completion and captures stdout and stderr apart; killed
// (SIGKILL) at the timeout. The client environment plus `env` ("NAME=VALUE" entries).
RunResult RunProcess(const std::vector<std::string>& argv,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30),
                     const std::vector<std::string>& env = {});

// A child that runs beside the test. Threads: the thread that started it uses the handle.
class Process {
 public:
  Process() = default;
  // A daemon: stdout and stderr appended to `log_path`, the test's environment as it is.
  static Process Start(const std::vector<std::string>& argv, const std::string& log_path);
  // A client the test reads line by line (ReadLine): stdout a pipe, stderr written to
  // `stderr_path`, the client environment.
  static Process StartClient(const std::vector<std::string>& argv, const std::string& stderr_path);
  // Stop(2 s), then SIGKILL for what it started that is still there.
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;

  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int sig);
  // Waits for exit; returns the exit status (128 + signal when killed) or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after `grace`.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  // StartClient: the next line of stdout, or nullopt on EOF or timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  // The processes descending from this one right now (children, theirs...; read from /proc),
  // remembered so the destructor stops them too.
  std::vector<pid_t> Descendants();

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  int stdout_fd_ = -1;  // StartClient only
  std::string buffered_;
  std::vector<pid_t> descendants_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (a small race with other processes, fine
// for a test).
int FreePort();

// True while a process with this PID exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// Path of a binary in the build's bin directory.
std::string Bin(const std::string& name);
// A fresh, empty temporary directory (removed by the caller when it wants).
std::string MakeTempDir(const std::string& prefix);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);
// A file's permission bits as octal text ("600"), or "missing".
std::string FileMode(const std::string& path);

// Polls `pred` until true or timeout; returns its last value.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds step = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

}  // namespace tessera::testing
