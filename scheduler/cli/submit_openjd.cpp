// `tessera submit` of Open Job Description job templates and job bundles.
//
// A template is checked here as the scheduler will make it (the same translation, inside the
// farm's environment templates, which GET /api/v1/openjd/environments lists), then sent as it is
// with its parameter values, the submitter's environment templates (--env), path mapping rules
// and folders: relative PATH defaults are joined with the template's folder, relative PATH values
// with the current folder.
//
// A job bundle (a folder, as AWS Deadline Cloud writes them) holds template.yaml (or .json) and
// optionally parameter_values.yaml|json ({parameterValues: [{name, value}]}; deadline:priority
// and deadline:maxRetriesPerTask become the job's priority and retries) and
// asset_references.yaml|json ({assets: {inputFilenames, inputDirectories, outputDirectories,
// referencedPaths}}). Its files travel with the job, so it runs without shared storage: every
// input (a PATH parameter with dataFlow IN or INOUT that exists here, and the referenced inputs)
// is uploaded content-addressed as the job's assets, each folder mapped into the session, and
// what tasks write into the output folders (PATH parameters with dataFlow OUT or INOUT, and the
// referenced output directories) comes back with the job. Links, special files and names Tessera
// cannot carry are refused, naming the file.

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "scheduler/cli/format.h"
#include "scheduler/cli/submit.h"
#include "shared/base/sha256.h"
#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"

