// The two root documents of OpenJD 2023-09 (spec 1.1, 1.2): job templates and environment
// templates, checked on their own (CheckTemplate) or made into a job with parameter values and
// the environment templates around it (TranslateTemplate). Parameters are read in
// openjd_params.cpp, environments in openjd_scripts.cpp, steps in openjd_steps.cpp.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "shared/base/yaml_util.h"
#include "shared/jobs/job_file.h"
#include "shared/openjd/openjd.h"
#include "shared/openjd/openjd_internal.h"

namespace tessera::openjd {

using internal::CheckText;
using internal::Item;
using internal::ParameterDefinition;
using internal::TemplateContext;

namespace {

constexpr size_t kMaxJobNameChars = 128;

// A template's text is at most a job file's size.
Status CheckDocumentSize(size_t bytes, const std::string& what) {
  if (bytes <= spec::kMaxJobYamlBytes) return Status::Ok();
  return Status::ResourceExhausted(what + ": " + std::to_string(bytes) + " bytes, more than " +
                                   std::to_string(spec::kMaxJobYamlBytes));
}

StatusOr<YAML::Node> ParseDocument(std::string_view text, const std::string& what) {
  TSR_RETURN_IF_ERROR(CheckDocumentSize(text.size(), what));
  yaml::Limits limits;
  limits.max_document_bytes = spec::kMaxJobYamlBytes;
  return yaml::Parse(text, what, limits);
}

// `specificationVersion` and `extensions` of a root (every extension is refused by name).
Status ReadVersion(yaml::MapReader* r, const char* expected) {
  std::string version;
  r->Required("specificationVersion", &version);
  if (!r->ok()) return r->Finish();
  if (version != expected) {
    return Status::InvalidArgument(r->PathOf("specificationVersion") + ": '" + version +
                                   "' is not supported (Tessera reads " + expected + ")");
  }
  const YAML::Node extensions = r->Child("extensions");
  if (!extensions.IsDefined()) return Status::Ok();
  if (!extensions.IsSequence() || extensions.size() == 0) {
    return Status::InvalidArgument(r->PathOf("extensions") +
                                   ": expected a non-empty list of extension names");
  }
  const std::string name = extensions[0].IsScalar() ? extensions[0].Scalar() : "?";
  return Status::InvalidArgument(Item(r->PathOf("extensions"), 0) + ": OpenJD extension " + name +
                                 " is not supported");
}

// A job template's root, read but not yet bound.
struct JobDocument {
  std::string name_text;
  std::vector<ParameterDefinition> defs;
  YAML::Node job_environments = YAML::Node(YAML::NodeType::Undefined);
  YAML::Node steps = YAML::Node(YAML::NodeType::Undefined);
};

StatusOr<JobDocument> ReadJobDocument(const YAML::Node& root) {
  JobDocument doc;
  yaml::MapReader r(root, "");
  TSR_RETURN_IF_ERROR(ReadVersion(&r, kSpecificationVersion));
  std::string schema, description;
  r.Optional("$schema", &schema).Required("name", &doc.name_text);
  r.Optional("description", &description);
  const YAML::Node param_defs = r.Child("parameterDefinitions");
  doc.job_environments = r.Child("jobEnvironments");
  doc.steps = r.Child("steps");
  TSR_RETURN_IF_ERROR(r.Finish());
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, "description", 1, 2048, true));
  }
  TSR_ASSIGN_OR_RETURN(doc.defs, internal::ReadParameterDefinitions(param_defs));
  return doc;
}

// An environment template's root (spec 1.2).
struct EnvironmentDocument {
  std::string field;  // its place among the job's environment templates
  std::vector<ParameterDefinition> defs;
  YAML::Node environment = YAML::Node(YAML::NodeType::Undefined);
};

