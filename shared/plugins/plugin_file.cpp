#include "shared/plugins/plugin_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>
#include <set>

#include "shared/plugins/plugin_template.h"
#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"

namespace tessera::plugin {
using templates::AppendWord;
using templates::BuiltinNames;
using templates::Expand;
using templates::FormatDouble;
using templates::HasControl;
using templates::IsNumber;
using templates::Lookup;
using templates::Vars;

namespace {

StatusOr<SettingType> ParseType(const std::string& s, const std::string& field) {
  static const std::pair<const char*, SettingType> kTypes[] = {
      {"bool", SettingType::kBool},   {"int", SettingType::kInt},
      {"float", SettingType::kFloat}, {"string", SettingType::kString},
      {"enum", SettingType::kEnum},   {"path", SettingType::kPath},
      {"list", SettingType::kList},   {"env", SettingType::kEnv},
      {"globs", SettingType::kGlobs}};
  for (const auto& [name, type] : kTypes) {
    if (s == name) return type;
  }
  return Status::InvalidArgument(field + ": '" + s +
                                 "' is not a setting type (bool, int, float, string, enum, "
                                 "path, list, env, globs)");
}

// What every value and every word of a list must be: UTF-8, no control characters (NUL among
// them), at most kMaxValueBytes bytes.
Status CheckText(const std::string& value, const std::string& field) {
  TSR_RETURN_IF_ERROR(utf8::Check(value, field));
  if (HasControl(value)) return Status::InvalidArgument(field + ": control characters");
  if (value.size() > kMaxValueBytes) {
    return Status::InvalidArgument(field + ": " + std::to_string(value.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(kMaxValueBytes));
  }
  return Status::Ok();
}

// Validates one value of a setting; returns its canonical text.
StatusOr<std::string> CheckValue(const SettingSpec& s, const std::string& value,
                                 const std::string& field) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(field + ": expected " + what + ", got '" + value + "'");
  };
  // A list's or an env's text is JSON: its parts are checked one by one below.
  if (s.type != SettingType::kList && s.type != SettingType::kEnv &&
      s.type != SettingType::kGlobs) {
    TSR_RETURN_IF_ERROR(CheckText(value, field));
  }
  switch (s.type) {
    case SettingType::kBool:
      if (value == "true" || value == "false") return value;
      return bad("true or false");
    case SettingType::kInt:
    case SettingType::kFloat: {
      if (!IsNumber(value)) return bad(s.type == SettingType::kInt ? "an integer" : "a number");
      double v = std::strtod(value.c_str(), nullptr);
      if (!std::isfinite(v)) return bad("a finite number");
      if (s.type == SettingType::kInt) {
        if (value.find_first_of(".eE") != std::string::npos || std::fabs(v) > 2e9) {
          return bad("an integer");
        }
      }
      if ((s.min && v < *s.min) || (s.max && v > *s.max)) {
        return Status::InvalidArgument(field + ": " + value + " is not in [" +
                                       (s.min ? FormatDouble(*s.min) : "-inf") + ", " +
                                       (s.max ? FormatDouble(*s.max) : "inf") + "]");
      }
      return s.type == SettingType::kInt ? std::to_string(static_cast<int64_t>(v)) : value;
    }
    case SettingType::kEnum:
      if (std::find(s.values.begin(), s.values.end(), value) != s.values.end()) return value;
      return bad("one of " + nlohmann::json(s.values).dump());
    case SettingType::kString:
      if (!value.empty() && value[0] == '-') {
        return Status::InvalidArgument(field + ": '" + value +
                                       "' starts with '-' (values may not look like options)");
      }
      return value;
    case SettingType::kPath: {
      if (value.empty()) return bad("a relative path");
      if (value[0] == '-') {
        return Status::InvalidArgument(field + ": '" + value + "' starts with '-'");
      }
      if (value[0] == '/' || value[0] == '~' || value[0] == '\\') {
        return Status::InvalidArgument(field + ": '" + value +
                                       "' must be relative to the task directory");
      }
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t next = value.find('/', pos);
        if (next == std::string::npos) next = value.size();
        if (value.compare(pos, next - pos, "..") == 0 && next - pos == 2) {
          return Status::InvalidArgument(field + ": '" + value +
                                         "' leaves the task directory ('..' is not allowed)");
        }
        pos = next + 1;
      }
      return value;
    }
    case SettingType::kList: {
      TSR_ASSIGN_OR_RETURN(std::vector<std::string> words, ListValue(value));
      if (words.size() > kMaxListWords) {
        return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxListWords) +
                                       " words, got " + std::to_string(words.size()));
      }
      // Each word becomes an argv word as it is: the same checks as a string value.
      for (size_t i = 0; i < words.size(); ++i) {
        TSR_RETURN_IF_ERROR(CheckText(words[i], field + "[" + std::to_string(i) + "]"));
      }
      return nlohmann::json(words).dump();
    }
    case SettingType::kEnv: {
      auto vars = EnvValue(value);
      if (!vars.ok()) return Status::InvalidArgument(field + ": expected a map of NAME: value");
      if (vars->size() > kMaxEnvVars) {
        return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxEnvVars) +
                                       " variables, got " + std::to_string(vars->size()));
      }
      size_t bytes = 0;
      for (const auto& [name, text] : *vars) {
        const std::string why = WhyNotAnEnvName(name);
        if (!why.empty()) return Status::InvalidArgument(field + "." + name + ": " + why);
        TSR_RETURN_IF_ERROR(CheckText(text, field + "." + name));
        bytes += name.size() + text.size();
      }
      if (bytes > kMaxEnvBytes) {
        return Status::InvalidArgument(field + ": " + std::to_string(bytes) +
                                       " bytes of names and values, more than the limit of " +
                                       std::to_string(kMaxEnvBytes));
      }
      return nlohmann::json(*vars).dump();
    }
    case SettingType::kGlobs: {
      auto patterns = ListValue(value);
      if (!patterns.ok()) return bad("a list of file patterns");
      if (patterns->size() > kMaxGlobs) {
        return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxGlobs) +
                                       " patterns, got " + std::to_string(patterns->size()));
      }
      for (size_t i = 0; i < patterns->size(); ++i) {
        const std::string& pattern = (*patterns)[i];
        const std::string f = field + "[" + std::to_string(i) + "]";
        TSR_RETURN_IF_ERROR(CheckText(pattern, f));
        if (pattern.empty() || pattern[0] == '/' || pattern[0] == '~' ||
            pattern.find('\\') != std::string::npos) {
          return Status::InvalidArgument(f + ": '" + pattern +
                                         "' must be a pattern relative to the task folder");
        }
        for (size_t pos = 0; pos <= pattern.size();) {
          size_t next = pattern.find('/', pos);
          if (next == std::string::npos) next = pattern.size();
          const std::string_view part(pattern.data() + pos, next - pos);
          if (part.empty() || part == "." || part == "..") {
            return Status::InvalidArgument(f + ": '" + pattern +
                                           "' has an empty, '.' or '..' part (the files a "
                                           "task returns stay inside its folder)");
          }
          pos = next + 1;
        }
      }
      return nlohmann::json(*patterns).dump();
    }
  }
  return bad("a value");
}

