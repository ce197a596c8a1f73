// Reading a job file: the YAML document's fields into a JobSpec, each group of keys by a reader of
// its own, then ValidateJob (job_checks.cpp). ParseJobNode reads a document already parsed (a job
// file read once by shared/jobs/parsed_job_file.h, or one step of a job with steps).

#include "shared/jobs/job_file.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::spec {

namespace {

StatusOr<int> ParseFrameNumber(const std::string& s, const std::string& what) {
  if (s.empty()) return Status::InvalidArgument("frames: " + what + " frame is empty");
  size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return Status::InvalidArgument("frames: '" + s + "' is not a frame number");
  for (size_t k = i; k < s.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(s[k]))) {
      return Status::InvalidArgument("frames: '" + s + "' is not a frame number");
    }
  }
  if (s.size() - i > 9) {
    return Status::InvalidArgument("frames: " + what + " frame " + s + " is out of range [" +
                                   std::to_string(kMinFrame) + ", " + std::to_string(kMaxFrame) +
                                   "]");
  }
  return std::stoi(s);
}

// "4x2": columns x rows, each a small positive number.
Status ParseTiles(const std::string& text, int* x, int* y) {
  const Status bad =
      Status::InvalidArgument("tiles: expected COLUMNSxROWS such as 4x2, got '" + text + "'");
  const size_t sep = text.find_first_of("xX");
  if (sep == std::string::npos || sep == 0 || sep + 1 >= text.size() || sep > 4 ||
      text.size() - sep - 1 > 4) {
    return bad;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (i != sep && !std::isdigit(static_cast<unsigned char>(text[i]))) return bad;
  }
  *x = std::stoi(text.substr(0, sep));
  *y = std::stoi(text.substr(sep + 1));
  return Status::Ok();
}

// `scene:` a path (the CLI reads the file) or an inline scene map (kept as YAML text).
void ReadScene(yaml::MapReader& r, JobSpec* job) {
  YAML::Node scene = r.Child("scene");
  if (!scene.IsDefined() || scene.IsNull()) {
    // Required unless the renderer needs none; ValidateJob says so.
  } else if (scene.IsScalar()) {
    job->scene_path = scene.Scalar();
  } else if (scene.IsMap()) {
    YAML::Emitter out;
    out << scene;
    job->scene_yaml = out.c_str();
  } else {
    r.Fail(Status::InvalidArgument("scene: expected a file path or an inline scene map"));
  }
}

// One `settings:` entry, NAME: VAR pairs (a plugin's env setting), as a JSON object's text;
// checked against the plugin later.
std::string ReadEnvSetting(yaml::MapReader& r, const YAML::Node& node, const std::string& field) {
  r.Fail(yaml::CheckListSize(node, field, plugin::kMaxEnvVars));
  nlohmann::json vars = nlohmann::json::object();
  for (const auto& var : node) {
    if (!r.ok()) break;
    const std::string key = var.first.IsScalar() ? var.first.Scalar() : "?";
    if (!var.first.IsScalar() || !var.second.IsScalar()) {
      r.Fail(Status::InvalidArgument(field + "." + key + ": expected a value, got " +
                                     yaml::KindName(var.second)));
    } else {
      vars[key] = var.second.Scalar();
    }
  }
  return vars.dump();
}

// `settings:` as given: scalar text, a list of words as a JSON array, a map as a JSON object.
void ReadSettings(yaml::MapReader& r, JobSpec* job) {
  YAML::Node settings = r.Child("settings");
  if (!settings.IsDefined() || settings.IsNull()) return;
  if (!settings.IsMap()) {
    r.Fail(Status::InvalidArgument("settings: expected a map of setting names to values, got " +
                                   yaml::KindName(settings)));
    return;
  }
  if (settings.size() > kMaxSettings) {
    r.Fail(yaml::CheckListSize(settings, "settings", kMaxSettings));
    return;
  }
  for (const auto& kv : settings) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const std::string field = "settings." + name;
    if (job->settings.count(name)) {
      r.Fail(Status::InvalidArgument(field + ": field is given more than once"));
    } else if (kv.second.IsScalar()) {
      job->settings[name] = kv.second.Scalar();
    } else if (kv.second.IsSequence()) {
      std::vector<std::string> words;
      r.Fail(yaml::CheckListSize(kv.second, field, plugin::kMaxListWords));
      if (r.ok()) r.Fail(yaml::Convert(kv.second, field, &words));
      job->settings[name] = nlohmann::json(words).dump();
    } else if (kv.second.IsMap()) {
      job->settings[name] = ReadEnvSetting(r, kv.second, field);
    } else {
      r.Fail(Status::InvalidArgument(field + ": expected a value, a list of words or a map, got " +
                                     yaml::KindName(kv.second)));
    }
  }
}

