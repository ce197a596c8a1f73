// OpenJD job templates -> Tessera job files with steps (shared/openjd.h). This file reads the
// template's top level and the job parameters; openjd_steps.cpp reads environments and steps.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "shared/job_spec.h"
#include "shared/openjd.h"
#include "shared/openjd_internal.h"
#include "shared/utf8.h"
#include "shared/yaml_util.h"

namespace tessera::openjd {

using internal::CharCount;
using internal::HasControlChar;
using internal::IsIdentifier;

namespace internal {

Status NeedsExtension(const std::string& field, const std::string& extension) {
  return Status::InvalidArgument(field + ": needs the OpenJD extension " + extension +
                                 ", which Tessera does not support");
}

Status RefuseExtensionKeys(const YAML::Node& node, const std::string& path,
                           std::initializer_list<std::pair<const char*, const char*>> keys) {
  if (!node.IsMap()) return Status::Ok();
  for (const auto& [key, extension] : keys) {
    if (node[key].IsDefined()) {
      return NeedsExtension(path.empty() ? key : path + "." + key, extension);
    }
  }
  return Status::Ok();
}

Status CheckText(const std::string& text, const std::string& field, size_t min_chars,
                 size_t max_chars, bool multiline) {
  const size_t n = CharCount(text);
  if (n < min_chars) {
    return Status::InvalidArgument(
        field + (min_chars == 1 ? ": must not be empty"
                                : ": at least " + std::to_string(min_chars) + " characters"));
  }
  if (n > max_chars) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(max_chars) +
                                   " characters, got " + std::to_string(n));
  }
  if (HasControlChar(text, multiline)) {
    return Status::InvalidArgument(field + ": holds a control character");
  }
  return Status::Ok();
}

std::string TesseraName(std::string_view text) {
  std::string name;
  for (size_t i = 0; i < text.size() && name.size() < spec::kMaxNameLength; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      while (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) ++i;
      name += '-';
    } else {
      name += spec::IsNameChar(static_cast<char>(c)) ? static_cast<char>(c) : '-';
    }
  }
  return name.empty() ? "openjd" : name;
}

}  // namespace internal

