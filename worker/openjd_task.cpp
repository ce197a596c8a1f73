#include "worker/openjd_task.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "shared/base/file_io.h"
#include "shared/base/sha256.h"
#include "shared/base/subprocess.h"
#include "shared/base/utf8.h"
#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd.h"
#include "shared/plugins/plugin_file.h"
#include "shared/plugins/renderer_names.h"

namespace tessera::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kProgressPrefix = "openjd_progress:";
constexpr const char* kStatusPrefix = "openjd_status:";
constexpr const char* kFailPrefix = "openjd_fail:";
constexpr const char* kEnvPrefix = "openjd_env:";
constexpr const char* kUnsetEnvPrefix = "openjd_unset_env:";

// The text after a stdout message's prefix, its leading spaces dropped.
std::string After(const std::string& line, const char* prefix) {
  std::string rest = line.substr(std::strlen(prefix));
  rest.erase(0, rest.find_first_not_of(' '));
  return rest;
}

Status WriteFiles(const std::vector<openjd::EmbeddedFile>& files) {
  for (const openjd::EmbeddedFile& f : files) {
    std::error_code ec;
    fs::create_directories(fs::path(f.path).parent_path(), ec);
    TSR_RETURN_IF_ERROR(file_io::WriteAtomically(f.path, {f.data}, f.runnable ? 0755 : 0644));
  }
  return Status::Ok();
}

// Runs the actions of one task's session. Variables (an environment's, and what its onEnter
// says with openjd_env / openjd_unset_env) hold from where they are set until that environment
// is left; the session's working directory is OPENJD_SESSION_WORKING_DIR throughout.
class Session {
 public:
  Session(const protocol::Assign& assign, const CommandPluginOptions& options,
          const std::string& task_dir)
      : assign_(assign), options_(options), task_dir_(task_dir) {
    if (assign.timeout_s > 0) deadline_ = Clock::now() + std::chrono::seconds(assign.timeout_s);
    env_["OPENJD_SESSION_WORKING_DIR"] = task_dir;
  }

  // Enters an environment: its variables join everything run after, then its onEnter runs.
  Status Enter(const openjd::EnvironmentPlan& env) {
    saved_.push_back(env_);
    for (const auto& [name, value] : env.variables) {
      const std::string why = plugin::WhyNotAnEnvName(name);
      if (!why.empty()) {
        return Status::InvalidArgument("environment " + env.name + ": variable " + name + ": " +
                                       why);
      }
      env_[name] = value;
    }
    if (!env.on_enter) return Status::Ok();
    return Run(*env.on_enter, "environment " + env.name + " onEnter", /*may_cancel=*/true,
               /*entering=*/true);
  }

  // Leaves the innermost environment entered: its onExit runs (also after a failure or a
  // cancel), then the variables it set are gone.
  Status Leave(const openjd::EnvironmentPlan& env) {
    Status left = Status::Ok();
    if (env.on_exit) {
      left = Run(*env.on_exit, "environment " + env.name + " onExit", /*may_cancel=*/false);
    }
    env_ = saved_.back();
    saved_.pop_back();
    return left;
  }

  // `what` names the action in messages ("onRun", "environment Setup onEnter").
  Status Run(const openjd::Action& action, const std::string& what, bool may_cancel = true,
             bool entering = false) {
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
    std::map<std::string, std::string> set;
    std::set<std::string> unset;
    // onExit actions run even when the task was cancelled: no cancel flag for them.
    const subprocess::ProcessResult r = subprocess::RunProcess(
        argv, task_dir_, may_cancel ? options_.cancel : nullptr, deadline,
        [&](const std::string& raw) {
          const std::string line = utf8::Sanitize(raw);
          Output(line);
          if (line.rfind(kProgressPrefix, 0) == 0) {
            try {
              const double percent = std::stod(After(line, kProgressPrefix));
              if (options_.on_progress) options_.on_progress(std::clamp(percent / 100, 0.0, 1.0));
            } catch (const std::exception&) {
              // Not a number: a line like any other.
            }
          } else if (line.rfind(kStatusPrefix, 0) == 0) {
            if (options_.on_status) {
              options_.on_status(
                  utf8::Truncate(After(line, kStatusPrefix), protocol::kMaxStatusLineBytes));
            }
          } else if (line.rfind(kFailPrefix, 0) == 0 && failure.empty()) {
            failure = After(line, kFailPrefix);
          } else if (line.rfind(kEnvPrefix, 0) == 0 || line.rfind(kUnsetEnvPrefix, 0) == 0) {
            ReadEnvMessage(line, entering, &set, &unset);
          }
        },
        run);
    // Exit codes as the reference runner prints them, so a template's author finds them.
    if (r.started && !r.cancelled) {
      Output("Process exited with code: " +
             std::to_string(r.signal != 0 ? -r.signal : r.exit_code));
    }
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
    // What an onEnter said holds for everything after it; an unset wins over a set.
    for (const auto& [name, value] : set) env_[name] = value;
    for (const std::string& name : unset) env_.erase(name);
    return Status::Ok();
  }

 private:
  void Output(const std::string& line) {
    if (options_.on_output) options_.on_output(line);
  }