// `frames:` (required), `tiles:` and `sample_parts:`.
void ReadFrames(yaml::MapReader& r, JobSpec* job) {
  YAML::Node frames = r.Child("frames");
  if (!frames.IsDefined() || frames.IsNull()) {
    r.Fail(Status::InvalidArgument("frames: required field is missing"));
  } else if (!frames.IsScalar()) {
    r.Fail(Status::InvalidArgument("frames: expected \"A-B\" or a frame number, got " +
                                   yaml::KindName(frames)));
  } else if (r.ok()) {
    r.Fail(ParseFrameRange(frames.Scalar(), &job->frame_start, &job->frame_end));
  }
  std::string tiles;
  r.Optional("tiles", &tiles).Optional("sample_parts", &job->sample_parts);
  if (r.ok() && !tiles.empty()) r.Fail(ParseTiles(tiles, &job->tiles_x, &job->tiles_y));
}

void ReadDeadline(yaml::MapReader& r, JobSpec* job) {
  std::string deadline;
  r.Optional("deadline", &deadline);
  if (!r.ok() || deadline.empty()) return;
  StatusOr<int64_t> at = ParseIsoTime(deadline);
  if (!at.ok()) {
    r.Fail(Status::InvalidArgument("deadline: " + at.status().message()));
  } else {
    job->deadline_ms = *at;
  }
}

void ReadResources(yaml::MapReader& r, JobSpec* job) {
  YAML::Node resources = r.Child("resources");
  if (!r.ok()) return;
  // `gpu_share: 0` written out is refused (0 is only the default: whole GPUs).
  const YAML::Node& given = resources;
  const bool share_given = given.IsDefined() && given.IsMap() && given["gpu_share"].IsDefined();
  yaml::MapReader res(resources, "resources");
  res.Optional("gpus", &job->resources.gpus)
      .Optional("gpu_memory_mb", &job->resources.gpu_memory_mb)
      .Optional("gpu_share", &job->resources.gpu_share)
      .Optional("compute_capability", &job->resources.compute_capability)
      .Optional("cpu_cores", &job->resources.cpu_cores)
      .Optional("ram_mb", &job->resources.ram_mb);
  r.Fail(res.Finish());
  if (r.ok() && share_given && job->resources.gpu_share == 0) {
    r.Fail(Status::InvalidArgument(kGpuShareRangeMessage));
  }
}

void ReadFailurePolicy(yaml::MapReader& r, JobSpec* job) {
  YAML::Node failure_policy = r.Child("failure_policy");
  if (!r.ok()) return;
  yaml::MapReader fp(failure_policy, "failure_policy");
  FailurePolicy& p = job->failure_policy;
  fp.Optional("scene_error", &p.scene_error)
      .Optional("out_of_memory", &p.out_of_memory)
      .Optional("license_wait_s", &p.license_wait_s);
  if (fp.ok() && p.scene_error != "fail" && p.scene_error != "retry") {
    fp.Fail(Status::InvalidArgument("failure_policy.scene_error: expected fail or retry, got '" +
                                    p.scene_error + "'"));
  }
  if (fp.ok() && p.out_of_memory != "bigger" && p.out_of_memory != "retry") {
    fp.Fail(Status::InvalidArgument(
        "failure_policy.out_of_memory: expected bigger or retry, got '" + p.out_of_memory + "'"));
  }
  if (fp.ok() && (p.license_wait_s < 0 || p.license_wait_s > kMaxLicenseWaitSeconds)) {
    fp.Fail(Status::InvalidArgument("failure_policy.license_wait_s: must be in [0, " +
                                    std::to_string(kMaxLicenseWaitSeconds) + "]"));
  }
  r.Fail(fp.Finish());
}

