#include "shared/jobs/job_steps.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::spec {

namespace {

yaml::Limits JobFileLimits() {
  yaml::Limits limits;
  limits.max_document_bytes = kMaxJobYamlBytes;
  return limits;
}

std::string StepField(size_t i) { return "steps[" + std::to_string(i) + "]"; }

std::string StepNames(const std::vector<StepSpec>& steps) {
  std::string names;
  for (size_t i = 0; i < steps.size() && i < 20; ++i) {
    names += (i ? ", " : "") + steps[i].name;
  }
  return steps.size() > 20 ? names + ", ..." : names;
}

// A step's `depends_on`: a list of {step: NAME, per_frame: BOOL}.
Status ParseStepDependencies(const YAML::Node& node, const std::string& field,
                             std::vector<StepDependency>* out) {
  if (!node.IsDefined() || node.IsNull()) return Status::Ok();
  if (!node.IsSequence()) {
    return Status::InvalidArgument(field +
                                   ": expected a list of {step: NAME} or {step: NAME, "
                                   "per_frame: true}, got " +
                                   yaml::KindName(node));
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, field, kMaxStepDependencies));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string item = field + "[" + std::to_string(i) + "]";
    if (node[i].IsScalar()) {
      return Status::InvalidArgument(
          item +
          ": expected {step: NAME} (a step of this job; other jobs go in the job's own "
          "depends_on), got '" +
          node[i].Scalar() + "'");
    }
    StepDependency dep;
    yaml::MapReader r(node[i], item);
    r.Required("step", &dep.step).Optional("per_frame", &dep.per_frame);
    TSR_RETURN_IF_ERROR(r.Finish());
    out->push_back(std::move(dep));
  }
  return Status::Ok();
}

// A step whose plugin takes another step's frames (plugin.yaml `input_frames`, plugins/encode):
// that step must be another of the job's and write PNG frames; this one becomes one task over
// that step's frames and waits for all of it.
Status LinkInputFrames(std::vector<StepSpec>* steps) {
  for (size_t i = 0; i < steps->size(); ++i) {
    StepSpec& step = (*steps)[i];
    const std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(step.job.renderer);
    if (plugin == nullptr || plugin->input_frames_setting.empty()) continue;
    const std::string field = StepField(i) + " (" + step.name + ")";
    const std::string setting = "settings." + plugin->input_frames_setting;
    const auto given = step.job.settings.find(plugin->input_frames_setting);
    const std::string from = given == step.job.settings.end() ? "" : given->second;
    const auto source = std::find_if(steps->begin(), steps->end(),
                                     [&](const StepSpec& s) { return s.name == from; });
    if (source == steps->end() || &*source == &step) {
      return Status::InvalidArgument(field + ": " + setting + ": '" + from.substr(0, 128) +
                                     "' is not another step of this job (" + StepNames(*steps) +
                                     ")");
    }
    const JobSpec& frames = source->job;
    bool images = frames.produces_frames();
    if (images && frames.uses_plugin()) {
      std::shared_ptr<const plugin::PluginSpec> theirs = plugin::FindPlugin(frames.renderer);
      StatusOr<plugin::Settings> resolved =
          theirs ? plugin::ResolveSettings(*theirs, frames.settings) : plugin::Settings{};
      images =
          resolved.ok() && (!resolved->count("outputs") || resolved->at("outputs") == "images");
    }
    if (!images) {
      return Status::InvalidArgument(field + ": " + setting + ": step '" + from +
                                     "' returns no frames");
    }
    const std::vector<std::string>& formats = frames.output.formats;
    if (std::find(formats.begin(), formats.end(), "png") == formats.end()) {
      return Status::InvalidArgument(
          field + ": " + setting + ": step '" + from +
          "' writes no PNG frames (output.formats of that step: add png)");
    }
    if (frames.frame_count() > plugin::kMaxInputFrames) {
      return Status::InvalidArgument(field + ": " + setting + ": step '" + from + "' has " +
                                     std::to_string(frames.frame_count()) + " frames; at most " +
                                     std::to_string(plugin::kMaxInputFrames) + " are taken");
    }
    bool waits = false;
    for (size_t d = 0; d < step.depends_on.size(); ++d) {
      if (step.depends_on[d].per_frame) {
        return Status::InvalidArgument(field + ".depends_on[" + std::to_string(d) +
                                       "].per_frame: a step taking another step's frames runs "
                                       "once over all of them, after whole steps");
      }
      waits = waits || step.depends_on[d].step == from;
    }
    if (!waits) step.depends_on.push_back({from, /*per_frame=*/false});
    // One task over the frames it takes (numbered like them; the input frames themselves are
    // named by position).
    step.job.frame_start = frames.frame_start;
    step.job.frame_end = frames.frame_end;
    step.job.chunk_size = static_cast<int>(frames.frame_count());
  }
  return Status::Ok();
}

