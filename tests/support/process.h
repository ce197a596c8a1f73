#pragma once
// Test support: real child processes (the daemons under test), started with fork/exec, their
// output sent to a log file, and always killed by PID when the handle goes away.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tessera::testing {

class Process {
 public:
  Process() = default;
  // Starts argv[0] (a path) with the given arguments; stdout+stderr go to log_path.
  static Process Start(const std::vector<std::string>& argv, const std::string& log_path);
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;

  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int sig);
  // Waits for exit; returns the exit status (128+signal when killed) or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after `grace`.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// Path of a binary in the build's bin directory.
std::string Bin(const std::string& name);
// A fresh, empty temporary directory (removed by the caller when it wants).
std::string MakeTempDir(const std::string& prefix);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

// Polls `pred` until true or timeout; returns its last value.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds step = std::chrono::milliseconds(50));

}  // namespace tessera::testing

#include <thread>

template <typename Pred>
bool tessera::testing::WaitFor(Pred pred, std::chrono::milliseconds timeout,
                               std::chrono::milliseconds step) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}
