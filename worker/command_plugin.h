#pragma once
// Command-line renderer plugins (plugins/<name>/plugin.yaml: POV-Ray, Blender, command): finds
// the external renderers this worker can run (shared/plugins/plugin_catalog.h) and runs one task
// with one of them. C++ plugins, the path tracer among them, are worker/native_plugin.h.
//
// A task runs in its own folder under the worker's data directory (tasks/job<J>-task<T>-a<A>):
// the job's scene text is written there under its own file name, the renderer is started with
// posix_spawn as an argv array (never a shell) in its own process group, with stdin from
// /dev/null and stdout+stderr read line by line ('\r' ends a line too) for progress and error
// patterns. Cancel and the task timeout kill the whole process group. A run succeeds when the
// exit code is one the plugin lists, no error pattern matched and every expected image exists;
// each image is read with OpenImageIO (8-bit sRGB converted to linear), cropped to the task's
// tile when the renderer wrote the full frame, and handed to `on_frame`. The folder is removed
// afterwards.
//
// What a job may make the worker do: a plugin whose program a job names (`command`) runs only
// programs on the worker's allow-list (worker.command_programs, matched exactly; an empty list
// turns it off and it is not offered). Renderers run as worker.run_as when set (the task folder's
// directories are handed to that user), with the worker's environment less every TESSERA_*
// variable and HOME set to the task folder. Everything a renderer prints is made valid UTF-8
// (invalid bytes become U+FFFD) before it is matched, logged or reported. An image that is a
// symlink, or not a regular file, is refused.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shared/base/subprocess.h"
#include "shared/images/image_io.h"
#include "shared/plugins/plugin_file.h"
#include "shared/wire/protocol.h"

namespace tessera::worker {

using subprocess::FindProgram;
using subprocess::ProcessResult;
using subprocess::RunProcess;

// A plugin whose program this worker found (and whose version it detected).
struct CommandPlugin {
  plugin::PluginSpec spec;
  std::string executable;  // absolute path; empty for plugins whose job names the program
  std::string version;
};
using CommandPluginList = std::vector<CommandPlugin>;

// The colon-separated search path used for renderer programs: `configured`, else $PATH.
std::string EffectivePluginPath(const std::string& configured);
// Every built-in plugin whose program is found and whose version is detected (logged). A plugin
// whose program a job names is offered only when `command_programs` allows some program.
CommandPluginList DetectCommandPlugins(const std::string& search_path,
                                       const std::vector<std::string>& command_programs = {});
const CommandPlugin* FindCommandPlugin(const CommandPluginList& plugins, const std::string& name);
// The attempt's working folder: <data_dir>/tasks/job<J>-task<T>-a<A>.
std::string TaskFolder(const std::string& data_dir, const protocol::Assign& assign);

struct CommandPluginOptions {
  std::string data_dir;  // task folders go under <data_dir>/tasks
  std::string search_path;
  // The programs a job may name (worker.command_programs); empty: none.
  std::vector<std::string> command_programs;
  // The user renderers run as (worker.run_as); unset: the worker's own.
  std::optional<subprocess::Identity> run_as;
  int threads = 0;
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(double)> on_progress;            // 0..1 over the whole task
  std::function<void(const std::string&)> on_output;  // every line the renderer prints
  std::function<void(const std::string&)> on_status;  // a status line it reports (OpenJD)
  std::function<void(int)> on_frame_started;
  // The job's assets: path in the task folder -> cached file (worker/blob_cache.h).
  std::map<std::string, std::string> assets;
  // One finished frame (pixels of the task's part); returning an error stops the task.
  std::function<Status(int frame, image::ImageBuffer image, double seconds)> on_frame;
  // `outputs: files`: each file settings.files matched, by its path relative to the task folder
  // and where it is, after a run that succeeded; returning an error stops the task.
  std::function<Status(const std::string& name, const std::string& path)> on_file;
  // Set when a run fails: its class by the plugin's failure_classes (plugin::FailureRule), "crash"
  // for a signal, "timeout" at the task timeout, "" when nothing says.
  std::string* failure_class = nullptr;
};

// ---- what every task that runs programs shares (the command plugins, OpenJD tasks) -------

// The program a job names, if worker.command_programs allows it (exactly as listed), found in
// the plugin path; errors name `field` and say why (off, not allowed, not found).
StatusOr<std::string> AllowedProgram(const std::string& program,
                                     const CommandPluginOptions& options, const std::string& field,
                                     const std::string& renderer);

// The attempt's folder (TaskFolder), made afresh with the job's assets linked in; removed when
// this goes (kept when TESSERA_KEEP_TASK_DIRS is set, to debug a renderer).
class ScopedTaskFolder {
 public:
  static StatusOr<std::unique_ptr<ScopedTaskFolder>> Create(const CommandPluginOptions& options,
                                                            const protocol::Assign& assign);
  ~ScopedTaskFolder();
  ScopedTaskFolder(const ScopedTaskFolder&) = delete;
  ScopedTaskFolder& operator=(const ScopedTaskFolder&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  ScopedTaskFolder() = default;
  std::string dir_;
};

// Gives the task folder's directories to worker.run_as (when set), once everything the worker
// writes there is written.
Status HandOverTaskFolder(const std::string& task_dir, const CommandPluginOptions& options);

// How a task's programs start: as worker.run_as, with a clean environment holding `job_env`
// (checked by the caller) under what the worker sets -- HOME (the task folder),
// CUDA_VISIBLE_DEVICES (the task's GPUs only), USER and LOGNAME.
subprocess::RunOptions ProgramOptions(const CommandPluginOptions& options,
                                      const protocol::Assign& assign, const std::string& task_dir,
                                      std::map<std::string, std::string> job_env);

// The files under `task_dir` that `patterns` (relative fnmatch patterns, '*' within one folder,
// dotfiles only by an explicit '.') match, as sorted paths relative to it. Every pattern must
// match something; a match that is a link or not a regular file, has a name a job's output may
// not have (spec::ValidateAssetPath), or is larger than protocol::kMaxResultBytes is an error, as
// are more than protocol::kMaxOutputFiles matches.
StatusOr<std::vector<std::string>> MatchOutputFiles(const std::string& task_dir,
                                                    const std::vector<std::string>& patterns);

// Runs the task; Cancelled when *cancel turned true. Errors name what went wrong (the
// renderer's matched error lines, its exit code or signal, a missing image).
Status RunCommandPlugin(const CommandPlugin& plugin, const protocol::Assign& assign,
                        const CommandPluginOptions& options);

}  // namespace tessera::worker