namespace tessera::cli {

namespace fs = std::filesystem;

namespace {

// A job bundle's folder, read.
struct Bundle {
  fs::path dir;
  fs::path template_path;
  std::map<std::string, std::string> parameters;  // parameter_values
  std::vector<std::string> input_files, input_dirs, output_dirs;
};

// The one of `names` present in `dir` ("" when none); two present is an error.
StatusOr<std::string> OneOf(const fs::path& dir, std::initializer_list<const char*> names,
                            bool required) {
  std::string found;
  for (const char* name : names) {
    std::error_code ec;
    if (!fs::exists(dir / name, ec)) continue;
    if (!found.empty()) {
      return Status::InvalidArgument(dir.string() + ": holds both " + found + " and " + name);
    }
    found = name;
  }
  if (found.empty() && required) {
    return Status::InvalidArgument(dir.string() +
                                   ": not a job bundle (no template.yaml or template.json)");
  }
  return found;
}

StatusOr<YAML::Node> ReadYamlFile(const fs::path& path) {
  TSR_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return yaml::Parse(text, path.string());
}

// A parameter value as text (YAML gives numbers as their text already).
StatusOr<std::string> ValueText(const YAML::Node& node, const std::string& field) {
  if (!node.IsDefined() || !node.IsScalar()) {
    return Status::InvalidArgument(field + ": expected a value");
  }
  return node.Scalar();
}

// parameterValues entries, or a plain map of name: value, into `out`; Deadline's own submission
// settings (deadline:*) into `submit` where Tessera has them.
Status ReadParameterValues(const YAML::Node& root, const std::string& where,
                           std::map<std::string, std::string>* out, SubmitOptions* submit) {
  if (!root.IsMap()) return Status::InvalidArgument(where + ": expected a map");
  const YAML::Node& map = root;
  std::vector<std::pair<std::string, std::string>> values;
  if (map["parameterValues"].IsDefined()) {
    const YAML::Node list = map["parameterValues"];
    if (!list.IsSequence()) {
      return Status::InvalidArgument(where + ": parameterValues: expected a list of {name, value}");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string field = where + ": parameterValues[" + std::to_string(i) + "]";
      yaml::MapReader r(list[i], field);
      std::string name;
      r.Required("name", &name);
      const YAML::Node value = r.Child("value");
      TSR_RETURN_IF_ERROR(r.Finish());
      TSR_ASSIGN_OR_RETURN(std::string text, ValueText(value, field + ".value"));
      values.emplace_back(name, text);
    }
  } else {
    for (const auto& kv : root) {
      const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      TSR_ASSIGN_OR_RETURN(std::string text, ValueText(kv.second, where + ": " + name));
      values.emplace_back(name, text);
    }
  }
  for (const auto& [name, text] : values) {
    if (name.rfind("deadline:", 0) != 0) {
      (*out)[name] = text;
      continue;
    }
    // Deadline Cloud's submission settings: kept where Tessera has the same setting.
    int number = 0;
    const bool is_number = yaml::Convert(YAML::Node(text), name, &number).ok();
    if ((name == "deadline:priority" || name == "deadline:maxRetriesPerTask") && is_number &&
        number >= 0 && number <= 100) {
      (name == "deadline:priority" ? submit->priority : submit->max_retries) = number;
    } else {
      std::cerr << "tessera submit: " << where << ": " << name << " is a setting of AWS "
                << "Deadline Cloud that Tessera has no equivalent for; ignored\n";
    }
  }
  return Status::Ok();
}

Status ReadAssetReferences(const YAML::Node& root, const std::string& where, Bundle* bundle) {
  yaml::MapReader top(root, where);
  yaml::MapReader assets(top.Child("assets"), where + ": assets");
  std::vector<std::string> referenced;
  assets.OptionalList("inputFilenames", &bundle->input_files, spec::kMaxAssets)
      .OptionalList("inputDirectories", &bundle->input_dirs, spec::kMaxAssets)
      .OptionalList("outputDirectories", &bundle->output_dirs, spec::kMaxAssets)
      .OptionalList("referencedPaths", &referenced, spec::kMaxAssets);
  TSR_RETURN_IF_ERROR(assets.Finish());
  TSR_RETURN_IF_ERROR(top.Finish());
  // Relative references are the bundle's; referenced paths are only names, nothing travels.
  for (auto* list : {&bundle->input_files, &bundle->input_dirs, &bundle->output_dirs}) {
    for (std::string& path : *list) path = (bundle->dir / path).lexically_normal().string();
  }
  return Status::Ok();
}

StatusOr<Bundle> ReadBundle(const fs::path& dir, SubmitOptions* submit) {
  Bundle bundle;
  bundle.dir = fs::absolute(dir).lexically_normal();
  TSR_ASSIGN_OR_RETURN(std::string tpl,
                       OneOf(bundle.dir, {"template.yaml", "template.json"}, true));
  bundle.template_path = bundle.dir / tpl;
  TSR_ASSIGN_OR_RETURN(
      std::string values,
      OneOf(bundle.dir, {"parameter_values.yaml", "parameter_values.json"}, false));
  if (!values.empty()) {
    TSR_ASSIGN_OR_RETURN(YAML::Node root, ReadYamlFile(bundle.dir / values));
    TSR_RETURN_IF_ERROR(
        ReadParameterValues(root, (bundle.dir / values).string(), &bundle.parameters, submit));
  }
  TSR_ASSIGN_OR_RETURN(
      std::string refs,
      OneOf(bundle.dir, {"asset_references.yaml", "asset_references.json"}, false));
  if (!refs.empty()) {
    TSR_ASSIGN_OR_RETURN(YAML::Node root, ReadYamlFile(bundle.dir / refs));
    TSR_RETURN_IF_ERROR(ReadAssetReferences(root, (bundle.dir / refs).string(), &bundle));
  }
  return bundle;
}

// -p words: Name=Value, or file://PATH (a YAML/JSON map, or a parameter_values document).
Status ReadParameterWords(const std::vector<std::string>& words,
                          std::map<std::string, std::string>* out, SubmitOptions* submit) {
  std::set<std::string> given;
  for (const std::string& word : words) {
    if (word.rfind("file://", 0) == 0) {
      const std::string path = word.substr(7);
      TSR_ASSIGN_OR_RETURN(YAML::Node root, ReadYamlFile(path));
      TSR_RETURN_IF_ERROR(ReadParameterValues(root, path, out, submit));
      continue;
    }
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("-p " + word + ": expected Name=Value or file://PATH");
    }
    const std::string name = word.substr(0, eq);
    if (!given.insert(name).second) {
      return Status::InvalidArgument("-p " + word + ": parameter " + name + " is given twice");
    }
    (*out)[name] = word.substr(eq + 1);
  }
  return Status::Ok();
}

// The files a bundle attaches: each input under its root, named kAttachedFolder/<root>/<path>.
struct Attachments {
  std::vector<std::string> roots;         // folders of this machine
  std::map<std::string, fs::path> files;  // asset name -> file here
  std::vector<std::string> output_dirs;
};

Status AddFile(const fs::path& file, const std::string& root, size_t index, Attachments* out) {
  const std::string relative = fs::path(file).lexically_relative(root).generic_string();
  const std::string name =
      std::string(openjd::kAttachedFolder) + "/" + std::to_string(index) + "/" + relative;
  TSR_RETURN_IF_ERROR(spec::ValidateAssetPath(name, file.string()));
  if (out->files.size() >= static_cast<size_t>(spec::kMaxAssets)) {
    return Status::InvalidArgument(file.string() + ": a job carries at most " +
                                   std::to_string(spec::kMaxAssets) + " files");
  }
  out->files[name] = file;
  return Status::Ok();
}

// Plain files and folders only: a link (which could lead anywhere on this machine) or a device
// is refused, naming it.
Status AddInput(const fs::path& path, Attachments* out) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (fs::is_symlink(st)) {
    return Status::InvalidArgument(path.string() +
                                   ": a link; a job's attached files are plain "
                                   "files and folders");
  }
  // Its root: the innermost root holding it, else its folder (a file) or itself (a folder).
  const std::string text = path.string();
  size_t index = out->roots.size();
  for (size_t r = 0; r < out->roots.size(); ++r) {
    const std::string& root = out->roots[r];
    if (text == root || text.rfind(root + "/", 0) == 0) index = r;
  }
  if (index == out->roots.size()) {
    out->roots.push_back(fs::is_directory(st) ? text : path.parent_path().string());
  }
  const std::string& root = out->roots[index];
  if (fs::is_regular_file(st)) return AddFile(path, root, index, out);
  if (!fs::is_directory(st)) {
    return Status::InvalidArgument(path.string() + ": not a plain file or folder");
  }
  for (fs::recursive_directory_iterator it(path, ec), end; it != end; it.increment(ec)) {
    if (ec) return Status::InvalidArgument(path.string() + ": cannot read: " + ec.message());
    const fs::file_status entry = it->symlink_status(ec);
    if (fs::is_directory(entry)) continue;
    if (fs::is_symlink(entry)) {
      return Status::InvalidArgument(it->path().string() +
                                     ": a link; a job's attached files are plain files and "
                                     "folders");
    }
    if (!fs::is_regular_file(entry)) {
      return Status::InvalidArgument(it->path().string() + ": not a plain file");
    }
    TSR_RETURN_IF_ERROR(AddFile(it->path(), root, index, out));
  }
  return Status::Ok();
}

