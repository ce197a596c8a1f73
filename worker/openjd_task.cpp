#include "worker/openjd_task.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "shared/file_io.h"
#include "shared/openjd.h"
#include "shared/plugin_spec.h"
#include "shared/renderer_names.h"
#include "shared/subprocess.h"
#include "shared/utf8.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kProgressPrefix = "openjd_progress:";
constexpr const char* kStatusPrefix = "openjd_status:";
constexpr const char* kFailPrefix = "openjd_fail:";

Status WriteFiles(const std::vector<openjd::EmbeddedFile>& files) {
  for (const openjd::EmbeddedFile& f : files) {
    std::error_code ec;
    fs::create_directories(fs::path(f.path).parent_path(), ec);
    TSR_RETURN_IF_ERROR(file_io::WriteAtomically(f.path, {f.data}, f.runnable ? 0755 : 0644));
  }
  return Status::Ok();
}

// Runs the actions of one task's session.
class Session {
 public:
  Session(const protocol::Assign& assign, const CommandPluginOptions& options,
          const std::string& task_dir)
      : assign_(assign), options_(options), task_dir_(task_dir) {
    if (assign.timeout_s > 0) deadline_ = Clock::now() + std::chrono::seconds(assign.timeout_s);
  }

  // `what` names the action in messages ("onRun", "environment Setup onEnter").
  Status Run(const openjd::Action& action, const std::string& what, bool may_cancel = true) {
    // worker.command_programs decides, exactly as for the command renderer.
    TSR_ASSIGN_OR_RETURN(
        std::string program,
        AllowedProgram(action.command, options_, what + ".command", spec::kRendererOpenJd));
    std::vector<std::string> argv = {program};
    argv.insert(argv.end(), action.args.begin(), action.args.end());
    for (const std::string& word : argv) {
      if (word.find('\0') != std::string::npos) {
        return Status::InvalidArgument(what + ": an argument holds a NUL byte");
      }
    }
    subprocess::RunOptions run = ProgramOptions(options_, assign_, task_dir_, env_);
    if (action.cancel_mode == "NOTIFY_THEN_TERMINATE") {
      run.notify_period = std::chrono::seconds(std::max(1, action.notify_period_s));
    }
    std::optional<Clock::time_point> deadline = deadline_;
    if (action.timeout_s > 0) {
      const auto own = Clock::now() + std::chrono::seconds(action.timeout_s);
      deadline = deadline ? std::min(*deadline, own) : own;
    }
    std::string line_for_log = "$";
    for (const std::string& w : argv) line_for_log += " " + w;
    Output(utf8::Sanitize(line_for_log));
    std::string failure;
    // onExit actions run even when the task was cancelled: no cancel flag for them.
    const subprocess::ProcessResult r = subprocess::RunProcess(
        argv, task_dir_, may_cancel ? options_.cancel : nullptr, deadline,
        [&](const std::string& raw) {
          const std::string line = utf8::Sanitize(raw);
          Output(line);
          if (line.rfind(kProgressPrefix, 0) == 0) {
            try {
              const double percent = std::stod(line.substr(std::strlen(kProgressPrefix)));
              if (options_.on_progress) options_.on_progress(std::clamp(percent / 100, 0.0, 1.0));
            } catch (const std::exception&) {
              // Not a number: a line like any other.
            }
          } else if (line.rfind(kFailPrefix, 0) == 0 && failure.empty()) {
            failure = line.substr(std::strlen(kFailPrefix));
            failure.erase(0, failure.find_first_not_of(' '));
          }
        },
        run);
    if (r.cancelled) return Status::Cancelled("cancelled");
    const std::string said = failure.empty() ? "" : ": " + failure;
    auto classify = [&](const char* failure_class) {
      if (options_.failure_class) *options_.failure_class = failure_class;
    };
    if (!r.started) return Status::Internal(what + ": " + action.command + " could not be started");
    if (r.timed_out) {
      classify(protocol::kFailureTimeout);
      return Status::Internal(what + ": " + action.command + " was stopped at its timeout" + said);
    }
    if (r.signal != 0) {
      classify(protocol::kFailureCrash);
      return Status::Internal(what + ": " + action.command + " was killed by signal " +
                              std::to_string(r.signal) + said);
    }
    if (r.exit_code != 0) {
      return Status::Internal(what + ": " + action.command + " failed with exit code " +
                              std::to_string(r.exit_code) + said);
    }
    if (!failure.empty()) return Status::Internal(what + ": " + failure);
    return Status::Ok();
  }

