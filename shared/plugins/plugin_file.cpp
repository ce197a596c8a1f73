// Reading plugin.yaml: its keys into a PluginSpec, then what they must say together (a program
// to run, patterns that compile with the groups they name, settings the templates can use), and
// a dry run of every argv template. Settings are read and checked in plugin_settings.cpp.

#include "shared/plugins/plugin_file.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>

#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_file_internal.h"
#include "shared/plugins/plugin_template.h"

namespace tessera::plugin {
using templates::AppendWord;
using templates::BuiltinNames;
using templates::Expand;
using templates::HasControl;
using templates::Lookup;
using templates::Vars;

namespace {

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

// The keys of plugin.yaml that are read after the rest are checked.
struct LaterKeys {
  std::string runs = "frame";
  YAML::Node args, failure_classes, settings;
};

// Every key of plugin.yaml into `p` (unknown keys refused); a native plugin may give only what a
// job may give it.
StatusOr<LaterKeys> ReadKeys(const YAML::Node& root, PluginSpec& p) {
  LaterKeys later;
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
  r.Optional("runs", &later.runs);
  later.args = r.Child("args");
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
  later.failure_classes = r.Child("failure_classes");
  later.settings = r.Child("settings");
  TSR_RETURN_IF_ERROR(r.Finish());
  return later;
}

// A name, a program to run (or a native plugin), how often it runs, the scene files it takes.
Status CheckProgram(PluginSpec& p, const std::string& runs) {
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
  return Status::Ok();
}

// The patterns compile, and name groups they have: version, progress, errors.
Status CheckPatterns(const PluginSpec& p) {
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
  return Status::Ok();
}

// Settings with a role: `outputs` (without output.file, it must offer no images), the one naming
// another step's frames, the one naming the program.
Status CheckSettingRoles(const PluginSpec& p) {
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
  return Status::Ok();
}

// Dry run: every placeholder of every template must be known, and output.file a file name.
Status DryRunTemplates(const PluginSpec& p) {
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
  if (p.native) return Status::Ok();  // no files: it hands its pixels over in memory
  Lookup out_lookup = [&](const std::string& n) -> StatusOr<std::optional<std::string>> {
    if (n != "frame") return Status::InvalidArgument("only {frame} may appear in output.file");
    return std::optional<std::string>("1");
  };
  if (p.output.empty()) return Status::Ok();  // returns files or nothing (checked above)
  TSR_RETURN_IF_ERROR(Expand(p.output, out_lookup, "output.file").status());
  if (p.output.empty() || p.output[0] == '/' || p.output.find("..") != std::string::npos) {
    return Status::InvalidArgument("output.file: must be a file name inside the output folder");
  }
  return Status::Ok();
}

// A plugin.yaml document: its keys, then each check in turn (the first problem is reported).
StatusOr<PluginSpec> ReadPlugin(const YAML::Node& root) {
  PluginSpec p;
  TSR_ASSIGN_OR_RETURN(const LaterKeys later, ReadKeys(root, p));
  TSR_RETURN_IF_ERROR(CheckProgram(p, later.runs));
  if (!p.native && (!later.args.IsDefined() || later.args.IsNull())) {
    return Status::InvalidArgument("args: required field is missing");
  }
  if (!p.native) TSR_RETURN_IF_ERROR(ReadArgs(later.args, "args", &p.args));
  TSR_RETURN_IF_ERROR(CheckPatterns(p));
  TSR_ASSIGN_OR_RETURN(p.failure_rules, ReadFailureRules(later.failure_classes));
  TSR_RETURN_IF_ERROR(internal::ReadSettingSpecs(later.settings, &p));
  TSR_RETURN_IF_ERROR(CheckSettingRoles(p));
  TSR_RETURN_IF_ERROR(DryRunTemplates(p));
  return p;
}

}  // namespace

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
  return ReadPlugin(root);
}

std::string InputFrameName(int index) {
  char name[32];
  std::snprintf(name, sizeof name, "frames/%06d.png", index);
  return name;
}

}  // namespace tessera::plugin
