// The worker side of OpenJD (shared/openjd/openjd.h): one task of a step's session JSON as the
// files to write and the commands to run, every format string resolved.

#include <initializer_list>

#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd {

namespace {

using nlohmann::json;
using Values = std::map<std::string, std::string>;

// The session JSON is written by TranslateTemplate, but it travels through the scheduler and
// may come from a newer Tessera: anything unexpected is refused, never guessed at.
Status CheckObject(const json& j, std::initializer_list<const char*> keys,
                   const std::string& field) {
  if (!j.is_object()) return Status::InvalidArgument(field + ": expected an object");
  for (const char* key : keys) {
    if (!j.contains(key)) return Status::InvalidArgument(field + ": missing '" + key + "'");
  }
  if (j.size() != keys.size()) {
    for (const auto& item : j.items()) {
      bool known = false;
      for (const char* key : keys) known = known || item.key() == key;
      if (!known) return Status::InvalidArgument(field + ": unknown key '" + item.key() + "'");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> Text(const json& j, const char* key, const std::string& field) {
  if (!j[key].is_string()) return Status::InvalidArgument(field + "." + key + ": expected text");
  return j[key].get<std::string>();
}

StatusOr<int> Int(const json& j, const char* key, const std::string& field) {
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 ||
      j[key].get<int64_t>() > spec::kMaxTaskTimeoutSeconds) {
    return Status::InvalidArgument(field + "." + key + ": expected a number of seconds");
  }
  return j[key].get<int>();
}

StatusOr<Action> ReadAction(const json& j, const Values& values, const std::string& field,
                            std::set<std::string>* used) {
  TSR_RETURN_IF_ERROR(
      CheckObject(j, {"command", "args", "timeout_s", "cancel_mode", "notify_period_s"}, field));
  Action action;
  TSR_ASSIGN_OR_RETURN(action.command,
                       internal::ResolveFormat(j["command"], values, field + ".command", used));
  if (!j["args"].is_array()) return Status::InvalidArgument(field + ".args: expected a list");
  for (size_t i = 0; i < j["args"].size(); ++i) {
    TSR_ASSIGN_OR_RETURN(std::string arg,
                         internal::ResolveFormat(j["args"][i], values,
                                                 field + ".args[" + std::to_string(i) + "]", used));
    action.args.push_back(std::move(arg));
  }
  TSR_ASSIGN_OR_RETURN(action.timeout_s, Int(j, "timeout_s", field));
  TSR_ASSIGN_OR_RETURN(action.cancel_mode, Text(j, "cancel_mode", field));
  TSR_ASSIGN_OR_RETURN(action.notify_period_s, Int(j, "notify_period_s", field));
  if (action.cancel_mode != "TERMINATE" && action.cancel_mode != "NOTIFY_THEN_TERMINATE") {
    return Status::InvalidArgument(field + ".cancel_mode: unknown mode '" + action.cancel_mode +
                                   "'");
  }
  return action;
}

struct FileSpec {
  std::string name, path;
  bool runnable = false;
  const json* data = nullptr;
};

// The files of a script: their paths under `dir` go into `values` (as "<prefix>.<name>") before
// any data is resolved, since a file may name another.
StatusOr<std::vector<FileSpec>> ReadFiles(const json& j, const std::string& dir,
                                          const std::string& prefix, const std::string& field,
                                          Values* values) {
  if (!j.is_array()) return Status::InvalidArgument(field + ": expected a list");
  std::vector<FileSpec> files;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string ffield = field + "[" + std::to_string(i) + "]";
    TSR_RETURN_IF_ERROR(CheckObject(j[i], {"name", "filename", "runnable", "data"}, ffield));
    FileSpec f;
    TSR_ASSIGN_OR_RETURN(f.name, Text(j[i], "name", ffield));
    TSR_ASSIGN_OR_RETURN(std::string filename, Text(j[i], "filename", ffield));
    if (filename.empty() || filename == "." || filename == ".." ||
        filename.find_first_of("/\\") != std::string::npos || !internal::IsIdentifier(f.name)) {
      return Status::InvalidArgument(ffield + ": not a file name");
    }
    if (!j[i]["runnable"].is_boolean()) {
      return Status::InvalidArgument(ffield + ".runnable: expected true or false");
    }
    f.runnable = j[i]["runnable"].get<bool>();
    f.path = dir + "/" + filename;
    f.data = &j[i]["data"];
    (*values)[prefix + f.name] = f.path;
    files.push_back(std::move(f));
  }
  return files;
}

StatusOr<std::vector<EmbeddedFile>> ResolveFiles(const std::vector<FileSpec>& specs,
                                                 const Values& values, const std::string& field,
                                                 std::set<std::string>* used) {
  std::vector<EmbeddedFile> files;
  for (size_t i = 0; i < specs.size(); ++i) {
    EmbeddedFile f;
    f.path = specs[i].path;
    f.runnable = specs[i].runnable;
    TSR_ASSIGN_OR_RETURN(f.data,
                         internal::ResolveFormat(*specs[i].data, values,
                                                 field + "[" + std::to_string(i) + "].data", used));
    files.push_back(std::move(f));
  }
  return files;
}

StatusOr<EnvironmentPlan> ReadEnvironment(const json& j, const std::string& dir,
                                          const Values& session, const std::string& field,
                                          std::set<std::string>* used) {
  TSR_RETURN_IF_ERROR(
      CheckObject(j, {"name", "scope", "variables", "files", "on_enter", "on_exit"}, field));
  EnvironmentPlan env;
  TSR_ASSIGN_OR_RETURN(env.name, Text(j, "name", field));
  TSR_ASSIGN_OR_RETURN(std::string scope, Text(j, "scope", field));
  if (scope != "external" && scope != "job" && scope != "step") {
    return Status::InvalidArgument(field + ".scope: expected external, job or step");
  }
  Values values = session;
  TSR_ASSIGN_OR_RETURN(std::vector<FileSpec> files,
                       ReadFiles(j["files"], dir, "Env.File.", field + ".files", &values));
  TSR_ASSIGN_OR_RETURN(env.files, ResolveFiles(files, values, field + ".files", used));
  if (!j["variables"].is_array()) {
    return Status::InvalidArgument(field + ".variables: expected a list");
  }
  for (const json& var : j["variables"]) {
    if (!var.is_array() || var.size() != 2 || !var[0].is_string()) {
      return Status::InvalidArgument(field + ".variables: expected [NAME, value] pairs");
    }
    const std::string name = var[0].get<std::string>();
    TSR_ASSIGN_OR_RETURN(
        std::string value,
        internal::ResolveFormat(var[1], values, field + ".variables." + name, used));
    // A newline would let a value forge another variable in the worker's environment block.
    if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
      return Status::InvalidArgument(field + ".variables." + name +
                                     ": the value holds a newline or NUL");
    }
    env.variables.emplace_back(name, std::move(value));
  }
  for (const char* key : {"on_enter", "on_exit"}) {
    if (j[key].is_null()) continue;
    TSR_ASSIGN_OR_RETURN(Action action, ReadAction(j[key], values, field + "." + key, used));
    (std::string(key) == "on_enter" ? env.on_enter : env.on_exit) = std::move(action);
  }
  return env;
}

}  // namespace