// What a bundle attaches: its template's folder holds the bundle's own inputs; inputs elsewhere
// get roots of their own. Outputs are folders of this machine (a FILE output's folder).
StatusOr<Attachments> CollectAttachments(const Bundle& bundle,
                                         const openjd::Translation& translation) {
  Attachments out;
  out.roots.push_back(bundle.dir.string());
  std::vector<fs::path> inputs;
  for (const auto& [name, path] : translation.path_parameters) {
    std::error_code ec;
    const bool in = path.data_flow == "IN" || path.data_flow == "INOUT";
    const bool outp = path.data_flow == "OUT" || path.data_flow == "INOUT";
    // An input that is not here is taken to be the farm's own (shared storage, a mapped path).
    if (in && fs::exists(fs::symlink_status(path.value, ec))) inputs.emplace_back(path.value);
    if (outp) {
      out.output_dirs.push_back(
          path.object_type == "FILE" ? fs::path(path.value).parent_path().string() : path.value);
    }
  }
  for (const std::string& f : bundle.input_files) inputs.emplace_back(f);
  for (const std::string& d : bundle.input_dirs) inputs.emplace_back(d);
  for (const std::string& d : bundle.output_dirs) out.output_dirs.push_back(d);
  std::sort(inputs.begin(), inputs.end());
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  for (const fs::path& input : inputs) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(input, ec))) {
      return Status::InvalidArgument(input.string() + ": no such file (an input of the bundle)");
    }
    TSR_RETURN_IF_ERROR(AddInput(input, &out));
  }
  std::sort(out.output_dirs.begin(), out.output_dirs.end());
  out.output_dirs.erase(std::unique(out.output_dirs.begin(), out.output_dirs.end()),
                        out.output_dirs.end());
  return out;
}