// Step `node` (at `field`) as a job of its own: the job's keys (`defaults`) with the step's on top.
// The step's spec is read from the merged document; its text is kept to be stored with the step.
// `seen`: the names of the steps before it.
StatusOr<StepSpec> ReadStep(const YAML::Node& node, const std::string& field,
                            const YAML::Node& defaults, std::set<std::string>* seen) {
  if (!node.IsMap()) {
    return Status::InvalidArgument(field + ": expected a map with a name, got " +
                                   yaml::KindName(node));
  }
  StepSpec step;
  const YAML::Node name = node["name"];
  if (!name.IsDefined() || !name.IsScalar() || name.Scalar().empty()) {
    return Status::InvalidArgument(field + ".name: required (a name for the step)");
  }
  step.name = name.Scalar();
  if (step.name.size() > kMaxNameLength ||
      !std::all_of(step.name.begin(), step.name.end(), IsNameChar)) {
    return Status::InvalidArgument(field + ".name: '" + step.name.substr(0, kMaxNameLength) +
                                   "' may only contain letters, digits, '.', '_' and '-' (at "
                                   "most " +
                                   std::to_string(kMaxNameLength) + ")");
  }
  if (!seen->insert(step.name).second) {
    return Status::InvalidArgument(field + ".name: another step is named '" + step.name + "'");
  }
  step.own_output = node["output"].IsDefined();
  TSR_RETURN_IF_ERROR(
      ParseStepDependencies(node["depends_on"], field + ".depends_on", &step.depends_on));

  YAML::Node merged(YAML::NodeType::Map);
  for (const auto& kv : defaults) merged[kv.first.Scalar()] = kv.second;
  for (const auto& kv : node) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (key == "name" || key == "depends_on") continue;
    if (key == "steps" || key == "project" || key == "user") {
      return Status::InvalidArgument(field + "." + key + ": is the job's, not a step's");
    }
    merged[key] = kv.second;
  }
  YAML::Emitter out;
  out << merged;
  step.job_yaml = out.c_str();
  const auto in_step = [&](const Status& s) {
    return Status(s.code(), field + " (" + step.name + "): " + s.message());
  };
  // A step is a job file of its own, with a job file's bounds (aliases in the file can make a
  // step's text longer than the file).
  if (step.job_yaml.size() > kMaxJobYamlBytes) {
    return in_step(Status::InvalidArgument("job: " + std::to_string(step.job_yaml.size()) +
                                           " bytes, more than the limit of " +
                                           std::to_string(kMaxJobYamlBytes)));
  }
  StatusOr<JobSpec> job = ParseJobNode(merged);
  if (!job.ok()) return in_step(job.status());
  step.job = std::move(job).value();
  return step;
}

}  // namespace

Status CheckRunsAlone(const JobSpec& job) {
  const std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  if (plugin != nullptr && !plugin->input_frames_setting.empty()) {
    return Status::InvalidArgument("renderer: " + job.renderer +
                                   " takes the frames of another step, so it runs only as a step "
                                   "of a job with steps (settings." +
                                   plugin->input_frames_setting + " names that step)");
  }
  return Status::Ok();
}