StatusOr<TaskPlan> PlanTask(std::string_view session_json, int64_t task_index,
                            const std::string& working_dir,
                            const std::vector<PathMappingRule>& worker_rules) {
  if (working_dir.empty() || working_dir[0] != '/') {
    return Status::InvalidArgument("openjd: the working directory '" + working_dir +
                                   "' is not absolute");
  }
  std::string wd = working_dir;
  while (wd.size() > 1 && wd.back() == '/') wd.pop_back();
  json session = json::parse(session_json, nullptr, /*allow_exceptions=*/false);
  if (session.is_discarded()) return Status::InvalidArgument("openjd session: not valid JSON");
  const int64_t version =
      session.is_object() && session.contains("version") && session["version"].is_number_integer()
          ? session["version"].get<int64_t>()
          : -1;
  // Version 1 (no path mapping) is still run: jobs stored before it are.
  if (version != 1 && version != kSessionVersion) {
    return Status::InvalidArgument("openjd session: version " +
                                   (session.is_object() && session.contains("version")
                                        ? session["version"].dump()
                                        : std::string("(none)")) +
                                   " is not understood (this worker reads versions 1 and " +
                                   std::to_string(kSessionVersion) + ")");
  }
  if (version == 1) {
    TSR_RETURN_IF_ERROR(CheckObject(
        session, {"version", "job", "step", "parameter_space", "environments", "script"},
        "openjd session"));
  } else {
    TSR_RETURN_IF_ERROR(CheckObject(session,
                                    {"version", "job", "step", "parameter_space", "environments",
                                     "script", "path_parameters", "path_mapping", "outputs"},
                                    "openjd session"));
  }
  try {
    TSR_ASSIGN_OR_RETURN(
        internal::ParameterSpace space,
        internal::SpaceFromJson(session["parameter_space"], spec::kMaxFramesPerJob));
    if (task_index < 0 || task_index >= space.count) {
      return Status::InvalidArgument("openjd session: task index " + std::to_string(task_index) +
                                     " is outside the step's " + std::to_string(space.count) +
                                     " tasks");
    }
    TaskPlan plan;
    TSR_ASSIGN_OR_RETURN(plan.job, Text(session, "job", "openjd session"));
    TSR_ASSIGN_OR_RETURN(plan.step, Text(session, "step", "openjd session"));
    // The job's rules (its own folders in the session made absolute), then the worker's.
    if (version >= 2) {
      TSR_ASSIGN_OR_RETURN(plan.path_mapping, internal::RulesFromSession(session["path_mapping"]));
    }
    for (PathMappingRule& rule : plan.path_mapping) {
      if (!rule.in_session) continue;
      rule.destination_path = internal::JoinPosix(wd, rule.destination_path);
      rule.in_session = false;
    }
    plan.path_mapping.insert(plan.path_mapping.end(), worker_rules.begin(), worker_rules.end());
    SortRules(&plan.path_mapping);
    const std::string rules_file = wd + "/openjd/path-mapping.json";
    Values base = {{"Session.WorkingDirectory", wd},
                   {"Session.HasPathMappingRules", plan.path_mapping.empty() ? "false" : "true"},
                   {"Session.PathMappingRulesFile", rules_file}};
    if (version >= 2) {
      // Param.X of a PATH parameter: its value with the rules applied (RawParam.X was
      // substituted when the job was made).
      const json& paths = session["path_parameters"];
      if (!paths.is_object()) {
        return Status::InvalidArgument("openjd session: path_parameters: expected an object");
      }
      for (const auto& item : paths.items()) {
        if (!item.value().is_string()) {
          return Status::InvalidArgument("openjd session: path_parameters: expected text");
        }
        base["Param." + item.key()] = MapPath(plan.path_mapping, item.value().get<std::string>());
      }
    }
    std::set<std::string> used;
    const json& envs = session["environments"];
    if (!envs.is_array()) return Status::InvalidArgument("openjd session: expected environments");
    for (size_t k = 0; k < envs.size(); ++k) {
      TSR_ASSIGN_OR_RETURN(EnvironmentPlan env,
                           ReadEnvironment(envs[k], wd + "/openjd/env-" + std::to_string(k + 1),
                                           base, "environments[" + std::to_string(k) + "]", &used));
      plan.environments.push_back(std::move(env));
    }
    Values values = base;
    const std::vector<std::string> task_values = internal::ValuesAt(space, task_index);
    for (size_t i = 0; i < space.params.size(); ++i) {
      const internal::TaskParameter& p = space.params[i];
      // Task.Param of a PATH task parameter is mapped, Task.RawParam never is.
      values["Task.Param." + p.name] =
          p.type == "PATH" ? MapPath(plan.path_mapping, task_values[i]) : task_values[i];
      values["Task.RawParam." + p.name] = task_values[i];
      plan.task_parameters.emplace_back(p.name, task_values[i]);
    }
    const json& script = session["script"];
    TSR_RETURN_IF_ERROR(CheckObject(script, {"files", "on_run"}, "script"));
    TSR_ASSIGN_OR_RETURN(
        std::vector<FileSpec> files,
        ReadFiles(script["files"], wd + "/openjd/task", "Task.File.", "script.files", &values));
    TSR_ASSIGN_OR_RETURN(plan.files, ResolveFiles(files, values, "script.files", &used));
    TSR_ASSIGN_OR_RETURN(plan.on_run, ReadAction(script["on_run"], values, "script.on_run", &used));
    if (version >= 2) {
      const json& outputs = session["outputs"];
      if (!outputs.is_array()) return Status::InvalidArgument("openjd session: expected outputs");
      for (const json& o : outputs) {
        TSR_RETURN_IF_ERROR(CheckObject(o, {"dir", "name"}, "openjd session: outputs"));
        TaskPlan::Output out;
        TSR_ASSIGN_OR_RETURN(out.dir, Text(o, "dir", "openjd session: outputs"));
        TSR_ASSIGN_OR_RETURN(out.name, Text(o, "name", "openjd session: outputs"));
        // Folders of the session, named by Tessera: never anywhere else.
        if (out.dir.rfind(std::string(kAttachedFolder) + "/", 0) != 0 ||
            internal::NormalizePosix(out.dir) != out.dir ||
            !internal::IsWithin(kAttachedFolder, out.dir) || out.name.empty() ||
            out.name.find_first_of("/\\") != std::string::npos || out.name[0] == '.') {
          return Status::InvalidArgument("openjd session: outputs: not a folder of the session");
        }
        plan.outputs.push_back(std::move(out));
      }
    }
    if (used.count("Session.PathMappingRulesFile")) {
      plan.files.insert(
          plan.files.begin(),
          EmbeddedFile{rules_file, PathMappingRulesToJson(plan.path_mapping).dump(2), false});
    }
    return plan;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("openjd session: ") + e.what());
  }
}

}  // namespace tessera::openjd