Status ReadArgs(const YAML::Node& node, const std::string& field, std::vector<ArgItem>* out) {
  if (!node.IsSequence()) {
    return Status::InvalidArgument(field + ": expected a list, got " + yaml::KindName(node));
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, field, kMaxArgs));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    ArgItem item;
    if (node[i].IsScalar()) {
      item.word = node[i].Scalar();
    } else if (node[i].IsMap()) {
      yaml::MapReader r(node[i], f);
      std::string insert;
      r.Optional("when", &item.when)
          .OptionalList("args", &item.words, kMaxArgs)
          .Optional("insert", &insert);
      TSR_RETURN_IF_ERROR(r.Finish());
      if (!insert.empty()) {
        if (insert != "settings" || !item.when.empty() || !item.words.empty()) {
          return Status::InvalidArgument(f + ": expected {insert: settings} alone");
        }
        item.insert_settings = true;
      } else if (item.when != "tile" && item.when != "whole" && item.when != "gpu" &&
                 item.when != "cpu" &&
                 !(item.when.rfind("scene=.", 0) == 0 && item.when.size() > 7)) {
        return Status::InvalidArgument(
            f + ".when: expected tile, whole, gpu, cpu or scene=.EXT, got '" + item.when + "'");
      }
    } else {
      return Status::InvalidArgument(f + ": expected a word or a {when, args} group");
    }
    out->push_back(std::move(item));
  }
  return Status::Ok();
}

