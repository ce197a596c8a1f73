// The steps and environments of an OpenJD job template (shared/openjd.h): scripts, embedded
// files, parameter spaces and host requirements, into each step's session JSON and the Tessera
// job file.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <set>

#include "shared/job_spec.h"
#include "shared/job_steps.h"
#include "shared/openjd_internal.h"
#include "shared/yaml_util.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxNameChars = 64;  // step and environment names, embedded file names
constexpr size_t kMaxTaskParameters = 16;
constexpr size_t kMaxRangeList = 1024;
constexpr size_t kMaxCombinationChars = 1280;
constexpr size_t kMaxVariableNameChars = 256;
constexpr size_t kMaxVariableValueChars = 2048;
constexpr int kMaxNotifyPeriodSeconds = 600;
constexpr int kDefaultOnExitTimeoutSeconds = 300;

bool HasNewline(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }
bool HasCc(std::string_view s) { return HasControlChar(s); }

// A non-empty list, or absent.
Status CheckList(const YAML::Node& node, const std::string& field, const char* what) {
  if (!node.IsSequence() || node.size() == 0) {
    return Status::InvalidArgument(field + ": expected a list of at least one " + what +
                                   (node.IsSequence() ? "" : ", got " + yaml::KindName(node)));
  }
  return Status::Ok();
}

StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) {
    return Status::InvalidArgument(field + ": expected a string, got " + yaml::KindName(node));
  }
  return node.Scalar();
}

// <Action> (spec 5). `on_run`: the step's onRun (its notify period defaults to 120, others 30).
StatusOr<nlohmann::json> ParseAction(const YAML::Node& node, const std::string& field,
                                     const Scope& scope, bool on_run, int default_timeout) {
  yaml::MapReader r(node, field);
  std::string command;
  int timeout = default_timeout;
  r.Required("command", &command).Optional("timeout", &timeout);
  YAML::Node args = r.Child("args");
  YAML::Node cancelation = r.Child("cancelation");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (r.Has("timeout") && (timeout <= 0 || timeout > spec::kMaxTaskTimeoutSeconds)) {
    return Status::InvalidArgument(field + ".timeout: must be 1.." +
                                   std::to_string(spec::kMaxTaskTimeoutSeconds) + " seconds");
  }
  if (command.empty()) return Status::InvalidArgument(field + ".command: must not be empty");
  TSR_ASSIGN_OR_RETURN(FormatString cmd, BindFormat(command, scope, field + ".command"));
  if (AnyLiteral(cmd, HasCc)) {
    return Status::InvalidArgument(field + ".command: holds a control character");
  }
  nlohmann::json json_args = nlohmann::json::array();
  if (args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) return Status::InvalidArgument(field + ".args: expected a list");
    for (size_t i = 0; i < args.size(); ++i) {
      TSR_ASSIGN_OR_RETURN(std::string text, Scalar(args[i], Item(field + ".args", i)));
      TSR_ASSIGN_OR_RETURN(FormatString arg, BindFormat(text, scope, Item(field + ".args", i)));
      if (AnyLiteral(arg, HasCc)) {
        return Status::InvalidArgument(Item(field + ".args", i) + ": holds a control character");
      }
      json_args.push_back(FormatToJson(arg));
    }
  }
  std::string mode = "TERMINATE";
  int notify = 0;
  if (cancelation.IsDefined() && !cancelation.IsNull()) {
    yaml::MapReader c(cancelation, field + ".cancelation");
    c.Required("mode", &mode);
    if (mode == "NOTIFY_THEN_TERMINATE") {
      notify = on_run ? 120 : 30;
      c.Optional("notifyPeriodInSeconds", &notify);
    }
    TSR_RETURN_IF_ERROR(c.Finish());
    if (mode != "TERMINATE" && mode != "NOTIFY_THEN_TERMINATE") {
      return Status::InvalidArgument(field +
                                     ".cancelation.mode: expected TERMINATE or "
                                     "NOTIFY_THEN_TERMINATE, got '" +
                                     mode + "'");
    }
    if (mode == "NOTIFY_THEN_TERMINATE" && (notify < 1 || notify > kMaxNotifyPeriodSeconds)) {
      return Status::InvalidArgument(field + ".cancelation.notifyPeriodInSeconds: must be 1.." +
                                     std::to_string(kMaxNotifyPeriodSeconds));
    }
  }
  return nlohmann::json{{"command", FormatToJson(cmd)},
                        {"args", json_args},
                        {"timeout_s", timeout},
                        {"cancel_mode", mode},
                        {"notify_period_s", notify}};
}