namespace {

using internal::CheckText;
using internal::Item;
using internal::NeedsExtension;

constexpr size_t kMaxJobParameters = 50;
constexpr size_t kMaxParameterValueChars = 1024;
constexpr size_t kMaxJobNameChars = 128;
constexpr size_t kMaxFileFilters = 20;

// A job parameter definition (spec 2).
struct JobParam {
  std::string name;
  std::string type;  // STRING, PATH, INT, FLOAT
  std::optional<std::string> default_value;
  std::vector<std::string> allowed;  // normalized like values
  std::optional<int64_t> min_length, max_length;
  std::optional<double> min_value, max_value;
};

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// Checks `raw` against the definition; *out is the value's text (an INT in base 10).
Status CheckParamValue(const JobParam& p, const std::string& raw, const std::string& field,
                       std::string* out) {
  if (p.type == "STRING" || p.type == "PATH") {
    const int64_t n = static_cast<int64_t>(CharCount(raw));
    if (n > static_cast<int64_t>(kMaxParameterValueChars)) {
      return Status::InvalidArgument(field + ": at most " +
                                     std::to_string(kMaxParameterValueChars) + " characters, got " +
                                     std::to_string(n));
    }
    if (p.min_length && n < *p.min_length) {
      return Status::InvalidArgument(field + ": " + std::to_string(n) +
                                     " characters, fewer than minLength " +
                                     std::to_string(*p.min_length));
    }
    if (p.max_length && n > *p.max_length) {
      return Status::InvalidArgument(field + ": " + std::to_string(n) +
                                     " characters, more than maxLength " +
                                     std::to_string(*p.max_length));
    }
    *out = raw;
  } else if (p.type == "INT") {
    int64_t v = 0;
    if (!internal::ParseInteger(raw, &v)) {
      return Status::InvalidArgument(field + ": " + Quoted(raw) + " is not an integer");
    }
    if (p.min_value && static_cast<double>(v) < *p.min_value) {
      return Status::InvalidArgument(field + ": " + std::to_string(v) + " is below minValue " +
                                     std::to_string(static_cast<int64_t>(*p.min_value)));
    }
    if (p.max_value && static_cast<double>(v) > *p.max_value) {
      return Status::InvalidArgument(field + ": " + std::to_string(v) + " is above maxValue " +
                                     std::to_string(static_cast<int64_t>(*p.max_value)));
    }
    *out = std::to_string(v);
  } else {
    double v = 0;
    if (!internal::ParseFloat(raw, &v)) {
      return Status::InvalidArgument(field + ": " + Quoted(raw) + " is not a number");
    }
    if ((p.min_value && v < *p.min_value) || (p.max_value && v > *p.max_value)) {
      return Status::InvalidArgument(field + ": " + raw + " is outside [minValue, maxValue]");
    }
    *out = raw;
  }
  if (!p.allowed.empty()) {
    bool found = false;
    for (const std::string& a : p.allowed) {
      double x = 0, y = 0;
      found = found || a == *out ||
              (p.type == "FLOAT" && internal::ParseFloat(a, &x) && internal::ParseFloat(*out, &y) &&
               x == y);
    }
    if (!found) {
      std::string list;
      for (const std::string& a : p.allowed) list += (list.empty() ? "" : ", ") + a;
      return Status::InvalidArgument(field + ": " + Quoted(raw) + " is not one of allowedValues (" +
                                     list + ")");
    }
  }
  return Status::Ok();
}

Status ReadBound(const YAML::Node& node, const std::string& field, bool integer,
                 std::optional<double>* out) {
  if (!node.IsDefined() || node.IsNull()) return Status::Ok();
  if (!node.IsScalar()) return Status::InvalidArgument(field + ": expected a number");
  int64_t i = 0;
  double d = 0;
  if (integer ? !internal::ParseInteger(node.Scalar(), &i)
              : !internal::ParseFloat(node.Scalar(), &d)) {
    return Status::InvalidArgument(field + ": expected " + (integer ? "an integer" : "a number") +
                                   ", got " + Quoted(node.Scalar()));
  }
  *out = integer ? static_cast<double>(i) : d;
  return Status::Ok();
}

Status ReadUserInterface(const YAML::Node& node, const std::string& field,
                         const std::string& type) {
  yaml::MapReader r(node, field);
  std::string control, label, group;
  r.Optional("control", &control).Optional("label", &label).Optional("groupLabel", &group);
  std::vector<std::string> controls;
  if (type == "STRING") {
    controls = {"LINE_EDIT", "MULTILINE_EDIT", "DROPDOWN_LIST", "CHECK_BOX", "HIDDEN"};
  } else if (type == "PATH") {
    controls = {"CHOOSE_INPUT_FILE", "CHOOSE_OUTPUT_FILE", "CHOOSE_DIRECTORY", "DROPDOWN_LIST",
                "HIDDEN"};
    YAML::Node filters = r.Child("fileFilters");
    YAML::Node filter_default = r.Child("fileFilterDefault");
    if (filters.IsDefined()) {
      r.Fail(yaml::CheckListSize(filters, field + ".fileFilters", kMaxFileFilters));
    }
    std::vector<std::pair<YAML::Node, std::string>> all;
    if (filters.IsSequence()) {
      for (size_t i = 0; i < filters.size(); ++i) {
        all.emplace_back(filters[i], Item(field + ".fileFilters", i));
      }
    }
    if (filter_default.IsDefined()) all.emplace_back(filter_default, field + ".fileFilterDefault");
    for (const auto& [f, path] : all) {
      yaml::MapReader fr(f, path);
      std::string flabel;
      std::vector<std::string> patterns;
      fr.Required("label", &flabel).Required("patterns", &patterns);
      r.Fail(fr.Finish());
    }
  } else {
    controls = {"SPIN_BOX", "DROPDOWN_LIST", "HIDDEN"};
    double step = 0;
    r.Optional("singleStepDelta", &step);
    if (type == "FLOAT") {
      int decimals = 0;
      r.Optional("decimals", &decimals);
    }
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  if (!control.empty() && std::find(controls.begin(), controls.end(), control) == controls.end()) {
    return Status::InvalidArgument(field + ".control: '" + control + "' is not a control for a " +
                                   type + " parameter");
  }
  if (r.Has("label")) TSR_RETURN_IF_ERROR(CheckText(label, field + ".label", 1, 64, false));
  if (r.Has("groupLabel")) {
    TSR_RETURN_IF_ERROR(CheckText(group, field + ".groupLabel", 1, 64, false));
  }
  return Status::Ok();
}

StatusOr<JobParam> ParseJobParam(const YAML::Node& node, const std::string& field) {
  JobParam p;
  yaml::MapReader r(node, field);
  r.Required("name", &p.name).Required("type", &p.type);
  if (!r.ok()) return r.Finish();
  if (!IsIdentifier(p.name)) {
    return Status::InvalidArgument(field + ".name: '" + p.name +
                                   "' is not an identifier (latin letters, digits and '_', not "
                                   "starting with a digit, at most 64)");
  }
  static const std::set<std::string> kExprTypes = {"BOOL",       "RANGE_EXPR",     "LIST[STRING]",
                                                   "LIST[PATH]", "LIST[INT]",      "LIST[FLOAT]",
                                                   "LIST[BOOL]", "LIST[LIST[INT]]"};
  if (kExprTypes.count(p.type)) return NeedsExtension(field + ".type " + p.type, "EXPR");
  if (p.type != "STRING" && p.type != "PATH" && p.type != "INT" && p.type != "FLOAT") {
    return Status::InvalidArgument(field + ".type: unknown type '" + p.type +
                                   "' (STRING, PATH, INT, FLOAT)");
  }
  std::string description;
  r.Optional("description", &description);
  YAML::Node def = r.Child("default");
  YAML::Node allowed = r.Child("allowedValues");
  YAML::Node ui = r.Child("userInterface");
  const bool text = p.type == "STRING" || p.type == "PATH";
  // Copy-constructed, never assigned: assigning a yaml-cpp node writes through it.
  const YAML::Node min_node = text ? YAML::Node() : r.Child("minValue");
  const YAML::Node max_node = text ? YAML::Node() : r.Child("maxValue");
  int64_t min_length = 0, max_length = 0;
  if (text) {
    r.Optional("minLength", &min_length).Optional("maxLength", &max_length);
    if (r.Has("minLength")) p.min_length = min_length;
    if (r.Has("maxLength")) p.max_length = max_length;
  }
  if (p.type == "PATH") {
    std::string object_type, data_flow;
    r.Optional("objectType", &object_type).Optional("dataFlow", &data_flow);
    if (r.Has("objectType") && object_type != "FILE" && object_type != "DIRECTORY") {
      r.Fail(Status::InvalidArgument(field + ".objectType: expected FILE or DIRECTORY"));
    }
    if (r.Has("dataFlow") && data_flow != "NONE" && data_flow != "IN" && data_flow != "OUT" &&
        data_flow != "INOUT") {
      r.Fail(Status::InvalidArgument(field + ".dataFlow: expected NONE, IN, OUT or INOUT"));
    }
  }
  TSR_RETURN_IF_ERROR(r.Finish());
  if (r.Has("description")) {
    TSR_RETURN_IF_ERROR(CheckText(description, field + ".description", 1, 2048, true));
  }
  if (ui.IsDefined() && !ui.IsNull()) {
    TSR_RETURN_IF_ERROR(ReadUserInterface(ui, field + ".userInterface", p.type));
  }
  if (text) {
    if ((p.min_length && *p.min_length < 0) || (p.max_length && *p.max_length < 1)) {
      return Status::InvalidArgument(field + ": minLength must be >= 0 and maxLength >= 1");
    }
    if (p.min_length && p.max_length && *p.min_length > *p.max_length) {
      return Status::InvalidArgument(field + ": minLength is above maxLength");
    }
  } else {
    TSR_RETURN_IF_ERROR(ReadBound(min_node, field + ".minValue", p.type == "INT", &p.min_value));
    TSR_RETURN_IF_ERROR(ReadBound(max_node, field + ".maxValue", p.type == "INT", &p.max_value));
    if (p.min_value && p.max_value && *p.min_value > *p.max_value) {
      return Status::InvalidArgument(field + ": minValue is above maxValue");
    }
  }
  // allowedValues first (they constrain the default), checked against the other constraints.
  if (allowed.IsDefined() && !allowed.IsNull()) {
    const std::string afield = field + ".allowedValues";
    if (!allowed.IsSequence() || allowed.size() == 0) {
      return Status::InvalidArgument(afield + ": expected a list of at least one value");
    }
    JobParam unconstrained = p;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (!allowed[i].IsScalar())
        return Status::InvalidArgument(Item(afield, i) + ": expected a value");
      std::string v;
      TSR_RETURN_IF_ERROR(CheckParamValue(unconstrained, allowed[i].Scalar(), Item(afield, i), &v));
      p.allowed.push_back(v);
    }
  }
  if (def.IsDefined() && !def.IsNull()) {
    if (!def.IsScalar()) return Status::InvalidArgument(field + ".default: expected a value");
    std::string v;
    TSR_RETURN_IF_ERROR(CheckParamValue(p, def.Scalar(), field + ".default", &v));
    p.default_value = v;
  }
  return p;
}

}  // namespace