// The farm's environment templates for a job in `pools`, and its path mapping rules (an older
// scheduler without the endpoint has none).
Status FarmParts(ApiClient& client, const std::vector<std::string>& pools,
                 std::vector<std::string>* environments,
                 std::vector<openjd::PathMappingRule>* rules) {
  StatusOr<json> farm = client.Get("/api/v1/openjd/environments");
  if (!farm.ok())
    return farm.status().code() == StatusCode::kNotFound ? Status::Ok() : farm.status();
  for (const json& env : farm->value("environments", json::array())) {
    const json env_pools = env.value("pools", json::array());
    bool applies = env_pools.empty();
    for (const json& p : env_pools) {
      applies = applies || std::count(pools.begin(), pools.end(), p.get<std::string>()) > 0;
    }
    if (applies) environments->push_back(env.value("template", ""));
  }
  if (farm->contains("path_mapping")) {
    TSR_ASSIGN_OR_RETURN(*rules, openjd::PathMappingRulesFromJson((*farm)["path_mapping"],
                                                                  "the farm's path_mapping"));
  }
  return Status::Ok();
}

}  // namespace

int SubmitTemplate(const ClientOptions& options, const std::string& path,
                   const SubmitOptions& given, const JobFileText* file) {
  SubmitOptions submit = given;
  std::error_code ec;
  std::optional<Bundle> bundle;
  fs::path template_path = path;
  std::map<std::string, std::string> parameters;
  if (fs::is_directory(path, ec)) {
    StatusOr<Bundle> read = ReadBundle(path, &submit);
    if (!read.ok()) return LocalError(read.status().message());
    bundle = std::move(read).value();
    template_path = bundle->template_path;
    parameters = bundle->parameters;
    // The command line wins over the bundle's settings.
    if (given.priority) submit.priority = given.priority;
    if (given.max_retries) submit.max_retries = given.max_retries;
  }
  // The template's one parse (RunSubmit's, for a template file it was given).
  std::optional<JobFileText> read_here;
  if (file == nullptr) {
    StatusOr<std::string> text = ReadTextFile(template_path);
    if (!text.ok()) return LocalError(template_path.string(), text.status().message());
    read_here = JobFileText{*text, spec::ReadJobFile(*text)};
    file = &*read_here;
  }
  if (file->document.kind != spec::JobFileKind::kOpenJdJobTemplate) {
    return LocalError(template_path.string(),
                      "not an Open Job Description job template (specificationVersion: "
                      "jobtemplate-2023-09)");
  }
  if (Status s = ReadParameterWords(given.parameters, &parameters, &submit); !s.ok()) {
    return LocalError(s.message());
  }
  openjd::JobInputs inputs;
  inputs.parameters = parameters;
  std::vector<std::string> own_environments;
  for (const std::string& env_file : submit.environments) {
    StatusOr<std::string> env = ReadTextFile(env_file);
    if (!env.ok()) return LocalError(env_file, env.status().message());
    const spec::JobFileDocument document = spec::ReadJobFile(*env);
    if (document.kind != spec::JobFileKind::kOpenJdEnvironment) {
      return LocalError(env_file,
                        "--env: not an OpenJD environment template (specificationVersion: "
                        "environment-2023-09)");
    }
    if (Status s = openjd::CheckTemplate(spec::OpenJdTemplate{document.root, env->size()});
        !s.ok()) {
      return LocalError(env_file, s.message());
    }
    own_environments.push_back(std::move(env).value());
  }
  std::vector<openjd::PathMappingRule> own_rules;
  if (!submit.path_mapping_rules.empty()) {
    StatusOr<std::string> rules_text = ReadTextFile(submit.path_mapping_rules);
    if (!rules_text.ok()) {
      return LocalError(submit.path_mapping_rules, rules_text.status().message());
    }
    StatusOr<std::vector<openjd::PathMappingRule>> rules =
        openjd::ParsePathMappingRules(*rules_text, submit.path_mapping_rules);
    if (!rules.ok()) return LocalError(rules.status().message());
    own_rules = std::move(rules).value();
  }
  inputs.template_dir = fs::absolute(template_path).parent_path().lexically_normal().string();
  inputs.working_dir = fs::current_path(ec).string();
  inputs.settings.priority = submit.priority;
  inputs.settings.max_retries = submit.max_retries;
  inputs.settings.project = submit.project;
  inputs.settings.pools = submit.pools;

  // Checked here as the farm will make it: inside its environment templates, with its rules.
  ApiClient client(options.connection);
  std::vector<openjd::PathMappingRule> farm_rules;
  if (Status s = FarmParts(client, submit.pools, &inputs.environments, &farm_rules); !s.ok()) {
    return ReportError(client.server_url(), s);
  }
  inputs.environments.insert(inputs.environments.end(), own_environments.begin(),
                             own_environments.end());
  inputs.path_mapping = own_rules;
  inputs.path_mapping.insert(inputs.path_mapping.end(), farm_rules.begin(), farm_rules.end());
  StatusOr<openjd::Translation> translation = openjd::TranslateTemplate(
      spec::OpenJdTemplate{file->document.root, file->text.size()}, inputs);
  if (!translation.ok()) return LocalError(template_path.string(), translation.status().message());

  json body = {{"job_yaml", file->text},
               {"parameters", parameters},
               {"template_dir", inputs.template_dir},
               {"working_dir", inputs.working_dir}};
  if (!own_environments.empty()) body["environments"] = own_environments;
  if (!own_rules.empty()) body["path_mapping_rules"] = openjd::PathMappingRulesToJson(own_rules);
  json job_options = json::object();
  if (submit.priority) job_options["priority"] = *submit.priority;
  if (submit.max_retries) job_options["max_retries"] = *submit.max_retries;
  if (!submit.project.empty()) job_options["project"] = submit.project;
  if (!submit.pools.empty()) job_options["pools"] = submit.pools;
  if (!job_options.empty()) body["job_options"] = job_options;
  if (bundle) {
    StatusOr<Attachments> attached = CollectAttachments(*bundle, *translation);
    if (!attached.ok()) return LocalError(attached.status().message());
    json assets = json::object();
    for (const auto& [name, attached_file] : attached->files) {
      StatusOr<std::string> hash =
          submit.dry_run ? Sha256File(attached_file.string()) : UploadAsset(client, attached_file);
      if (!hash.ok()) {
        if (hash.status().code() == StatusCode::kUnavailable) {
          return ReportError(client.server_url(), hash.status());
        }
        return LocalError(attached_file.string(), "upload failed: " + hash.status().message());
      }
      assets[name] = *hash;
    }
    if (!assets.empty()) body["assets"] = std::move(assets);
    body["attachments"] = {{"input_roots", attached->roots},
                           {"output_dirs", attached->output_dirs}};
  }
  if (std::string user = DefaultUser(options, client); !user.empty()) body["user"] = user;
  if (submit.dry_run) return PrintDryRun(client, body, options.json);
  return PostJob(options, client, body);
}

}  // namespace tessera::cli