struct RawFile {
  std::string name, filename, data, field;
  bool runnable = false;
};

// <EmbeddedFile> list (spec 6): names first, as the data may refer to any file of the script.
StatusOr<std::vector<RawFile>> ReadEmbeddedFiles(const YAML::Node& node, const std::string& field) {
  std::vector<RawFile> files;
  if (!node.IsDefined() || node.IsNull()) return files;
  TSR_RETURN_IF_ERROR(CheckList(node, field, "embedded file"));
  std::set<std::string> names, written;
  for (size_t i = 0; i < node.size(); ++i) {
    RawFile f;
    f.field = Item(field, i);
    TSR_RETURN_IF_ERROR(RefuseExtensionKeys(node[i], f.field, {{"endOfLine", "FEATURE_BUNDLE_1"}}));
    yaml::MapReader r(node[i], f.field);
    std::string type;
    r.Required("name", &f.name).Required("type", &type).Optional("filename", &f.filename);
    r.Optional("runnable", &f.runnable).Required("data", &f.data);
    TSR_RETURN_IF_ERROR(r.Finish());
    if (!IsIdentifier(f.name)) {
      return Status::InvalidArgument(f.field + ".name: '" + f.name + "' is not an identifier");
    }
    if (!names.insert(f.name).second) {
      return Status::InvalidArgument(f.field + ".name: another embedded file is named '" + f.name +
                                     "'");
    }
    if (type != "TEXT") {
      return Status::InvalidArgument(f.field + ".type: expected TEXT, got '" + type + "'");
    }
    if (r.Has("filename")) {
      TSR_RETURN_IF_ERROR(CheckText(f.filename, f.field + ".filename", 1, kMaxNameChars, false));
      if (f.filename.find_first_of("/\\") != std::string::npos || f.filename == "." ||
          f.filename == "..") {
        return Status::InvalidArgument(f.field + ".filename: '" + f.filename +
                                       "' must be a file name, without folders");
      }
    } else {
      f.filename = f.name;
    }
    if (!written.insert(f.filename).second) {
      return Status::InvalidArgument(f.field +
                                     ".filename: another embedded file of this script "
                                     "is written as '" +
                                     f.filename + "'");
    }
    if (f.data.empty()) return Status::InvalidArgument(f.field + ".data: must not be empty");
    files.push_back(std::move(f));
  }
  return files;
}

StatusOr<nlohmann::json> FilesToJson(const std::vector<RawFile>& files, const Scope& scope) {
  nlohmann::json out = nlohmann::json::array();
  for (const RawFile& f : files) {
    TSR_ASSIGN_OR_RETURN(FormatString data, BindFormat(f.data, scope, f.field + ".data"));
    out.push_back({{"name", f.name},
                   {"filename", f.filename},
                   {"runnable", f.runnable},
                   {"data", FormatToJson(data)}});
  }
  return out;
}

// A script's `actions` and `embeddedFiles` (the parts both kinds of script share).
Status RefuseScriptExtensions(const YAML::Node& node, const std::string& field) {
  return RefuseExtensionKeys(node, field,
                             {{"let", "EXPR"},
                              {"bash", "FEATURE_BUNDLE_1"},
                              {"cmd", "FEATURE_BUNDLE_1"},
                              {"node", "FEATURE_BUNDLE_1"},
                              {"powershell", "FEATURE_BUNDLE_1"},
                              {"python", "FEATURE_BUNDLE_1"}});
}

}  // namespace