Status CheckRegex(const std::string& re, const std::string& field, unsigned* groups) {
  // std::regex compiles recursively: a long pattern from a plugin declaration could exhaust the
  // stack of the scheduler that registers it.
  if (re.size() > kMaxRegexBytes) {
    return Status::InvalidArgument(field + ": a pattern of " + std::to_string(re.size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(kMaxRegexBytes));
  }
  try {
    std::regex compiled(re);
    *groups = static_cast<unsigned>(compiled.mark_count());
  } catch (const std::regex_error& e) {
    return Status::InvalidArgument(field + ": not a valid regular expression: " + e.what());
  }
  return Status::Ok();
}

// `failure_classes:` (FailureRule).
StatusOr<std::vector<FailureRule>> ReadFailureRules(const YAML::Node& node) {
  std::vector<FailureRule> rules;
  if (!node.IsDefined() || node.IsNull()) return rules;
  if (!node.IsSequence()) {
    return Status::InvalidArgument(
        "failure_classes: expected a list of {class, exit_codes, patterns}");
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(node, "failure_classes", kMaxFailureRules));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string field = "failure_classes[" + std::to_string(i) + "]";
    FailureRule rule;
    yaml::MapReader m(node[i], field);
    m.Required("class", &rule.failure_class)
        .OptionalList("exit_codes", &rule.exit_codes, 64)
        .OptionalList("patterns", &rule.patterns, kMaxPatterns);
    TSR_RETURN_IF_ERROR(m.Finish());
    bool known = false;
    for (const char* c :
         {protocol::kFailureSceneError, protocol::kFailureOutOfMemory, protocol::kFailureLicense,
          protocol::kFailureCrash, protocol::kFailureTimeout}) {
      known |= rule.failure_class == c;
    }
    if (!known) {
      return Status::InvalidArgument(field + ".class: '" + rule.failure_class +
                                     "' is not a failure class (scene_error, out_of_memory, "
                                     "license, crash, timeout)");
    }
    if (rule.exit_codes.empty() && rule.patterns.empty()) {
      return Status::InvalidArgument(field + ": give exit_codes, patterns or both");
    }
    unsigned groups = 0;
    for (size_t k = 0; k < rule.patterns.size(); ++k) {
      TSR_RETURN_IF_ERROR(
          CheckRegex(rule.patterns[k], field + ".patterns[" + std::to_string(k) + "]", &groups));
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

const char* SettingTypeName(SettingType type) {
  switch (type) {
    case SettingType::kBool:
      return "bool";
    case SettingType::kInt:
      return "int";
    case SettingType::kFloat:
      return "float";
    case SettingType::kString:
      return "string";
    case SettingType::kEnum:
      return "enum";
    case SettingType::kPath:
      return "path";
    case SettingType::kList:
      return "list";
    case SettingType::kEnv:
      return "env";
    case SettingType::kGlobs:
      return "globs";
  }
  return "?";
}

const SettingSpec* PluginSpec::FindSetting(std::string_view key) const {
  for (const SettingSpec& s : settings) {
    if (s.name == key) return &s;
  }
  return nullptr;
}

StatusOr<std::vector<std::string>> ListValue(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_array()) return Status::InvalidArgument("expected a list of words");
  std::vector<std::string> out;
  for (const auto& w : j) {
    if (!w.is_string()) return Status::InvalidArgument("expected a list of words");
    out.push_back(w.get<std::string>());
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> EnvValue(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (!j.is_object()) return Status::InvalidArgument("expected a map of NAME: value");
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : j.items()) {
    if (!value.is_string()) return Status::InvalidArgument("expected a map of NAME: value");
    out[name] = value.get<std::string>();
  }
  return out;
}

std::string WhyNotAnEnvName(const std::string& name) {
  const bool well_formed =
      !name.empty() && name.size() <= 128 && !std::isdigit(static_cast<unsigned char>(name[0])) &&
      std::all_of(name.begin(), name.end(),
                  [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (!well_formed) return "not a variable name (letters, digits and _, not starting with a digit)";
  if (name.rfind("LD_", 0) == 0) return "the dynamic loader's variables may not be set";
  if (name.rfind("TESSERA_", 0) == 0) return "Tessera's own variables may not be set";
  for (const char* own : {"HOME", "USER", "LOGNAME", "PATH", "CUDA_VISIBLE_DEVICES"}) {
    if (name == own) return "set by the worker for every task";
  }
  return "";
}

StatusOr<PluginSpec> NativePluginSpec(const std::string& name, const std::string& description,
                                      bool tiles, bool sample_parts,
                                      std::string_view declaration_yaml) {
  YAML::Node root;
  if (!declaration_yaml.empty()) {
    TSR_ASSIGN_OR_RETURN(root, yaml::Parse(declaration_yaml, "plugin " + name + " declaration"));
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    if (!root.IsMap()) {
      return Status::InvalidArgument("plugin " + name + " declaration: expected a map");
    }
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key != "scene" && key != "settings") {
        return Status::InvalidArgument("plugin " + name + " declaration: " + key +
                                       ": only scene and settings may be declared");
      }
    }
  }
  root["name"] = name;
  root["description"] = description;
  root["native"] = true;
  root["tiles"] = tiles;
  YAML::Emitter out;
  out << root;
  TSR_ASSIGN_OR_RETURN(PluginSpec spec, ParsePluginYaml(out.c_str(), "plugin " + name));
  // TSR_CAP_SAMPLE_PARTS: sample ranges, returned as exact accumulations.
  spec.sample_parts = sample_parts;
  spec.exact_parts = sample_parts;
  spec.declaration = std::string(declaration_yaml);
  return spec;
}

StatusOr<PluginSpec> ParsePluginYaml(std::string_view yaml_text, const std::string& what) {
  TSR_ASSIGN_OR_RETURN(YAML::Node root, yaml::Parse(yaml_text, what));
  PluginSpec p;
  yaml::MapReader r(root, "");
  r.Required("name", &p.name).Optional("description", &p.description).Optional("native", &p.native);
  {
    yaml::MapReader e(r.Child("executable"), "executable");
    e.OptionalList("names", &p.executable_names, 16)
        .Optional("from_setting", &p.executable_setting);
    r.Fail(e.Finish());
  }
  {
    yaml::MapReader v(r.Child("version"), "version");
    v.OptionalList("args", &p.version_args, 16).Optional("regex", &p.version_regex);
    r.Fail(v.Finish());
  }
  {
    yaml::MapReader s(r.Child("scene"), "scene");
    s.OptionalList("extensions", &p.scene_extensions, 16)
        .OptionalList("binary", &p.binary_scene_extensions, 16)
        .Optional("required", &p.scene_required);
    r.Fail(s.Finish());
  }
  std::string runs = "frame";
  r.Optional("runs", &runs);
  YAML::Node args = r.Child("args");
  if (p.native) {
    // A C++ plugin (plugins/api/renderer_api.h) declares only what a job may give it.
    for (const char* key : {"executable", "version", "runs", "args", "output", "progress", "errors",
                            "success_exit_codes", "failure_classes"}) {
      if (static_cast<const YAML::Node&>(root)[key].IsDefined()) {
        return Status::InvalidArgument(std::string(key) +
                                       ": a native plugin renders in-process; it has no " + key);
      }
    }
  }
  if (!p.native) {
    yaml::MapReader o(r.Child("output"), "output");
    std::string color = "srgb";
    o.Optional("file", &p.output).Optional("color", &color);
    if (o.ok() && color != "srgb" && color != "linear") {
      o.Fail(Status::InvalidArgument("output.color: expected srgb or linear, got '" + color + "'"));
    }
    p.output_srgb = color == "srgb";
    r.Fail(o.Finish());
  }
  r.Optional("tiles", &p.tiles);
  {
    // Optional as a whole; when given, from_setting is required.
    const YAML::Node input_frames = r.Child("input_frames");
    if (input_frames.IsDefined()) {
      yaml::MapReader in(input_frames, "input_frames");
      in.Required("from_setting", &p.input_frames_setting);
      r.Fail(in.Finish());
    }
  }
  {
    yaml::MapReader g(r.Child("progress"), "progress");
    g.Optional("regex", &p.progress_regex)
        .Optional("percent_group", &p.progress_percent_group)
        .Optional("done_group", &p.progress_done_group)
        .Optional("total_group", &p.progress_total_group)
        .Optional("frame_group", &p.progress_frame_group);
    r.Fail(g.Finish());
  }
  r.OptionalList("errors", &p.error_regexes, kMaxPatterns)
      .OptionalList("success_exit_codes", &p.success_exit_codes, 64);
  const YAML::Node failure_classes = r.Child("failure_classes");
  YAML::Node settings = r.Child("settings");
  TSR_RETURN_IF_ERROR(r.Finish());

  if (p.name.empty() || p.name.size() > 64 ||
      !std::all_of(p.name.begin(), p.name.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return Status::InvalidArgument("name: '" + p.name +
                                   "' must be 1..64 lower-case letters, digits and '_'");
  }
  if (!p.native && p.executable_names.empty() == p.executable_setting.empty()) {
    return Status::InvalidArgument(
        "executable: give either names (programs to find) or from_setting (a job setting)");
  }
  for (size_t i = 0; i < p.executable_names.size(); ++i) {
    const std::string& n = p.executable_names[i];
    if (n.empty() || n[0] == '-' || HasControl(n)) {
      return Status::InvalidArgument("executable.names[" + std::to_string(i) +
                                     "]: not a program name");
    }
  }
  if (runs == "frame") {
    p.per_frame = true;
  } else if (runs == "task") {
    p.per_frame = false;
  } else {
    return Status::InvalidArgument("runs: expected frame or task, got '" + runs + "'");
  }
  for (size_t i = 0; i < p.scene_extensions.size(); ++i) {
    const std::string& ext = p.scene_extensions[i];
    if (ext.size() < 2 || ext[0] != '.' || ext.find('/') != std::string::npos) {
      return Status::InvalidArgument("scene.extensions[" + std::to_string(i) +
                                     "]: expected an extension like .pov");
    }
  }
  for (size_t i = 0; i < p.binary_scene_extensions.size(); ++i) {
    if (std::find(p.scene_extensions.begin(), p.scene_extensions.end(),
                  p.binary_scene_extensions[i]) == p.scene_extensions.end()) {
      return Status::InvalidArgument("scene.binary[" + std::to_string(i) +
                                     "]: not among scene.extensions");
    }
  }
  if (!p.native && (!args.IsDefined() || args.IsNull())) {
    return Status::InvalidArgument("args: required field is missing");
  }
  if (!p.native) TSR_RETURN_IF_ERROR(ReadArgs(args, "args", &p.args));

  unsigned groups = 0;
  if (!p.version_regex.empty()) {
    TSR_RETURN_IF_ERROR(CheckRegex(p.version_regex, "version.regex", &groups));
    if (groups < 1) return Status::InvalidArgument("version.regex: needs a group (the version)");
  }
  if (!p.progress_regex.empty()) {
    TSR_RETURN_IF_ERROR(CheckRegex(p.progress_regex, "progress.regex", &groups));
    for (auto [g, f] : {std::pair{p.progress_percent_group, "percent_group"},
                        std::pair{p.progress_done_group, "done_group"},
                        std::pair{p.progress_total_group, "total_group"},
                        std::pair{p.progress_frame_group, "frame_group"}}) {
      if (g < 0 || g > static_cast<int>(groups)) {
        return Status::InvalidArgument(std::string("progress.") + f + ": the regex has " +
                                       std::to_string(groups) + " group(s)");
      }
    }
    if (p.progress_percent_group == 0 &&
        (p.progress_done_group == 0 || p.progress_total_group == 0)) {
      return Status::InvalidArgument("progress: give percent_group, or done_group and total_group");
    }
  }
  for (size_t i = 0; i < p.error_regexes.size(); ++i) {
    TSR_RETURN_IF_ERROR(
        CheckRegex(p.error_regexes[i], "errors[" + std::to_string(i) + "]", &groups));
  }
  if (p.success_exit_codes.empty()) {
    return Status::InvalidArgument("success_exit_codes: must list at least one code");
  }
  TSR_ASSIGN_OR_RETURN(p.failure_rules, ReadFailureRules(failure_classes));

  if (settings.IsDefined() && !settings.IsNull()) {
    if (!settings.IsMap()) {
      return Status::InvalidArgument("settings: expected a map of setting names");
    }
    TSR_RETURN_IF_ERROR(yaml::CheckListSize(settings, "settings", kMaxSettings));
    for (const auto& kv : settings) {
      SettingSpec s;
      s.name = kv.first.Scalar();
      const std::string f = "settings." + s.name;
      if (s.name.empty() || p.FindSetting(s.name)) {
        return Status::InvalidArgument(f + ": empty or repeated setting name");
      }
      yaml::MapReader sr(kv.second, f);
      std::string type;
      double min = 0, max = 0;
      sr.Required("type", &type).Optional("description", &s.description);
      if (sr.Has("min")) sr.Optional("min", &min), s.min = min;
      if (sr.Has("max")) sr.Optional("max", &max), s.max = max;
      sr.OptionalList("values", &s.values, 256)
          .Optional("required", &s.required)
          .Optional("fixed", &s.fixed)
          .OptionalList("args", &s.args, kMaxArgs);
      YAML::Node def = sr.Child("default");
      TSR_RETURN_IF_ERROR(sr.Finish());
      TSR_ASSIGN_OR_RETURN(s.type, ParseType(type, f + ".type"));
      if (s.type == SettingType::kEnum && s.values.empty()) {
        return Status::InvalidArgument(f + ".values: an enum needs its allowed values");
      }
      if (def.IsDefined() && !def.IsNull()) {
        std::string text;
        if (def.IsSequence()) {
          std::vector<std::string> words;
          TSR_RETURN_IF_ERROR(yaml::CheckListSize(def, f + ".default", kMaxListWords));
          TSR_RETURN_IF_ERROR(yaml::Convert(def, f + ".default", &words));
          text = nlohmann::json(words).dump();
        } else if (def.IsScalar()) {
          text = def.Scalar();
        } else {
          return Status::InvalidArgument(f + ".default: expected a value");
        }
        TSR_ASSIGN_OR_RETURN(s.default_, CheckValue(s, text, f + ".default"));
      }
      if (s.fixed && !s.default_) {
        return Status::InvalidArgument(f + ".fixed: a fixed setting needs its default");
      }
      p.settings.push_back(std::move(s));
    }
  }
  if (!p.native && p.output.empty()) {
    const SettingSpec* outputs = p.FindSetting("outputs");
    if (!outputs || outputs->type != SettingType::kEnum ||
        std::count(outputs->values.begin(), outputs->values.end(), "images") > 0) {
      return Status::InvalidArgument(
          "output.file: required (the image each frame leaves), unless the plugin's `outputs` "
          "setting offers no images");
    }
  }
  if (!p.input_frames_setting.empty()) {
    const SettingSpec* s = p.FindSetting(p.input_frames_setting);
    if (!s || s->type != SettingType::kString || !s->required) {
      return Status::InvalidArgument("input_frames.from_setting: '" + p.input_frames_setting +
                                     "' must be a required string setting of this plugin");
    }
    if (p.per_frame) {
      return Status::InvalidArgument(
          "input_frames: a plugin taking another step's frames runs once per task (runs: task)");
    }
  }
  if (!p.executable_setting.empty()) {
    const SettingSpec* s = p.FindSetting(p.executable_setting);
    if (!s || s->type != SettingType::kString) {
      return Status::InvalidArgument("executable.from_setting: '" + p.executable_setting +
                                     "' must be a string setting of this plugin");
    }
  }

  // Dry run: every placeholder of every template must be known.
  Vars vars;
  Settings all;
  for (const SettingSpec& s : p.settings) {
    all[s.name] = s.type == SettingType::kList || s.type == SettingType::kGlobs ? "[]"
                  : s.type == SettingType::kEnv                                 ? "{}"
                  : s.type == SettingType::kBool                                ? "true"
                                                                                : "1";
  }
  vars.plugin = &p;
  vars.settings = &all;
  const std::string dir = "/task";
  vars.task_dir = &dir;
  for (const std::string& n : BuiltinNames()) vars.builtin[n] = "1";
  std::vector<std::string> sink;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const ArgItem& a = p.args[i];
    const std::string f = "args[" + std::to_string(i) + "]";
    if (a.insert_settings) continue;
    if (a.when.empty()) {
      TSR_RETURN_IF_ERROR(AppendWord(vars, a.word, f, &sink));
    }
    for (size_t k = 0; k < a.words.size(); ++k) {
      TSR_RETURN_IF_ERROR(
          AppendWord(vars, a.words[k], f + ".args[" + std::to_string(k) + "]", &sink));
    }
  }
  for (const SettingSpec& s : p.settings) {
    Vars sv = vars;
    sv.value = "1";
    for (size_t k = 0; k < s.args.size(); ++k) {
      TSR_RETURN_IF_ERROR(AppendWord(
          sv, s.args[k], "settings." + s.name + ".args[" + std::to_string(k) + "]", &sink));
    }
  }
  if (p.native) return p;  // no files: it hands its pixels over in memory
  Lookup out_lookup = [&](const std::string& n) -> StatusOr<std::optional<std::string>> {
    if (n != "frame") return Status::InvalidArgument("only {frame} may appear in output.file");
    return std::optional<std::string>("1");
  };
  if (p.output.empty()) return p;  // returns files or nothing (checked above)
  TSR_RETURN_IF_ERROR(Expand(p.output, out_lookup, "output.file").status());
  if (p.output.empty() || p.output[0] == '/' || p.output.find("..") != std::string::npos) {
    return Status::InvalidArgument("output.file: must be a file name inside the output folder");
  }
  return p;
}

std::string InputFrameName(int index) {
  char name[32];
  std::snprintf(name, sizeof name, "frames/%06d.png", index);
  return name;
}

StatusOr<Settings> ResolveSettings(const PluginSpec& plugin, const Settings& given) {
  Settings out;
  for (const auto& [name, value] : given) {
    const SettingSpec* s = plugin.FindSetting(name);
    if (!s) {
      std::string known;
      for (const SettingSpec& k : plugin.settings) known += (known.empty() ? "" : ", ") + k.name;
      return Status::InvalidArgument("settings." + name + ": unknown setting for renderer " +
                                     plugin.name + " (known: " + (known.empty() ? "none" : known) +
                                     ")");
    }
    TSR_ASSIGN_OR_RETURN(out[name], CheckValue(*s, value, "settings." + name));
    // (Given as the default, it is what resolved settings say: a worker resolves them again.)
    if (s->fixed && out[name] != *s->default_) {
      return Status::InvalidArgument("settings." + name + ": fixed by renderer " + plugin.name +
                                     " (always " + *s->default_ + ")");
    }
  }
  for (const SettingSpec& s : plugin.settings) {
    if (out.count(s.name)) continue;
    if (s.default_) {
      out[s.name] = *s.default_;
    } else if (s.required) {
      return Status::InvalidArgument("settings." + s.name + ": required by renderer " +
                                     plugin.name);
    }
  }
  return out;
}

}  // namespace tessera::plugin
