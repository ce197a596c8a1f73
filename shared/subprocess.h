#pragma once
// Running other programs, for both daemons: the worker's renderer plugins and the scheduler's
// autoscaler (cloud command-line tools, local worker processes). Always an argv array, never a
// shell, so no argument is ever interpreted.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace tessera::subprocess {

// The absolute path of `name`: itself when it is an absolute path to an executable file, else
// the first match in `search_path` (colon-separated absolute directories). Names with a '/'
// that are not absolute are never searched.
std::optional<std::string> FindProgram(const std::string& name, const std::string& search_path);

// What one external process run gave.
struct ProcessResult {
  bool started = false;
  bool timed_out = false;
  bool cancelled = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal killed it
};

// Runs argv[0] (an absolute path) with argv in `cwd`, in a new process group, stdin from
// /dev/null. `on_line` gets every line of its stdout and stderr ('\r' ends a line too; lines
// are cut at 64 KiB). Stops it (SIGKILL to the group) when *cancel turns true or at `deadline`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::atomic<bool>* cancel,
                         std::optional<std::chrono::steady_clock::time_point> deadline,
                         const std::function<void(const std::string&)>& on_line);

// Starts argv[0] (an absolute path) in the background, stdin from /dev/null, stdout and stderr
// appended to `log_path`, default signals; the caller reaps it (waitpid).
StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::string& log_path);

}  // namespace tessera::subprocess
