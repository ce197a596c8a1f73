#pragma once
// One task of an Open Job Description step (renderer `openjd`, shared/openjd.h): the step's
// session JSON arrives as the task's scene, and task index frame - 1 of its parameter space is
// run as a session of its own in the task folder:
//   1. the embedded files of the environments and of the step's script are written;
//   2. each environment is entered in order (job environments, then step environments): its
//      variables join the environment of everything run after, then its onEnter runs;
//   3. the step's onRun runs;
//   4. the onExit of every environment entered runs, innermost first -- also after a failure.
// The first failure is the task's. Every command is a program on worker.command_programs (as
// the `command` renderer's), run without a shell, as worker.run_as, with a clean environment;
// output lines go to the task log, and the spec's stdout messages are read: `openjd_progress:
// N` (percent), `openjd_status: text`, `openjd_fail: text` (the failure's message). Cancel and
// timeouts stop a command as its `cancelation` says (TERMINATE: SIGKILL; NOTIFY_THEN_TERMINATE:
// SIGTERM, then SIGKILL after notifyPeriodInSeconds).

#include "shared/protocol.h"
#include "shared/status.h"
#include "worker/command_plugin.h"

namespace tessera::worker {

// The renderer a worker offers when worker.command_programs allows some program.
bool OffersOpenJd(const std::vector<std::string>& command_programs);

// Runs the task; Cancelled when *options.cancel turned true. Uses of `options`: data_dir,
// search_path, command_programs, run_as, cancel, on_progress, on_output, assets,
// failure_class.
Status RunOpenJdTask(const protocol::Assign& assign, const CommandPluginOptions& options);

}  // namespace tessera::worker