bool IsJobTemplate(std::string_view text) {
  try {
    StatusOr<YAML::Node> root = yaml::Parse(text, "template");
    if (!root.ok() || !root->IsMap()) return false;
    YAML::Node version = (*root)["specificationVersion"];
    return version.IsScalar() && version.Scalar().rfind("jobtemplate-", 0) == 0;
  } catch (...) {
    return false;
  }
}

StatusOr<Translation> TranslateTemplate(std::string_view template_text,
                                        const std::map<std::string, std::string>& parameters) {
  if (template_text.size() > spec::kMaxJobYamlBytes) {
    return Status::ResourceExhausted("template: " + std::to_string(template_text.size()) +
                                     " bytes, more than " + std::to_string(spec::kMaxJobYamlBytes));
  }
  yaml::Limits limits;
  limits.max_document_bytes = spec::kMaxJobYamlBytes;
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(template_text, "template", limits));
  try {
    yaml::MapReader r(root, "");
    std::string version;
    r.Required("specificationVersion", &version);
    if (!r.ok()) return r.Finish();
    if (version != kSpecificationVersion) {
      return Status::InvalidArgument("specificationVersion: '" + version +
                                     "' is not supported (Tessera reads " + kSpecificationVersion +
                                     ")");
    }
    YAML::Node extensions = r.Child("extensions");
    if (extensions.IsDefined() && !extensions.IsNull()) {
      if (!extensions.IsSequence() || extensions.size() == 0) {
        return Status::InvalidArgument("extensions: expected a non-empty list of extension names");
      }
      for (size_t i = 0; i < extensions.size(); ++i) {
        const std::string name = extensions[i].IsScalar() ? extensions[i].Scalar() : "?";
        return Status::InvalidArgument(Item("extensions", i) + ": OpenJD extension " + name +
                                       " is not supported");
      }
    }
    std::string schema, name_text, description;
    r.Optional("$schema", &schema)
        .Required("name", &name_text)
        .Optional("description", &description);
    YAML::Node param_defs = r.Child("parameterDefinitions");
    YAML::Node job_envs = r.Child("jobEnvironments");
    YAML::Node steps = r.Child("steps");
    TSR_RETURN_IF_ERROR(r.Finish());
    if (r.Has("description")) {
      TSR_RETURN_IF_ERROR(CheckText(description, "description", 1, 2048, true));
    }

    // Job parameters: definitions, then the values given, then defaults.
    internal::TemplateContext ctx;
    std::vector<JobParam> defs;
    if (param_defs.IsDefined() && !param_defs.IsNull()) {
      if (!param_defs.IsSequence() || param_defs.size() == 0) {
        return Status::InvalidArgument(
            "parameterDefinitions: expected a list of at least one parameter");
      }
      TSR_RETURN_IF_ERROR(
          yaml::CheckListSize(param_defs, "parameterDefinitions", kMaxJobParameters));
      for (size_t i = 0; i < param_defs.size(); ++i) {
        const std::string field = Item("parameterDefinitions", i);
        TSR_ASSIGN_OR_RETURN(JobParam p, ParseJobParam(param_defs[i], field));
        for (const JobParam& other : defs) {
          if (other.name == p.name) {
            return Status::InvalidArgument(field + ".name: another parameter is named '" + p.name +
                                           "'");
          }
        }
        defs.push_back(std::move(p));
      }
    }
    for (const auto& given : parameters) {
      // (clang 14 cannot capture a structured binding in a lambda.)
      const std::string& name = given.first;
      const std::string& value = given.second;
      const bool defined =
          std::any_of(defs.begin(), defs.end(), [&](const JobParam& p) { return p.name == name; });
      if (!defined) {
        std::string names;
        for (const JobParam& p : defs) names += (names.empty() ? "" : ", ") + p.name;
        return Status::InvalidArgument("parameter " + name +
                                       ": the template defines no such "
                                       "parameter (" +
                                       (names.empty() ? "it has none" : names) + ")");
      }
      TSR_RETURN_IF_ERROR(utf8::Check(value, "parameter " + name));
    }
    for (const JobParam& p : defs) {
      auto given = parameters.find(p.name);
      std::string value;
      if (given != parameters.end()) {
        TSR_RETURN_IF_ERROR(CheckParamValue(p, given->second, "parameter " + p.name, &value));
      } else if (p.default_value) {
        value = *p.default_value;
      } else {
        return Status::InvalidArgument("parameter " + p.name + ": no value given (-p " + p.name +
                                       "=VALUE) and the template gives no default");
      }
      ctx.values[p.name] = value;
      if (p.type == "PATH") ctx.path_params.insert(p.name);
    }

    // The job's name: Param.* and RawParam.* only.
    TSR_ASSIGN_OR_RETURN(internal::FormatString name_format,
                         internal::BindFormat(name_text, ctx.TemplateScope(), "name"));
    const std::string job_name = internal::LiteralText(name_format);
    TSR_RETURN_IF_ERROR(CheckText(job_name, "name", 1, kMaxJobNameChars, false));

    nlohmann::json job_environments = nlohmann::json::array();
    std::set<std::string> job_env_names;
    if (job_envs.IsDefined() && !job_envs.IsNull()) {
      if (!job_envs.IsSequence() || job_envs.size() == 0) {
        return Status::InvalidArgument(
            "jobEnvironments: expected a list of at least one environment");
      }
      for (size_t i = 0; i < job_envs.size(); ++i) {
        const std::string field = Item("jobEnvironments", i);
        std::string env_name;
        TSR_ASSIGN_OR_RETURN(nlohmann::json env,
                             internal::ParseEnvironment(job_envs[i], field, ctx, "job", &env_name));
        if (!job_env_names.insert(env_name).second) {
          return Status::InvalidArgument(field + ".name: another job environment is named '" +
                                         env_name + "'");
        }
        job_environments.push_back(std::move(env));
      }
    }
    ctx.job_environment_names = job_env_names;
    ctx.job_name = job_name;
    return internal::TranslateSteps(steps, ctx, job_environments);
  } catch (const std::exception& e) {
    // yaml-cpp throws on malformed nodes deep in a document; a template is user input.
    return Status::InvalidArgument(std::string("template: ") + e.what());
  }
}

}  // namespace tessera::openjd