StatusOr<nlohmann::json> ParseEnvironment(const YAML::Node& node, const std::string& field,
                                          const TemplateContext& ctx, const char* scope_name,
                                          std::string* name) {
  TSR_RETURN_IF_ERROR(RefuseExtensionKeys(node, field, {{"let", "EXPR"}}));
  yaml::MapReader r(node, field);
  std::string description;
  r.Required("name", name).Optional("description", &description);
  YAML::Node script = r.Child("script");
  YAML::Node variables = r.Child("variables");
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(CheckText(*name, field + ".name", 1, kMaxNameChars, false));
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, field + ".description", 1, 2048, true));
  }
  if (!r.Has("script") && !r.Has("variables")) {
    return Status::InvalidArgument(field + ": an environment needs a script or variables");
  }
  nlohmann::json env = {{"name", *name},
                        {"scope", scope_name},
                        {"variables", nlohmann::json::array()},
                        {"files", nlohmann::json::array()},
                        {"on_enter", nullptr},
                        {"on_exit", nullptr}};
  Scope scope = ctx.HostScope();
  scope.env = true;
  if (r.Has("script")) {
    const std::string sfield = field + ".script";
    TSR_RETURN_IF_ERROR(RefuseScriptExtensions(script, sfield));
    yaml::MapReader s(script, sfield);
    YAML::Node actions = s.Child("actions");
    YAML::Node files_node = s.Child("embeddedFiles");
    TSR_RETURN_IF_ERROR(s.Finish());
    TSR_ASSIGN_OR_RETURN(std::vector<RawFile> files,
                         ReadEmbeddedFiles(files_node, sfield + ".embeddedFiles"));
    for (const RawFile& f : files) scope.files.insert(f.name);
    TSR_ASSIGN_OR_RETURN(env["files"], FilesToJson(files, scope));
    yaml::MapReader a(actions, sfield + ".actions");
    YAML::Node on_enter = a.Child("onEnter");
    YAML::Node on_exit = a.Child("onExit");
    if (!actions.IsDefined() || actions.IsNull()) {
      a.Fail(Status::InvalidArgument(sfield + ".actions: required field is missing"));
    }
    TSR_RETURN_IF_ERROR(a.Finish());
    if (!a.Has("onEnter") && !a.Has("onExit")) {
      return Status::InvalidArgument(sfield + ".actions: needs onEnter or onExit");
    }
    if (a.Has("onEnter")) {
      TSR_ASSIGN_OR_RETURN(env["on_enter"],
                           ParseAction(on_enter, sfield + ".actions.onEnter", scope, false, 0));
    }
    if (a.Has("onExit")) {
      TSR_ASSIGN_OR_RETURN(env["on_exit"], ParseAction(on_exit, sfield + ".actions.onExit", scope,
                                                       false, kDefaultOnExitTimeoutSeconds));
    }
  }
  if (r.Has("variables")) {
    const std::string vfield = field + ".variables";
    if (!variables.IsMap() || variables.size() == 0) {
      return Status::InvalidArgument(vfield + ": expected a map of NAME: value");
    }
    std::set<std::string> seen;
    for (const auto& kv : variables) {
      const std::string var = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      const std::string vf = vfield + "." + var;
      const bool valid = !var.empty() && var.size() <= kMaxVariableNameChars &&
                         !(var[0] >= '0' && var[0] <= '9') &&
                         std::all_of(var.begin(), var.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '_';
                         });
      if (!valid) {
        return Status::InvalidArgument(vf +
                                       ": not a variable name (latin letters, digits and "
                                       "'_', not starting with a digit, at most 256)");
      }
      if (!seen.insert(var).second) return Status::InvalidArgument(vf + ": given twice");
      TSR_ASSIGN_OR_RETURN(std::string text, Scalar(kv.second, vf));
      TSR_ASSIGN_OR_RETURN(FormatString value, BindFormat(text, scope, vf));
      if (AnyLiteral(value, HasNewline)) {
        return Status::InvalidArgument(vf + ": a variable's value may not hold a newline");
      }
      if (CharCount(LiteralText(value)) > kMaxVariableValueChars) {
        return Status::InvalidArgument(vf + ": at most " + std::to_string(kMaxVariableValueChars) +
                                       " characters");
      }
      env["variables"].push_back({var, FormatToJson(value)});
    }
  }
  return env;
}

