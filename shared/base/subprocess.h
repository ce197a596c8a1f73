#pragma once
// Running other programs, for both daemons: the worker's renderer plugins and the scheduler's
// autoscaler (cloud command-line tools, local worker processes). Always an argv array, never a
// shell, so no argument is ever interpreted.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shared/base/status.h"

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

// A user programs may be run as: resolved from the password and group databases once (at
// start-up), so the child needs no lookups between fork and exec.
struct Identity {
  std::string user;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, as initgroups(3) would set them
  std::string home;
};
// NotFound naming the user when there is no such account.
StatusOr<Identity> LookupUser(const std::string& user);

// How RunProcess starts a program beyond its argv.
struct RunOptions {
  // Run as this user: the child drops to its groups, gid and uid (setgroups, setresgid,
  // setresuid, in that order; no new privileges through set-uid programs) before exec, never
  // through a shell. Only a process running as root can do this; the run fails otherwise.
  std::optional<Identity> run_as;
  // The child's environment: ours, less every TESSERA_* variable (join and API tokens a worker
  // was given must not reach a program a job names), with `set_env` on top. False: ours as is.
  bool scrub_environment = false;
  std::map<std::string, std::string> set_env;
  // On cancel or timeout: SIGTERM to the group first and SIGKILL only after this long (OpenJD's
  // NOTIFY_THEN_TERMINATE); zero: SIGKILL at once.
  std::chrono::milliseconds notify_period{0};
};

// Runs argv[0] (an absolute path) with argv in `cwd`, in a new process group, stdin from
// /dev/null. `on_line` gets every line of its stdout and stderr ('\r' ends a line too; lines
// are cut at 64 KiB), bytes as printed (callers sanitise what they keep). Stops it (SIGKILL to
// the group) when *cancel turns true or at `deadline`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& cwd,
                         const std::atomic<bool>* cancel,
                         std::optional<std::chrono::steady_clock::time_point> deadline,
                         const std::function<void(const std::string&)>& on_line,
                         const RunOptions& options = RunOptions());

// Starts argv[0] (an absolute path) in the background, stdin from /dev/null, stdout and stderr
// appended to `log_path`, default signals; the caller reaps it (waitpid).
StatusOr<pid_t> Start(const std::vector<std::string>& argv, const std::string& log_path);

}  // namespace tessera::subprocess