StatusOr<EnvironmentDocument> ReadEnvironmentDocument(const YAML::Node& root,
                                                      const std::string& field) {
  EnvironmentDocument doc;
  doc.field = field;
  yaml::MapReader r(root, field);
  TSR_RETURN_IF_ERROR(ReadVersion(&r, kEnvironmentSpecificationVersion));
  const YAML::Node param_defs = r.Child("parameterDefinitions");
  doc.environment = r.Child("environment");
  if (r.ok() && !doc.environment.IsDefined()) {
    r.Fail(Status::InvalidArgument(r.PathOf("environment") + ": required field is missing"));
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  StatusOr<std::vector<ParameterDefinition>> defs = internal::ReadParameterDefinitions(param_defs);
  if (!defs.ok()) {
    const std::string prefix = field.empty() ? "" : field + ".";
    return Status::InvalidArgument(prefix + defs.status().message());
  }
  doc.defs = std::move(defs).value();
  for (ParameterDefinition& p : doc.defs) p.field = (field.empty() ? "" : field + ".") + p.field;
  return doc;
}

std::set<std::string> NamesOf(const std::vector<ParameterDefinition>& defs) {
  std::set<std::string> names;
  for (const ParameterDefinition& p : defs) names.insert(p.name);
  return names;
}

std::set<std::string> PathNamesOf(const std::vector<ParameterDefinition>& defs) {
  std::set<std::string> names;
  for (const ParameterDefinition& p : defs) {
    if (p.type == "PATH") names.insert(p.name);
  }
  return names;
}

// A document's own scope: the parameters it defines (a format string may name no other).
TemplateContext ContextOf(const std::vector<ParameterDefinition>& defs) {
  TemplateContext ctx;
  ctx.names = NamesOf(defs);
  ctx.path_params = PathNamesOf(defs);
  ctx.checking = true;
  return ctx;
}

// The job's name, resolved (or, while checking, its literal parts): 1..128 characters, no Cc.
StatusOr<std::string> JobName(const std::string& text, const TemplateContext& ctx) {
  TSR_ASSIGN_OR_RETURN(internal::FormatString format,
                       internal::BindFormat(text, ctx.TemplateScope(), "name"));
  const std::string name = internal::LiteralText(format);
  if (internal::IsResolved(format)) {
    TSR_RETURN_IF_ERROR(CheckText(name, "name", 1, kMaxJobNameChars, false));
  } else if (internal::HasControlChar(name)) {
    return Status::InvalidArgument("name: holds a control character");
  }
  return name;
}

// The job's environments (jobEnvironments) as session JSON; their names into ctx.
StatusOr<nlohmann::json> JobEnvironments(const YAML::Node& node, TemplateContext* ctx) {
  nlohmann::json environments = nlohmann::json::array();
  if (!node.IsDefined()) return environments;
  TSR_RETURN_IF_ERROR(internal::CheckList(node, "jobEnvironments", "environment"));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string field = Item("jobEnvironments", i);
    std::string name;
    TSR_ASSIGN_OR_RETURN(nlohmann::json env,
                         internal::ParseEnvironment(node[i], field, *ctx, "job", &name));
    if (!ctx->job_environment_names.insert(name).second) {
      return Status::InvalidArgument(field + ".name: another job environment is named '" + name +
                                     "'");
    }
    environments.push_back(std::move(env));
  }
  return environments;
}

Status CheckJobTemplate(const YAML::Node& root) {
  TSR_ASSIGN_OR_RETURN(JobDocument doc, ReadJobDocument(root));
  TemplateContext ctx = ContextOf(doc.defs);
  TSR_ASSIGN_OR_RETURN(ctx.job_name, JobName(doc.name_text, ctx));
  TSR_ASSIGN_OR_RETURN(nlohmann::json environments, JobEnvironments(doc.job_environments, &ctx));
  return internal::TranslateSteps(doc.steps, ctx, {{"environments", environments}}, {}).status();
}

Status CheckEnvironmentTemplate(const YAML::Node& root) {
  TSR_ASSIGN_OR_RETURN(EnvironmentDocument doc, ReadEnvironmentDocument(root, ""));
  const TemplateContext ctx = ContextOf(doc.defs);
  std::string name;
  return internal::ParseEnvironment(doc.environment, "environment", ctx, "external", &name)
      .status();
}

// Runs `fn` turning a yaml-cpp exception (a malformed node deep in a document) into an error.
template <typename Fn>
auto Guard(const char* what, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string(what) + ": " + e.what());
  }
}

// A job or environment template's root, checked without parameter values.
Status CheckRoot(const YAML::Node& root) {
  return Guard("template", [&]() -> Status {
    const YAML::Node& map = root;
    const bool environment = root.IsMap() && map["specificationVersion"].IsDefined() &&
                             map["specificationVersion"].IsScalar() &&
                             map["specificationVersion"].Scalar().rfind("environment-", 0) == 0;
    return environment ? CheckEnvironmentTemplate(root) : CheckJobTemplate(root);
  });
}

