// The steps and environments of an OpenJD job template (shared/openjd/openjd.h): scripts, embedded
// files, parameter spaces and host requirements, into each step's session JSON and the Tessera
// job file.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <set>

#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd::internal {

namespace {

constexpr size_t kMaxNameChars = 64;  // step and environment names
constexpr size_t kMaxCombinationChars = 1280;

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
      // An <IntRangeExpr>, possibly from a job parameter ("{{Param.Frames}}"): while checking a
      // template, its values (and so the step's task count) wait for the job.
      TSR_ASSIGN_OR_RETURN(FormatString text, BindFormat(range.Scalar(), scope, rfield));
      if (IsResolved(text)) {
        TSR_ASSIGN_OR_RETURN(param.runs,
                             ParseIntRangeExpr(LiteralText(text), kMaxTaskParameterValues, rfield));
      } else {
        param.known = false;
      }
    } else if (range.IsSequence()) {
      TSR_RETURN_IF_ERROR(CheckList(range, rfield, "value"));
      TSR_RETURN_IF_ERROR(yaml::CheckListSize(range, rfield, kMaxTaskParameterValues));
      for (size_t k = 0; k < range.size(); ++k) {
        const std::string vfield = Item(rfield, k);
        TSR_ASSIGN_OR_RETURN(std::string raw, Scalar(range[k], vfield));
        TSR_ASSIGN_OR_RETURN(FormatString text, BindFormat(raw, scope, vfield));
        const std::string value = LiteralText(text);
        if (!IsResolved(text)) {
          // One value either way: the count is known, the value is checked with the job.
          param.runs.push_back({0, 1, 1});
          param.values.push_back(value);
          continue;
        }
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
  HostNeeds needs;
  int64_t tasks = 1;  // -1 while checking, when a range waits for a job parameter
  nlohmann::json session;
};

StatusOr<StepOut> ReadStep(const YAML::Node& node, const std::string& field,
                           const TemplateContext& ctx, const nlohmann::json& session_base) {
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
    TSR_RETURN_IF_ERROR(ReadHostRequirements(host, field + ".hostRequirements", ctx, &step.needs));
  }
  nlohmann::json environments = session_base["environments"];
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
  if (ctx.checking) return step;
  step.session = session_base;
  step.session["step"] = step.name;
  step.session["parameter_space"] = SpaceToJson(space);
  step.session["environments"] = std::move(environments);
  step.session["script"] = {{"files", std::move(files_json)}, {"on_run", std::move(run)}};
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

YAML::Node FlowList(const std::vector<std::string>& words) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const std::string& word : words) list.push_back(word);
  list.SetStyle(YAML::EmitterStyle::Flow);
  return list;
}

// One step of the Tessera job a template becomes: the OpenJD step's tasks as frames 1..N of the
// openjd renderer, its session as the scene.
YAML::Node TesseraStep(const StepOut& step, const std::vector<StepOut>& steps,
                       const std::map<std::string, size_t>& index,
                       const nlohmann::json& session_base) {
  YAML::Node out(YAML::NodeType::Map);
  out["name"] = step.tessera_name;
  out["renderer"] = spec::kRendererOpenJd;
  out["scene"] = step.tessera_name + kSceneSuffix;
  out["frames"] = "1-" + std::to_string(step.tasks);
  out["chunk_size"] = 1;
  if (!step.depends_on.empty()) {
    YAML::Node deps(YAML::NodeType::Sequence);
    for (const std::string& dep : step.depends_on) {
      YAML::Node one(YAML::NodeType::Map);
      one["step"] = steps[index.at(dep)].tessera_name;
      one.SetStyle(YAML::EmitterStyle::Flow);
      deps.push_back(one);
    }
    out["depends_on"] = deps;
  }
  const spec::ResourceSpec& res = step.needs.resources;
  if (res.cpu_cores || res.ram_mb || res.gpus || res.gpu_memory_mb) {
    YAML::Node resources(YAML::NodeType::Map);
    if (res.cpu_cores) resources["cpu_cores"] = res.cpu_cores;
    if (res.ram_mb) resources["ram_mb"] = res.ram_mb;
    if (res.gpus) resources["gpus"] = res.gpus;
    if (res.gpu_memory_mb) resources["gpu_memory_mb"] = res.gpu_memory_mb;
    out["resources"] = resources;
  }
  if (!step.needs.tags.empty()) out["tags"] = FlowList(step.needs.tags);
  if (!step.needs.limits.empty()) out["limits"] = FlowList(step.needs.limits);
  // A bundle's output folders: what its tasks write there comes back as files.
  if (session_base.contains("outputs") && !session_base["outputs"].empty()) {
    YAML::Node settings(YAML::NodeType::Map);
    settings["outputs"] = "files";
    settings.SetStyle(YAML::EmitterStyle::Flow);
    out["settings"] = settings;
  }
  return out;
}

}  // namespace

StatusOr<Translation> TranslateSteps(const YAML::Node& steps_node, const TemplateContext& ctx,
                                     const nlohmann::json& session_base,
                                     const JobSettings& settings) {
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
    TSR_ASSIGN_OR_RETURN(StepOut step, ReadStep(steps_node[i], field, ctx, session_base));
    if (!index.emplace(step.name, i).second) {
      return Status::InvalidArgument(field + ".name: another step is named '" + step.name + "'");
    }
    if (step.tasks > 0) out.task_count += step.tasks;
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

  if (ctx.checking) return out;

  // The Tessera job file with steps, as a document (what the scheduler checks) and as text (what
  // it stores): the text is written from the document, never parsed back.
  YAML::Node job(YAML::NodeType::Map);
  job["name"] = TesseraName(ctx.job_name);
  // Tessera's own settings, given with the submission: defaults of every step.
  if (settings.priority) job["priority"] = *settings.priority;
  if (settings.max_retries) job["max_retries"] = *settings.max_retries;
  if (!settings.project.empty()) job["project"] = settings.project;
  if (!settings.pools.empty()) job["pools"] = FlowList(settings.pools);
  YAML::Node list(YAML::NodeType::Sequence);
  for (const StepOut& step : steps) {
    list.push_back(TesseraStep(step, steps, index, session_base));
    out.step_names.emplace_back(step.name, step.tessera_name);
    out.step_scenes[step.tessera_name] =
        step.session.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  job["steps"] = list;
  YAML::Emitter yaml;
  yaml << job;
  if (!yaml.good()) {
    return Status::Internal("openjd: emitting the job file: " + yaml.GetLastError());
  }
  out.job = job;
  out.job_yaml = std::string(yaml.c_str()) + "\n";
  return out;
}

}  // namespace tessera::openjd::internal
