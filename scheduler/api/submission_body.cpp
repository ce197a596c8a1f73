#include "scheduler/api/submission_body.h"

#include <algorithm>
#include <set>

#include "shared/base/utf8.h"

namespace tessera::api {
namespace {

using json = nlohmann::json;

// Parameters a template may be given (the OpenJD specification's limit of job parameters), and
// environment templates a submission may bring.
constexpr size_t kMaxTemplateParameters = openjd::kMaxJobParameters;
constexpr size_t kMaxSubmittedEnvironments = 20;

// A folder of the submitting machine (template_dir, working_dir): absolute, no control
// characters. It is only ever joined with text, never opened here.
StatusOr<std::string> SubmitterFolder(const json& value, const std::string& field) {
  if (!value.is_string()) return Status::InvalidArgument(field + ": expected a string");
  const std::string dir = value.get<std::string>();
  TSR_RETURN_IF_ERROR(utf8::Check(dir, field));
  if (dir.empty() || dir[0] != '/' || dir.size() > 4096 ||
      std::any_of(dir.begin(), dir.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    return Status::InvalidArgument(field + ": expected an absolute folder (at most 4096 bytes)");
  }
  return dir;
}

// job_options: Tessera's own settings of a job made from a template.
StatusOr<openjd::JobSettings> ParseJobOptions(const json& value) {
  openjd::JobSettings settings;
  if (!value.is_object()) return Status::InvalidArgument("body.job_options: expected an object");
  for (const auto& [key, v] : value.items()) {
    const std::string field = "body.job_options." + key;
    if (key == "priority" || key == "max_retries") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100) {
        return Status::InvalidArgument(field + ": expected an integer in 0..100");
      }
      (key == "priority" ? settings.priority : settings.max_retries) = v.get<int>();
    } else if (key == "project") {
      if (!v.is_string()) return Status::InvalidArgument(field + ": expected a string");
      settings.project = v.get<std::string>();
    } else if (key == "pools") {
      if (!v.is_array() || v.size() > spec::kMaxLabels) {
        return Status::InvalidArgument(field + ": expected a list of at most " +
                                       std::to_string(spec::kMaxLabels) + " pool names");
      }
      for (const json& pool : v) {
        if (!pool.is_string()) return Status::InvalidArgument(field + ": expected pool names");
        settings.pools.push_back(pool.get<std::string>());
      }
    } else {
      return Status::InvalidArgument(field +
                                     ": unknown field (priority, max_retries, project, "
                                     "pools)");
    }
  }
  return settings;
}

// The OpenJD fields of a body (parameters, environments, template_dir, working_dir,
// path_mapping_rules, job_options) into `inputs`.
Status ParseOpenJdField(const std::string& key, const json& value, openjd::JobInputs* inputs) {
  const std::string field = "body." + key;
  if (key == "parameters") {
    if (!value.is_object() || value.size() > kMaxTemplateParameters) {
      return Status::InvalidArgument(field + ": expected an object of at most " +
                                     std::to_string(kMaxTemplateParameters) +
                                     " parameter names to values");
    }
    for (const auto& [name, text] : value.items()) {
      if (!text.is_string()) {
        return Status::InvalidArgument(field + "." + name.substr(0, 128) + ": expected a string");
      }
      inputs->parameters[name] = text.get<std::string>();
    }
  } else if (key == "environments") {
    if (!value.is_array() || value.size() > kMaxSubmittedEnvironments) {
      return Status::InvalidArgument(field + ": expected a list of at most " +
                                     std::to_string(kMaxSubmittedEnvironments) +
                                     " environment templates (texts)");
    }
    for (const json& text : value) {
      if (!text.is_string()) {
        return Status::InvalidArgument(field + ": expected environment templates as texts");
      }
      inputs->environments.push_back(text.get<std::string>());
    }
  } else if (key == "template_dir" || key == "working_dir") {
    TSR_ASSIGN_OR_RETURN(std::string dir, SubmitterFolder(value, field));
    (key == "template_dir" ? inputs->template_dir : inputs->working_dir) = std::move(dir);
  } else if (key == "path_mapping_rules") {
    TSR_ASSIGN_OR_RETURN(inputs->path_mapping, openjd::PathMappingRulesFromJson(value, field));
  } else if (key == "attachments") {
    // A job bundle's folders: {"input_roots": [...], "output_dirs": [...]}.
    if (!value.is_object()) return Status::InvalidArgument(field + ": expected an object");
    for (const auto& [name, list] : value.items()) {
      if (name != "input_roots" && name != "output_dirs") {
        return Status::InvalidArgument(field + "." + name +
                                       ": unknown field (input_roots, output_dirs)");
      }
      if (!list.is_array() || list.size() > openjd::kMaxPathMappingRules) {
        return Status::InvalidArgument(field + "." + name + ": expected a list of at most " +
                                       std::to_string(openjd::kMaxPathMappingRules) + " folders");
      }
      for (size_t i = 0; i < list.size(); ++i) {
        TSR_ASSIGN_OR_RETURN(
            std::string dir,
            SubmitterFolder(list[i], field + "." + name + "[" + std::to_string(i) + "]"));
        (name == "input_roots" ? inputs->input_roots : inputs->output_dirs).push_back(dir);
      }
    }
  } else {
    TSR_ASSIGN_OR_RETURN(inputs->settings, ParseJobOptions(value));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SubmissionBody> ParseSubmissionBody(const std::string& body, const OpenJdFarm* farm) {
  json req = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    return Status::InvalidArgument(
        "body: expected a JSON object {\"job_yaml\": ..., "
        "\"scene_yaml\": ..., \"user\": ...} (valid JSON, text in UTF-8)");
  }
  static const std::set<std::string> kOpenJdKeys = {
      "parameters",         "environments", "template_dir", "working_dir",
      "path_mapping_rules", "job_options",  "attachments"};
  SubmissionBody out;
  for (const auto& [key, value] : req.items()) {
    if (kOpenJdKeys.count(key)) {
      TSR_RETURN_IF_ERROR(ParseOpenJdField(key, value, &out.openjd));
      out.has_openjd_inputs = true;
      continue;
    }
    if (key != "job_yaml" && key != "scene_yaml" && key != "user" && key != "assets" &&
        key != "step_scenes") {
      return Status::InvalidArgument("body." + key +
                                     ": unknown field (job_yaml, scene_yaml, user, assets, "
                                     "step_scenes; for OpenJD templates parameters, "
                                     "environments, template_dir, working_dir, "
                                     "path_mapping_rules, job_options, attachments)");
    }
    if (key == "step_scenes") {
      if (!value.is_object() || value.size() > spec::kMaxSteps) {
        return Status::InvalidArgument("body.step_scenes: expected an object of at most " +
                                       std::to_string(spec::kMaxSteps) +
                                       " step names to scene texts");
      }
      for (const auto& [step, text] : value.items()) {
        if (!text.is_string()) {
          return Status::InvalidArgument("body.step_scenes." + step.substr(0, 128) +
                                         ": expected a string");
        }
      }
      out.step_scenes = value;
    } else if (key != "assets" && !value.is_string()) {
      return Status::InvalidArgument("body." + key + ": expected a string");
    }
  }
  if (!req.contains("job_yaml")) return Status::InvalidArgument("body.job_yaml: required");
  out.job_yaml = req["job_yaml"].get<std::string>();
  if (req.contains("scene_yaml")) out.scene_yaml = req["scene_yaml"].get<std::string>();
  if (req.contains("user")) out.user = req["user"].get<std::string>();
  if (req.contains("assets")) out.assets = req["assets"];
  out.document = spec::ReadJobFile(out.job_yaml);
  // An Open Job Description template is translated here, by the same code as the CLI's, into a
  // job with steps whose scenes are the steps' sessions (shared/openjd/openjd.h), inside the farm's
  // environment templates and with its path mapping rules after the job's own.
  if (out.document.kind == spec::JobFileKind::kOpenJdJobTemplate) {
    if (out.scene_yaml || !out.step_scenes.is_null()) {
      return Status::InvalidArgument(
          "body.scene_yaml, body.step_scenes: an OpenJD template carries its own scripts");
    }
    openjd::JobInputs inputs = out.openjd;
    if (farm != nullptr) {
      std::vector<std::string> environments = farm->EnvironmentsFor(inputs.settings.pools);
      environments.insert(environments.end(), inputs.environments.begin(),
                          inputs.environments.end());
      inputs.environments = std::move(environments);
      inputs.path_mapping.insert(inputs.path_mapping.end(), farm->path_mapping.begin(),
                                 farm->path_mapping.end());
      inputs.settings.environment_timeout_s = farm->environment_timeout_s;
    }
    TSR_ASSIGN_OR_RETURN(openjd::Translation translation,
                         openjd::TranslateTemplate(
                             spec::OpenJdTemplate{out.document.root, out.job_yaml.size()}, inputs));
    out.job_yaml = std::move(translation.job_yaml);
    out.document = spec::JobFileOf(translation.job, out.job_yaml.size());
    out.step_scenes = translation.step_scenes;
  } else if (out.has_openjd_inputs) {
    return Status::InvalidArgument(
        "body: parameters, environments, template_dir, working_dir, path_mapping_rules, "
        "job_options and attachments are for Open Job Description templates only");
  }
  return out;
}

}  // namespace tessera::api