  // The variables of an environment being entered, for everything run after.
  Status AddVariables(const openjd::EnvironmentPlan& env) {
    for (const auto& [name, value] : env.variables) {
      const std::string why = plugin::WhyNotAnEnvName(name);
      if (!why.empty()) {
        return Status::InvalidArgument("environment " + env.name + ": variable " + name + ": " +
                                       why);
      }
      env_[name] = value;
    }
    return Status::Ok();
  }

 private:
  void Output(const std::string& line) {
    if (options_.on_output) options_.on_output(line);
  }

  const protocol::Assign& assign_;
  const CommandPluginOptions& options_;
  const std::string& task_dir_;
  std::optional<Clock::time_point> deadline_;
  std::map<std::string, std::string> env_;
};

}  // namespace

bool OffersOpenJd(const std::vector<std::string>& command_programs) {
  return !command_programs.empty();
}

Status RunOpenJdTask(const protocol::Assign& assign, const CommandPluginOptions& options) {
  if (assign.frame_start != assign.frame_end || assign.frame_start < 1) {
    return Status::InvalidArgument("an OpenJD task is one frame (its index + 1), not " +
                                   std::to_string(assign.frame_start) + "-" +
                                   std::to_string(assign.frame_end));
  }
  if (options.command_programs.empty()) {
    return Status::FailedPrecondition(
        "renderer openjd is off on this worker: worker.command_programs lists no program");
  }
  TSR_ASSIGN_OR_RETURN(std::unique_ptr<ScopedTaskFolder> folder,
                       ScopedTaskFolder::Create(options, assign));
  const std::string& task_dir = folder->dir();
  TSR_ASSIGN_OR_RETURN(openjd::TaskPlan plan,
                       openjd::PlanTask(assign.scene_yaml, assign.frame_start - 1, task_dir));
  std::string parameters;
  for (const auto& [name, value] : plan.task_parameters) {
    parameters += (parameters.empty() ? "" : ", ") + name + "=" + value;
  }
  if (options.on_output) {
    options.on_output(utf8::Sanitize("OpenJD task " + std::to_string(assign.frame_start - 1) +
                                     (parameters.empty() ? "" : ": " + parameters)));
  }
  for (const openjd::EnvironmentPlan& env : plan.environments) {
    TSR_RETURN_IF_ERROR(WriteFiles(env.files));
  }
  TSR_RETURN_IF_ERROR(WriteFiles(plan.files));
  TSR_RETURN_IF_ERROR(HandOverTaskFolder(task_dir, options));

  Session session(assign, options, task_dir);
  Status result = Status::Ok();
  size_t entered = 0;
  for (; entered < plan.environments.size(); ++entered) {
    const openjd::EnvironmentPlan& env = plan.environments[entered];
    result = session.AddVariables(env);
    if (result.ok() && env.on_enter) {
      result = session.Run(*env.on_enter, "environment " + env.name + " onEnter");
    }
    if (!result.ok()) break;
  }
  if (result.ok()) result = session.Run(plan.on_run, "onRun");
  // Leave what was entered, innermost first (not an environment whose onEnter failed).
  for (size_t i = entered; i-- > 0;) {
    const openjd::EnvironmentPlan& env = plan.environments[i];
    if (!env.on_exit) continue;
    Status left = session.Run(*env.on_exit, "environment " + env.name + " onExit",
                              /*may_cancel=*/false);
    if (result.ok()) result = left;
  }
  return result;
}

}  // namespace tessera::worker