namespace {

// <StepParameterSpaceDefinition> (spec 3.4).
StatusOr<ParameterSpace> ReadParameterSpace(const YAML::Node& node, const std::string& field,
                                            const TemplateContext& ctx) {
  ParameterSpace space;
  yaml::MapReader r(node, field);
  YAML::Node defs = r.Child("taskParameterDefinitions");
  std::string combination;
  r.Optional("combination", &combination);
  if (!defs.IsDefined() || defs.IsNull()) {
    r.Fail(Status::InvalidArgument(field + ".taskParameterDefinitions: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  const std::string dfield = field + ".taskParameterDefinitions";
  TSR_RETURN_IF_ERROR(CheckList(defs, dfield, "task parameter"));
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(defs, dfield, kMaxTaskParameters));
  const Scope scope = ctx.TemplateScope();
  std::vector<std::string> names;
  for (size_t i = 0; i < defs.size(); ++i) {
    const std::string pfield = Item(dfield, i);
    TSR_RETURN_IF_ERROR(RefuseExtensionKeys(defs[i], pfield, {{"chunks", "TASK_CHUNKING"}}));
    yaml::MapReader p(defs[i], pfield);
    TaskParameter param;
    p.Required("name", &param.name).Required("type", &param.type);
    YAML::Node range = p.Child("range");
    if (!range.IsDefined() || range.IsNull()) {
      p.Fail(Status::InvalidArgument(pfield + ".range: required field is missing"));
    }
    TSR_RETURN_IF_ERROR(p.Finish());
    if (!IsIdentifier(param.name)) {
      return Status::InvalidArgument(pfield + ".name: '" + param.name + "' is not an identifier");
    }
    if (std::find(names.begin(), names.end(), param.name) != names.end()) {
      return Status::InvalidArgument(pfield + ".name: another task parameter is named '" +
                                     param.name + "'");
    }
    if (param.type == "CHUNK[INT]")
      return NeedsExtension(pfield + ".type CHUNK[INT]", "TASK_CHUNKING");
    if (param.type != "INT" && param.type != "FLOAT" && param.type != "STRING" &&
        param.type != "PATH") {
      return Status::InvalidArgument(pfield + ".type: unknown type '" + param.type +
                                     "' (INT, FLOAT, STRING, PATH)");
    }
    const std::string rfield = pfield + ".range";
    if (range.IsScalar() && param.type == "INT") {
      // An <IntRangeExpr>, possibly from a job parameter ("{{Param.Frames}}").
      TSR_ASSIGN_OR_RETURN(FormatString text, BindFormat(range.Scalar(), scope, rfield));
      TSR_ASSIGN_OR_RETURN(param.runs,
                           ParseIntRangeExpr(LiteralText(text), spec::kMaxFramesPerJob, rfield));
    } else if (range.IsSequence()) {
      TSR_RETURN_IF_ERROR(CheckList(range, rfield, "value"));
      TSR_RETURN_IF_ERROR(yaml::CheckListSize(range, rfield, kMaxRangeList));
      for (size_t k = 0; k < range.size(); ++k) {
        const std::string vfield = Item(rfield, k);
        TSR_ASSIGN_OR_RETURN(std::string raw, Scalar(range[k], vfield));
        TSR_ASSIGN_OR_RETURN(FormatString text, BindFormat(raw, scope, vfield));
        const std::string value = LiteralText(text);
        if (param.type == "INT") {
          int64_t v = 0;
          if (!ParseInteger(value, &v)) {
            return Status::InvalidArgument(vfield + ": '" + value + "' is not an integer");
          }
          param.runs.push_back({v, 1, 1});
          continue;
        }
        double d = 0;
        if (param.type == "FLOAT" && !ParseFloat(value, &d)) {
          return Status::InvalidArgument(vfield + ": '" + value + "' is not a number");
        }
        TSR_RETURN_IF_ERROR(CheckText(value, vfield, 1, 1024, true));
        param.values.push_back(value);
      }
    } else {
      return Status::InvalidArgument(rfield + (param.type == "INT"
                                                   ? ": expected a list or a range expression"
                                                   : ": expected a list of values"));
    }
    names.push_back(param.name);
    space.params.push_back(std::move(param));
  }
  const std::string cfield = field + ".combination";
  if (r.Has("combination")) {
    TSR_RETURN_IF_ERROR(CheckText(combination, cfield, 1, kMaxCombinationChars, false));
    TSR_ASSIGN_OR_RETURN(space.root, ParseCombination(combination, names, cfield));
  } else {
    space.root.kind = CombinationNode::Kind::kProduct;
    for (size_t i = 0; i < names.size(); ++i) {
      CombinationNode leaf;
      leaf.param = i;
      space.root.children.push_back(leaf);
    }
  }
  TSR_RETURN_IF_ERROR(CheckSpace(&space, spec::kMaxFramesPerJob, cfield));
  return space;
}

struct StepOut {
  std::string name;                     // OpenJD
  std::string tessera_name;             // Tessera
  std::vector<std::string> depends_on;  // OpenJD names
  spec::ResourceSpec resources;
  std::vector<std::string> tags;
  int64_t tasks = 1;
  nlohmann::json session;
};

StatusOr<StepOut> ReadStep(const YAML::Node& node, const std::string& field,
                           const TemplateContext& ctx, const nlohmann::json& job_environments) {
  StepOut step;
  TSR_RETURN_IF_ERROR(RefuseExtensionKeys(node, field, {{"let", "EXPR"}}));
  yaml::MapReader r(node, field);
  std::string description;
  r.Required("name", &step.name).Optional("description", &description);
  YAML::Node deps = r.Child("dependencies");
  YAML::Node envs = r.Child("stepEnvironments");
  YAML::Node host = r.Child("hostRequirements");
  YAML::Node space_node = r.Child("parameterSpace");
  YAML::Node script = r.Child("script");
  if (r.ok() && (!script.IsDefined() || script.IsNull())) {
    r.Fail(Status::InvalidArgument(field + ".script: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(CheckText(step.name, field + ".name", 1, kMaxNameChars, false));
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, field + ".description", 1, 2048, true));
  }
  if (r.Has("dependencies")) {
    TSR_RETURN_IF_ERROR(CheckList(deps, field + ".dependencies", "dependency"));
    TSR_RETURN_IF_ERROR(
        yaml::CheckListSize(deps, field + ".dependencies", spec::kMaxStepDependencies));
    for (size_t i = 0; i < deps.size(); ++i) {
      yaml::MapReader d(deps[i], Item(field + ".dependencies", i));
      std::string on;
      d.Required("dependsOn", &on);
      TSR_RETURN_IF_ERROR(d.Finish());
      step.depends_on.push_back(on);
    }
  }
  ParameterSpace space;
  if (r.Has("parameterSpace")) {
    TSR_ASSIGN_OR_RETURN(space, ReadParameterSpace(space_node, field + ".parameterSpace", ctx));
  }
  step.tasks = space.count;
  if (r.Has("hostRequirements")) {
    TSR_RETURN_IF_ERROR(
        ReadHostRequirements(host, field + ".hostRequirements", ctx, &step.resources, &step.tags));
  }
  nlohmann::json environments = job_environments;
  if (r.Has("stepEnvironments")) {
    TSR_RETURN_IF_ERROR(CheckList(envs, field + ".stepEnvironments", "environment"));
    std::set<std::string> names;
    for (size_t i = 0; i < envs.size(); ++i) {
      const std::string efield = Item(field + ".stepEnvironments", i);
      std::string name;
      TSR_ASSIGN_OR_RETURN(nlohmann::json env,
                           ParseEnvironment(envs[i], efield, ctx, "step", &name));
      if (ctx.job_environment_names.count(name)) {
        return Status::InvalidArgument(efield + ".name: a job environment is also named '" + name +
                                       "'");
      }
      if (!names.insert(name).second) {
        return Status::InvalidArgument(efield +
                                       ".name: another environment of this step is "
                                       "named '" +
                                       name + "'");
      }
      environments.push_back(std::move(env));
    }
  }
  // The step's script: Task.* and Session.* besides the job parameters.
  const std::string sfield = field + ".script";
  TSR_RETURN_IF_ERROR(RefuseScriptExtensions(script, sfield));
  yaml::MapReader s(script, sfield);
  YAML::Node actions = s.Child("actions");
  YAML::Node files_node = s.Child("embeddedFiles");
  if (s.ok() && (!actions.IsDefined() || actions.IsNull())) {
    s.Fail(Status::InvalidArgument(sfield + ".actions: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(s.Finish());
  TSR_ASSIGN_OR_RETURN(std::vector<RawFile> files,
                       ReadEmbeddedFiles(files_node, sfield + ".embeddedFiles"));
  Scope scope = ctx.HostScope();
  scope.task = true;
  for (const TaskParameter& p : space.params) scope.task_params.insert(p.name);
  for (const RawFile& f : files) scope.files.insert(f.name);
  TSR_ASSIGN_OR_RETURN(nlohmann::json files_json, FilesToJson(files, scope));
  yaml::MapReader a(actions, sfield + ".actions");
  YAML::Node on_run = a.Child("onRun");
  if (a.ok() && (!on_run.IsDefined() || on_run.IsNull())) {
    a.Fail(Status::InvalidArgument(sfield + ".actions.onRun: required field is missing"));
  }
  TSR_RETURN_IF_ERROR(a.Finish());
  TSR_ASSIGN_OR_RETURN(nlohmann::json run,
                       ParseAction(on_run, sfield + ".actions.onRun", scope, true, 0));
  step.session = {{"version", kSessionVersion},
                  {"job", ctx.job_name},
                  {"step", step.name},
                  {"parameter_space", SpaceToJson(space)},
                  {"environments", std::move(environments)},
                  {"script", {{"files", std::move(files_json)}, {"on_run", std::move(run)}}}};
  return step;
}

// A cycle among the steps' dependencies, named ("a -> b -> a"), or "".
std::string FindCycle(const std::vector<StepOut>& steps,
                      const std::map<std::string, size_t>& index) {
  std::vector<int> mark(steps.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<size_t> path;
  std::string cycle;
  std::function<bool(size_t)> visit = [&](size_t i) {
    if (mark[i] == 2) return false;
    if (mark[i] == 1) {
      auto from = std::find(path.begin(), path.end(), i);
      for (auto it = from; it != path.end(); ++it) cycle += steps[*it].name + " -> ";
      cycle += steps[i].name;
      return true;
    }
    mark[i] = 1;
    path.push_back(i);
    for (const std::string& dep : steps[i].depends_on) {
      if (visit(index.at(dep))) return true;
    }
    path.pop_back();
    mark[i] = 2;
    return false;
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    if (visit(i)) return cycle;
  }
  return "";
}

}  // namespace

StatusOr<Translation> TranslateSteps(const YAML::Node& steps_node, const TemplateContext& ctx,
                                     const nlohmann::json& job_environments) {
  if (!steps_node.IsDefined() || steps_node.IsNull()) {
    return Status::InvalidArgument("steps: required field is missing");
  }
  TSR_RETURN_IF_ERROR(CheckList(steps_node, "steps", "step"));
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(steps_node, "steps", spec::kMaxSteps));
  std::vector<StepOut> steps;
  std::map<std::string, size_t> index;
  Translation out;
  std::set<std::string> tessera_names;
  for (size_t i = 0; i < steps_node.size(); ++i) {
    const std::string field = Item("steps", i);
    TSR_ASSIGN_OR_RETURN(StepOut step, ReadStep(steps_node[i], field, ctx, job_environments));
    if (!index.emplace(step.name, i).second) {
      return Status::InvalidArgument(field + ".name: another step is named '" + step.name + "'");
    }
    out.task_count += step.tasks;
    if (out.task_count > spec::kMaxTasksPerJob) {
      return Status::ResourceExhausted(field + ": the steps make more than " +
                                       std::to_string(spec::kMaxTasksPerJob) +
                                       " tasks, the most a Tessera job runs");
    }
    // Unique Tessera names: characters Tessera refuses become '-', collisions get -2, -3...
    const std::string base = TesseraName(step.name);
    step.tessera_name = base;
    for (int n = 2; tessera_names.count(step.tessera_name); ++n) {
      const std::string suffix = "-" + std::to_string(n);
      step.tessera_name = base.substr(0, spec::kMaxNameLength - suffix.size()) + suffix;
    }
    tessera_names.insert(step.tessera_name);
    steps.push_back(std::move(step));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    std::set<std::string> seen;
    for (size_t d = 0; d < steps[i].depends_on.size(); ++d) {
      const std::string dfield =
          Item("steps[" + std::to_string(i) + "].dependencies", d) + ".dependsOn";
      const std::string& dep = steps[i].depends_on[d];
      if (!index.count(dep)) {
        return Status::InvalidArgument(dfield + ": no step named '" + dep + "'");
      }
      if (dep == steps[i].name) {
        return Status::InvalidArgument(dfield + ": step '" + dep + "' cannot depend on itself");
      }
      if (!seen.insert(dep).second) {
        return Status::InvalidArgument(dfield + ": '" + dep + "' is listed twice");
      }
    }
  }
  const std::string cycle = FindCycle(steps, index);
  if (!cycle.empty()) {
    return Status::InvalidArgument("steps: the steps' dependencies form a cycle: " + cycle);
  }

  YAML::Emitter yaml;
  yaml << YAML::BeginMap << YAML::Key << "name" << YAML::Value << TesseraName(ctx.job_name);
  yaml << YAML::Key << "steps" << YAML::Value << YAML::BeginSeq;
  for (const StepOut& step : steps) {
    yaml << YAML::BeginMap;
    yaml << YAML::Key << "name" << YAML::Value << step.tessera_name;
    yaml << YAML::Key << "renderer" << YAML::Value << spec::kRendererOpenJd;
    yaml << YAML::Key << "scene" << YAML::Value << step.tessera_name + kSceneSuffix;
    yaml << YAML::Key << "frames" << YAML::Value << "1-" + std::to_string(step.tasks);
    yaml << YAML::Key << "chunk_size" << YAML::Value << 1;
    if (!step.depends_on.empty()) {
      yaml << YAML::Key << "depends_on" << YAML::Value << YAML::BeginSeq;
      for (const std::string& dep : step.depends_on) {
        yaml << YAML::Flow << YAML::BeginMap << YAML::Key << "step" << YAML::Value
             << steps[index.at(dep)].tessera_name << YAML::EndMap;
      }
      yaml << YAML::EndSeq;
    }
    const spec::ResourceSpec& res = step.resources;
    if (res.cpu_cores || res.ram_mb || res.gpus || res.gpu_memory_mb) {
      yaml << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
      if (res.cpu_cores) yaml << YAML::Key << "cpu_cores" << YAML::Value << res.cpu_cores;
      if (res.ram_mb) yaml << YAML::Key << "ram_mb" << YAML::Value << res.ram_mb;
      if (res.gpus) yaml << YAML::Key << "gpus" << YAML::Value << res.gpus;
      if (res.gpu_memory_mb) {
        yaml << YAML::Key << "gpu_memory_mb" << YAML::Value << res.gpu_memory_mb;
      }
      yaml << YAML::EndMap;
    }
    if (!step.tags.empty()) {
      yaml << YAML::Key << "tags" << YAML::Value << YAML::Flow << step.tags;
    }
    yaml << YAML::EndMap;
    out.step_names.emplace_back(step.name, step.tessera_name);
    out.step_scenes[step.tessera_name] =
        step.session.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  yaml << YAML::EndSeq << YAML::EndMap;
  if (!yaml.good())
    return Status::Internal("openjd: emitting the job file: " + yaml.GetLastError());
  out.job_yaml = std::string(yaml.c_str()) + "\n";
  return out;
}

}  // namespace tessera::openjd::internal