  // `openjd_env: NAME=VALUE` (or a JSON string of it) and `openjd_unset_env: NAME`: honoured
  // from an environment's onEnter only, and only for names a task may set.
  void ReadEnvMessage(const std::string& line, bool entering,
                      std::map<std::string, std::string>* set, std::set<std::string>* unset) {
    const bool is_unset = line.rfind(kUnsetEnvPrefix, 0) == 0;
    std::string rest = After(line, is_unset ? kUnsetEnvPrefix : kEnvPrefix);
    if (!entering) {
      Output("(ignored: " + std::string(is_unset ? "openjd_unset_env" : "openjd_env") +
             " counts only in an environment's onEnter)");
      return;
    }
    if (!rest.empty() && rest.front() == '"') {
      nlohmann::json text = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
      if (!text.is_string()) {
        Output("(ignored: not a JSON string: " + rest.substr(0, 64) + ")");
        return;
      }
      rest = text.get<std::string>();
    }
    const size_t eq = is_unset ? std::string::npos : rest.find('=');
    const std::string name = is_unset ? rest : rest.substr(0, eq);
    std::string why = plugin::WhyNotAnEnvName(name);
    if (!is_unset && eq == std::string::npos) why = "expected NAME=VALUE";
    if (!why.empty()) {
      Output("(ignored: " + name.substr(0, 64) + ": " + why + ")");
      return;
    }
    if (is_unset) {
      unset->insert(name);
    } else {
      (*set)[name] = rest.substr(eq + 1);
    }
  }

  const protocol::Assign& assign_;
  const CommandPluginOptions& options_;
  const std::string& task_dir_;
  std::optional<Clock::time_point> deadline_;
  std::map<std::string, std::string> env_;
  std::vector<std::map<std::string, std::string>> saved_;  // env_ before each environment
};

// The files tasks wrote into the session's output folders, each as <output name>/<path>: every
// plain file, but an attached input left as it came (its content still the asset's).
Status ReturnOutputs(const openjd::TaskPlan& plan, const std::string& task_dir,
                     const CommandPluginOptions& options) {
  int sent = 0;
  for (const openjd::TaskPlan::Output& out : plan.outputs) {
    const fs::path root = fs::path(task_dir) / out.dir;
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(root, ec))) continue;
    std::vector<std::pair<std::string, std::string>> files;  // name, path
    for (fs::recursive_directory_iterator it(root, ec), end; it != end; it.increment(ec)) {
      if (ec) return Status::Internal("output folder " + out.dir + ": " + ec.message());
      if (!fs::is_regular_file(it->symlink_status(ec))) continue;  // links are never returned
      const std::string in_task = it->path().lexically_relative(task_dir).generic_string();
      auto attached = options.assets.find(in_task);
      if (attached != options.assets.end()) {
        StatusOr<std::string> now = Sha256File(it->path().string());
        StatusOr<std::string> was = Sha256File(attached->second);
        if (now.ok() && was.ok() && *now == *was) continue;
      }
      const std::string name =
          out.name + "/" + it->path().lexically_relative(root).generic_string();
      TSR_RETURN_IF_ERROR(spec::ValidateAssetPath(name, "output " + in_task));
      if (++sent > protocol::kMaxOutputFiles) {
        return Status::InvalidArgument("the task wrote more than " +
                                       std::to_string(protocol::kMaxOutputFiles) +
                                       " files into its output folders");
      }
      files.emplace_back(name, it->path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& [name, path] : files) TSR_RETURN_IF_ERROR(options.on_file(name, path));
  }
  return Status::Ok();
}

}  // namespace

bool OffersOpenJd(const std::vector<std::string>& command_programs) {
  return !command_programs.empty();
}

Status RunOpenJdTask(const protocol::Assign& assign, const CommandPluginOptions& options,
                     const std::vector<openjd::PathMappingRule>& worker_rules) {
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
  TSR_ASSIGN_OR_RETURN(
      openjd::TaskPlan plan,
      openjd::PlanTask(assign.scene_yaml, assign.frame_start - 1, task_dir, worker_rules));
  std::string parameters;
  for (const auto& [name, value] : plan.task_parameters) {
    parameters += (parameters.empty() ? "" : ", ") + name + "=" + value;
  }
  if (options.on_output) {
    // Where the log starts: the job, step and task, as an OpenJD runner names them.
    options.on_output(utf8::Sanitize("Job: " + plan.job));
    options.on_output(utf8::Sanitize("Step: " + plan.step));
    options.on_output(utf8::Sanitize("Task: " + std::to_string(assign.frame_start - 1) +
                                     (parameters.empty() ? "" : " (" + parameters + ")")));
  }
  for (const openjd::EnvironmentPlan& env : plan.environments) {
    TSR_RETURN_IF_ERROR(WriteFiles(env.files));
  }
  TSR_RETURN_IF_ERROR(WriteFiles(plan.files));
  for (const openjd::TaskPlan::Output& out : plan.outputs) {
    std::error_code ec;
    fs::create_directories(fs::path(task_dir) / out.dir, ec);
    if (ec) return Status::Internal("cannot create the output folder " + out.dir);
  }
  TSR_RETURN_IF_ERROR(HandOverTaskFolder(task_dir, options));

  Session session(assign, options, task_dir);
  Status result = Status::Ok();
  size_t entered = 0;
  for (; entered < plan.environments.size(); ++entered) {
    result = session.Enter(plan.environments[entered]);
    if (!result.ok()) {
      ++entered;  // an environment whose onEnter failed is left too (spec: "attempted to enter")
      break;
    }
  }
  if (result.ok()) result = session.Run(plan.on_run, "onRun");
  // Leave what was entered, innermost first.
  for (size_t i = entered; i-- > 0;) {
    Status left = session.Leave(plan.environments[i]);
    if (result.ok()) result = left;
  }
  if (result.ok() && !plan.outputs.empty() && options.on_file) {
    result = ReturnOutputs(plan, task_dir, options);
  }
  return result;
}

}  // namespace tessera::worker