// A job template's root made into a job, inside the environment templates `inputs` brings.
StatusOr<Translation> TranslateRoot(const YAML::Node& root, const JobInputs& inputs) {
  // Environment templates first: they are the outermost environments, and their parameter
  // definitions merge before the job template's.
  std::vector<EnvironmentDocument> env_docs;
  std::vector<YAML::Node> env_roots;
  for (size_t i = 0; i < inputs.environments.size(); ++i) {
    const std::string field = Item("environments", i);
    TSR_ASSIGN_OR_RETURN(YAML::Node env_root, ParseDocument(inputs.environments[i], field));
    env_roots.push_back(env_root);
  }
  return Guard("template", [&]() -> StatusOr<Translation> {
    TSR_ASSIGN_OR_RETURN(JobDocument doc, ReadJobDocument(root));
    std::vector<std::vector<ParameterDefinition>> documents;
    for (size_t i = 0; i < env_roots.size(); ++i) {
      TSR_ASSIGN_OR_RETURN(EnvironmentDocument env,
                           ReadEnvironmentDocument(env_roots[i], Item("environments", i)));
      documents.push_back(env.defs);
      env_docs.push_back(std::move(env));
    }
    documents.push_back(doc.defs);
    TSR_ASSIGN_OR_RETURN(std::vector<ParameterDefinition> merged,
                         internal::MergeDefinitions(documents));
    std::map<std::string, std::string> values;
    std::map<std::string, internal::PathValue> paths;
    TSR_RETURN_IF_ERROR(internal::ResolveParameterValues(merged, inputs, &values, &paths));

    // Each document binds its own parameters' names to the merged values.
    auto bound = [&](const std::vector<ParameterDefinition>& defs) {
      TemplateContext ctx = ContextOf(defs);
      ctx.checking = false;
      ctx.values = values;
      ctx.environment_timeout_s = inputs.settings.environment_timeout_s;
      return ctx;
    };
    TemplateContext ctx = bound(doc.defs);
    TSR_ASSIGN_OR_RETURN(ctx.job_name, JobName(doc.name_text, ctx));
    Translation out;
    nlohmann::json environments = nlohmann::json::array();
    for (const EnvironmentDocument& env : env_docs) {
      std::string name;
      // Checked in its own scope first: it may name only its own parameters.
      TSR_RETURN_IF_ERROR(internal::ParseEnvironment(env.environment, env.field + ".environment",
                                                     ContextOf(env.defs), "external", &name)
                              .status());
      TemplateContext env_ctx = bound(env.defs);
      env_ctx.job_name = ctx.job_name;
      TSR_ASSIGN_OR_RETURN(nlohmann::json json,
                           internal::ParseEnvironment(env.environment, env.field + ".environment",
                                                      env_ctx, "external", &name));
      environments.push_back(std::move(json));
      out.environments.push_back(name);
    }
    TSR_ASSIGN_OR_RETURN(nlohmann::json job_envs, JobEnvironments(doc.job_environments, &ctx));
    for (nlohmann::json& env : job_envs) {
      out.environments.push_back(env["name"].get<std::string>());
      environments.push_back(std::move(env));
    }
    // What the worker needs besides the steps: PATH values to map, and the job's rules.
    nlohmann::json path_values = nlohmann::json::object();
    for (const auto& [name, path] : paths) {
      path_values[name] = path.value;
      out.path_parameters[name] = {path.value, path.object_type, path.data_flow};
    }
    std::vector<PathMappingRule> rules = inputs.path_mapping;
    nlohmann::json outputs;
    TSR_RETURN_IF_ERROR(internal::AttachFolders(inputs, &rules, &outputs));
    const nlohmann::json session_base = {{"version", kSessionVersion},
                                         {"job", ctx.job_name},
                                         {"environments", std::move(environments)},
                                         {"path_parameters", std::move(path_values)},
                                         {"path_mapping", internal::RulesToSession(rules)},
                                         {"outputs", std::move(outputs)}};
    TSR_ASSIGN_OR_RETURN(Translation steps,
                         internal::TranslateSteps(doc.steps, ctx, session_base, inputs.settings));
    steps.job_name = ctx.job_name;
    steps.parameters = std::move(values);
    steps.path_parameters = std::move(out.path_parameters);
    steps.environments = std::move(out.environments);
    return steps;
  });
}

}  // namespace

DocumentKind KindOf(std::string_view text) {
  try {
    StatusOr<YAML::Node> root = yaml::Parse(text, "template");
    if (!root.ok() || !root->IsMap()) return DocumentKind::kNone;
    const YAML::Node& map = *root;
    const YAML::Node version = map["specificationVersion"];
    if (!version.IsDefined() || !version.IsScalar()) return DocumentKind::kNone;
    if (version.Scalar().rfind("jobtemplate-", 0) == 0) return DocumentKind::kJobTemplate;
    if (version.Scalar().rfind("environment-", 0) == 0) return DocumentKind::kEnvironmentTemplate;
    return DocumentKind::kNone;
  } catch (...) {
    return DocumentKind::kNone;
  }
}

Status CheckTemplate(std::string_view text) {
  TSR_ASSIGN_OR_RETURN(YAML::Node root, ParseDocument(text, "template"));
  return CheckRoot(root);
}

Status CheckTemplate(const spec::OpenJdTemplate& document) {
  TSR_RETURN_IF_ERROR(CheckDocumentSize(document.text_bytes, "template"));
  return CheckRoot(document.root);
}

StatusOr<Translation> TranslateTemplate(std::string_view template_text, const JobInputs& inputs) {
  TSR_ASSIGN_OR_RETURN(YAML::Node root, ParseDocument(template_text, "template"));
  return TranslateRoot(root, inputs);
}

StatusOr<Translation> TranslateTemplate(const spec::OpenJdTemplate& document,
                                        const JobInputs& inputs) {
  TSR_RETURN_IF_ERROR(CheckDocumentSize(document.text_bytes, "template"));
  return TranslateRoot(document.root, inputs);
}

}  // namespace tessera::openjd