int PipelineSpec::step_index(const std::string& name) const {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool HasSteps(std::string_view yaml_text) {
  StatusOr<YAML::Node> root = yaml::Parse(yaml_text, "job", JobFileLimits());
  return root.ok() && root->IsMap() && (*root)["steps"].IsDefined();
}

StatusOr<std::vector<size_t>> StepOrder(const std::vector<StepSpec>& steps) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < steps.size(); ++i) index[steps[i].name] = i;
  std::vector<std::vector<size_t>> needs(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t d = 0; d < steps[i].depends_on.size(); ++d) {
      const std::string& name = steps[i].depends_on[d].step;
      auto it = index.find(name);
      const std::string field = StepField(i) + ".depends_on[" + std::to_string(d) + "].step";
      if (it == index.end()) {
        return Status::InvalidArgument(field + ": no step named '" + name + "' (" +
                                       StepNames(steps) + ")");
      }
      if (it->second == i) {
        return Status::InvalidArgument(field + ": step '" + name + "' cannot depend on itself");
      }
      needs[i].push_back(it->second);
    }
  }
  // Depth-first, in the file's order: a step is placed once everything it needs is.
  enum class Mark { kNone, kVisiting, kDone };
  std::vector<Mark> mark(steps.size(), Mark::kNone);
  std::vector<size_t> order, path;
  std::function<Status(size_t)> visit = [&](size_t i) -> Status {
    if (mark[i] == Mark::kDone) return Status::Ok();
    if (mark[i] == Mark::kVisiting) {
      std::string cycle;
      auto from = std::find(path.begin(), path.end(), i);
      for (auto it = from; it != path.end(); ++it) cycle += steps[*it].name + " -> ";
      return Status::InvalidArgument("steps: the steps' dependencies form a cycle: " + cycle +
                                     steps[i].name);
    }
    mark[i] = Mark::kVisiting;
    path.push_back(i);
    for (size_t need : needs[i]) TSR_RETURN_IF_ERROR(visit(need));
    path.pop_back();
    mark[i] = Mark::kDone;
    order.push_back(i);
    return Status::Ok();
  };
  for (size_t i = 0; i < steps.size(); ++i) TSR_RETURN_IF_ERROR(visit(i));
  return order;
}

StatusOr<PipelineSpec> ParsePipelineYaml(std::string_view yaml_text) {
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(yaml_text, "job", JobFileLimits()));
  return ParsePipelineNode(root);
}

StatusOr<PipelineSpec> ParsePipelineNode(const YAML::Node& root) {
  if (!root.IsMap()) {
    return Status::InvalidArgument("job: expected a map of fields, got " + yaml::KindName(root));
  }
  const YAML::Node steps = root["steps"];
  if (!steps.IsDefined() || !steps.IsSequence() || steps.size() == 0) {
    return Status::InvalidArgument("steps: expected a list of at least one step");
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(steps, "steps", kMaxSteps));

  // The job's own keys: the defaults of every step.
  YAML::Node defaults(YAML::NodeType::Map);
  for (const auto& kv : root) {
    if (kv.first.Scalar() != "steps") defaults[kv.first.Scalar()] = kv.second;
  }
  PipelineSpec pipeline;
  std::set<std::string> seen;
  for (size_t i = 0; i < steps.size(); ++i) {
    TSR_ASSIGN_OR_RETURN(StepSpec step, ReadStep(steps[i], StepField(i), defaults, &seen));
    pipeline.steps.push_back(std::move(step));
  }
  TSR_RETURN_IF_ERROR(LinkInputFrames(&pipeline.steps));
  TSR_ASSIGN_OR_RETURN(std::vector<size_t> order, StepOrder(pipeline.steps));
  std::vector<StepSpec> ordered;
  for (size_t i : order) ordered.push_back(std::move(pipeline.steps[i]));
  pipeline.steps = std::move(ordered);

  const JobSpec& first = pipeline.steps.front().job;
  pipeline.name = first.name;
  pipeline.project = first.project;
  pipeline.user = first.user;
  pipeline.priority = first.priority;
  // The job's folder: its own `output` (a step without one of its own carries it unchanged).
  for (const StepSpec& step : pipeline.steps) {
    if (!step.own_output) {
      pipeline.output = step.job.output;
      break;
    }
  }
  return pipeline;
}

}  // namespace tessera::spec
