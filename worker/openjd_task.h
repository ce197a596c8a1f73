#pragma once
// One task of an Open Job Description step (renderer `openjd`, shared/openjd/openjd.h): the step's
// session JSON arrives as the task's scene, and task index frame - 1 of its parameter space is
// run as a session of its own in the task folder:
//   1. the embedded files of the environments and of the step's script are written;
//   2. each environment is entered in order (job environments, then step environments): its
//      variables join the environment of everything run after, then its onEnter runs;
//   3. the step's onRun runs;
//   4. the onExit of every environment entered runs, innermost first -- also after a failure.
//   5. what the tasks wrote into the session's output folders (a job bundle's) goes back to the
//      scheduler as files named <output>/<path> -- not an attached input left unchanged.
// The first failure is the task's; every environment entered (or whose onEnter failed) is left.
// Every command is a program on worker.command_programs (as the `command` renderer's), run
// without a shell, as worker.run_as, with a clean environment holding the environments'
// variables and OPENJD_SESSION_WORKING_DIR. The log starts with "Job: <name>", "Step: <name>"
// and "Task: <index> (<parameters>)"; each command's line and its output follow, then "Process
// exited with code: N". The spec's stdout messages are read: `openjd_progress: N` (percent),
// `openjd_status: text` (the task's status line, on the scheduler), `openjd_fail: text` (the
// failure's message), and from an environment's onEnter `openjd_env: NAME=VALUE` and
// `openjd_unset_env: NAME` (until that environment is left; an unset wins). Cancel and timeouts
// stop a command as its `cancelation` says (TERMINATE: SIGKILL; NOTIFY_THEN_TERMINATE: SIGTERM,
// then SIGKILL after notifyPeriodInSeconds). PATH values are mapped by the job's and the farm's
// rules, then `worker_rules` (this worker's path_map).

#include "shared/base/status.h"
#include "shared/openjd/openjd.h"
#include "shared/wire/protocol.h"
#include "worker/command_plugin.h"

namespace tessera::worker {

// The renderer a worker offers when worker.command_programs allows some program.
bool OffersOpenJd(const std::vector<std::string>& command_programs);

// Runs the task; Cancelled when *options.cancel turned true. Uses of `options`: data_dir,
// search_path, command_programs, run_as, cancel, on_progress, on_status, on_output, on_file,
// assets, failure_class.
Status RunOpenJdTask(const protocol::Assign& assign, const CommandPluginOptions& options,
                     const std::vector<openjd::PathMappingRule>& worker_rules);

}  // namespace tessera::worker