void ReadOutput(yaml::MapReader& r, JobSpec* job) {
  YAML::Node output = r.Child("output");
  if (!r.ok()) return;
  yaml::MapReader o(output, "output");
  o.Optional("directory", &job->output.directory)
      .Optional("pattern", &job->output.pattern)
      .OptionalList("formats", &job->output.formats, 4)
      .Optional("shared_dir", &job->output.shared_dir)
      .Optional("reuse", &job->output.reuse);
  std::string exr = "half";
  o.Optional("exr", &exr);
  if (o.ok() && exr != "half" && exr != "float") {
    o.Fail(Status::InvalidArgument("output.exr: expected half or float, got '" + exr + "'"));
  }
  job->output.exr_float = exr == "float";
  r.Fail(o.Finish());
}

}  // namespace

Status ParseFrameRange(const std::string& text, int* start, int* end) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  }
  // A '-' after the first character separates start and end ("-5--1" is -5..-1).
  size_t dash = t.find('-', 1);
  if (dash == std::string::npos) {
    TSR_ASSIGN_OR_RETURN(*start, ParseFrameNumber(t, "start"));
    *end = *start;
    return Status::Ok();
  }
  TSR_ASSIGN_OR_RETURN(*start, ParseFrameNumber(t.substr(0, dash), "start"));
  TSR_ASSIGN_OR_RETURN(*end, ParseFrameNumber(t.substr(dash + 1), "end"));
  return Status::Ok();
}

StatusOr<JobSpec> ParseJobYaml(std::string_view yaml_text) {
  yaml::Limits limits;
  limits.max_document_bytes = kMaxJobYamlBytes;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(yaml_text, "job", limits));
  return ParseJobNode(root);
}

StatusOr<JobSpec> ParseJobNode(const YAML::Node& root) {
  if (!root.IsMap()) {
    return Status::InvalidArgument("job: expected a map of fields, got " + yaml::KindName(root));
  }
  JobSpec job;
  yaml::MapReader r(root, "");
  r.Required("name", &job.name)
      .Optional("renderer", &job.renderer)
      .Optional("project", &job.project)
      .Optional("user", &job.user);
  ReadScene(r, &job);
  ReadSettings(r, &job);
  ReadFrames(r, &job);
  r.Optional("chunk_size", &job.chunk_size)
      .Optional("priority", &job.priority)
      .Optional("max_retries", &job.max_retries)
      .Optional("task_timeout", &job.task_timeout)
      .Optional("progress_timeout", &job.progress_timeout)
      .Optional("checkpoint_interval_s", &job.checkpoint_interval_s)
      .Optional("blocklist_after", &job.blocklist_after)
      .OptionalList("depends_on", &job.depends_on, kMaxDependencies)
      .OptionalList("frame_depends_on", &job.frame_depends_on, kMaxDependencies)
      .Optional("fail_after_workers", &job.fail_after_workers)
      .OptionalList("limits", &job.limits, kMaxLabels)
      .OptionalList("pools", &job.pools, kMaxLabels)
      .OptionalList("tags", &job.tags, kMaxLabels)
      .OptionalList("assets", &job.asset_files, kMaxAssets)
      .Optional("interruptible", &job.interruptible);
  ReadDeadline(r, &job);
  ReadResources(r, &job);
  ReadFailurePolicy(r, &job);
  ReadOutput(r, &job);
  TSR_RETURN_IF_ERROR(r.Finish());
  TSR_RETURN_IF_ERROR(ValidateJob(job));
  return job;
}

StatusOr<std::map<std::string, std::string>> ResolvedSettings(const JobSpec& job) {
  std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  if (plugin == nullptr) return std::map<std::string, std::string>();
  return plugin::ResolveSettings(*plugin, job.settings);
}

StatusOr<std::string> SceneFileName(const JobSpec& job) {
  std::shared_ptr<const plugin::PluginSpec> plugin = plugin::FindPlugin(job.renderer);
  if (plugin == nullptr) return std::string();
  return plugin::CheckSceneName(*plugin, job.scene_path);
}

}  // namespace tessera::spec
