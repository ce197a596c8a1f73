#include "shared/plugin_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>
#include <set>

#include "shared/utf8.h"
#include "shared/yaml_util.h"

namespace tessera::plugin {
namespace {

// Placeholders that exist in every run (tile and GPU ones are filled in when they apply).
const std::set<std::string>& BuiltinNames() {
  static const std::set<std::string> names = {
      "scene",        "task_dir",     "output_dir",   "output",       "frame",     "frame_start",
      "frame_end",    "threads",      "gpu",          "gpus",         "x0",        "y0",
      "x1",           "y1",           "col_start",    "col_end",      "row_start", "row_end",
      "border_min_x", "border_max_x", "border_min_y", "border_max_y", "width",     "height"};
  return names;
}

bool HasControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

bool IsNumber(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Looks a placeholder up: nullopt = unknown name (an error); "" with *absent = a setting that has
// no value (the word is left out).
using Lookup = std::function<StatusOr<std::optional<std::string>>(const std::string&)>;

// Expands one template word. Returns nullopt when the word refers to an absent setting.
StatusOr<std::optional<std::string>> Expand(const std::string& tmpl, const Lookup& lookup,
                                            const std::string& field) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    char c = tmpl[i];
    if (c == '{' && i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    if (c == '}' && i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
      out += '}';
      i += 2;
      continue;
    }
    if (c == '}') return Status::InvalidArgument(field + ": unmatched '}' (write '}}')");
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    size_t close = tmpl.find('}', i);
    if (close == std::string::npos) {
      return Status::InvalidArgument(field + ": unclosed '{' (write '{{' for a brace)");
    }
    std::string name = tmpl.substr(i + 1, close - i - 1);
    int pad = 0;
    if (size_t colon = name.find(':'); colon != std::string::npos) {
      std::string fmt = name.substr(colon + 1);
      name = name.substr(0, colon);
      if (fmt.size() < 2 || fmt[0] != '0' ||
          !std::all_of(fmt.begin() + 1, fmt.end(), [](char d) { return std::isdigit(d); }) ||
          fmt.size() > 3) {
        return Status::InvalidArgument(field + ": format ':" + fmt + "' of {" + name +
                                       "} must be ':0N' (zero-padded to N digits)");
      }
      pad = std::stoi(fmt.substr(1));
    }
    StatusOr<std::optional<std::string>> looked_up = lookup(name);
    if (!looked_up.ok()) return looked_up.status().WithContext(field);
    const std::optional<std::string>& value = *looked_up;
    if (!value) return std::optional<std::string>();
    std::string v = *value;
    if (pad > 0) {
      if (!IsNumber(v) || v.find_first_of(".eE") != std::string::npos) {
        return Status::InvalidArgument(field + ": {" + name + ":0" + std::to_string(pad) +
                                       "} needs an integer, got '" + v + "'");
      }
      const bool negative = v[0] == '-';
      std::string digits = negative ? v.substr(1) : v;
      if (static_cast<int>(digits.size()) < pad) {
        digits.insert(0, static_cast<size_t>(pad) - digits.size(), '0');
      }
      v = (negative ? "-" : "") + digits;
    }
    if (HasControl(v)) {
      return Status::InvalidArgument(field + ": the value of {" + name +
                                     "} contains control characters");
    }
    // No option injection: a value may not begin a word with '-' unless it is a number.
    if (out.empty() && !v.empty() && v[0] == '-' && !IsNumber(v)) {
      return Status::InvalidArgument(field + ": the value of {" + name + "} ('" + v +
                                     "') starts with '-' and would be read as an option");
    }
    out += v;
    i = close + 1;
  }
  return std::optional<std::string>(out);
}

StatusOr<SettingType> ParseType(const std::string& s, const std::string& field) {
  static const std::pair<const char*, SettingType> kTypes[] = {
      {"bool", SettingType::kBool},   {"int", SettingType::kInt},
      {"float", SettingType::kFloat}, {"string", SettingType::kString},
      {"enum", SettingType::kEnum},   {"path", SettingType::kPath},
      {"list", SettingType::kList}};
  for (const auto& [name, type] : kTypes) {
    if (s == name) return type;
  }
  return Status::InvalidArgument(field + ": '" + s +
                                 "' is not a setting type (bool, int, float, string, enum, "
                                 "path, list)");
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
  // A list's text is JSON: its words are checked one by one below.
  if (s.type != SettingType::kList) TSR_RETURN_IF_ERROR(CheckText(value, field));
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

// Variables of one run; settings are looked up through `settings`.
struct Vars {
  std::map<std::string, std::string> builtin;
  const Settings* settings = nullptr;
  const PluginSpec* plugin = nullptr;
  const std::string* task_dir = nullptr;
  std::optional<std::string> value;  // {value} inside a setting's args
};

StatusOr<std::optional<std::string>> LookupVar(const Vars& vars, const std::string& name);

// A path setting's value may use the frame placeholders; it becomes an absolute path.
StatusOr<std::optional<std::string>> ExpandPathValue(const Vars& vars, const std::string& value,
                                                     const std::string& field) {
  Vars frame_only;
  for (const char* k : {"frame", "frame_start", "frame_end"}) {
    auto it = vars.builtin.find(k);
    if (it != vars.builtin.end()) frame_only.builtin[k] = it->second;
  }
  Lookup lookup = [&](const std::string& n) -> StatusOr<std::optional<std::string>> {
    auto it = frame_only.builtin.find(n);
    if (it == frame_only.builtin.end()) {
      return Status::InvalidArgument(field + ": {" + n + "} is not allowed in a path setting");
    }
    return std::optional<std::string>(it->second);
  };
  TSR_ASSIGN_OR_RETURN(std::optional<std::string> rel, Expand(value, lookup, field));
  if (!rel) return rel;
  return std::optional<std::string>(*vars.task_dir + "/" + *rel);
}

StatusOr<std::optional<std::string>> LookupVar(const Vars& vars, const std::string& name) {
  if (name == "value") {
    if (!vars.value) return Status::InvalidArgument("{value} is only known in a setting's args");
    return vars.value;
  }
  if (name.rfind("settings.", 0) == 0) {
    const std::string key = name.substr(9);
    const SettingSpec* s = vars.plugin->FindSetting(key);
    if (!s) return Status::InvalidArgument("{" + name + "}: the plugin has no such setting");
    auto it = vars.settings->find(key);
    if (it == vars.settings->end()) return std::optional<std::string>();
    if (s->type == SettingType::kPath) {
      return ExpandPathValue(vars, it->second, "settings." + key);
    }
    if (s->type == SettingType::kList) {
      return Status::InvalidArgument("{" + name + "}: a list setting must be a word of its own");
    }
    return std::optional<std::string>(it->second);
  }
  if (!BuiltinNames().count(name)) {
    return Status::InvalidArgument("unknown placeholder {" + name + "}");
  }
  auto it = vars.builtin.find(name);
  if (it == vars.builtin.end()) {
    if (name == "width" || name == "height") return std::optional<std::string>();
    return Status::InvalidArgument("{" + name + "} has no value in this run");
  }
  return std::optional<std::string>(it->second);
}

// Appends the expansion of `word` (a list setting spliced as several words).
Status AppendWord(const Vars& vars, const std::string& word, const std::string& field,
                  std::vector<std::string>* argv) {
  if (word.size() > 11 && word.rfind("{settings.", 0) == 0 && word.back() == '}' &&
      word.find('{', 1) == std::string::npos) {
    const std::string key = word.substr(10, word.size() - 11);
    const SettingSpec* s = vars.plugin->FindSetting(key);
    if (s && s->type == SettingType::kList) {
      auto it = vars.settings->find(key);
      if (it == vars.settings->end()) return Status::Ok();
      TSR_ASSIGN_OR_RETURN(std::vector<std::string> words, ListValue(it->second));
      Vars inner = vars;
      inner.settings = nullptr;
      Lookup lookup = [&](const std::string& n) -> StatusOr<std::optional<std::string>> {
        if (n.rfind("settings.", 0) == 0 || n == "value") {
          return Status::InvalidArgument("{" + n + "} is not allowed inside settings." + key);
        }
        return LookupVar(inner, n);
      };
      for (size_t i = 0; i < words.size(); ++i) {
        TSR_ASSIGN_OR_RETURN(
            std::optional<std::string> w,
            Expand(words[i], lookup, "settings." + key + "[" + std::to_string(i) + "]"));
        if (w) argv->push_back(*w);
      }
      return Status::Ok();
    }
  }
  Lookup lookup = [&](const std::string& n) { return LookupVar(vars, n); };
  TSR_ASSIGN_OR_RETURN(std::optional<std::string> w, Expand(word, lookup, field));
  if (w) argv->push_back(*w);
  return Status::Ok();
}

Vars MakeVars(const PluginSpec& plugin, const RunContext& ctx, bool* tile) {
  Vars v;
  v.plugin = &plugin;
  v.settings = &ctx.settings;
  v.task_dir = &ctx.task_dir;
  auto& b = v.builtin;
  b["task_dir"] = ctx.task_dir;
  b["output_dir"] = ctx.output_dir;
  if (!ctx.scene.empty()) b["scene"] = ctx.scene;
  b["frame"] = std::to_string(ctx.frame);
  b["frame_start"] = std::to_string(ctx.frame_start);
  b["frame_end"] = std::to_string(ctx.frame_end);
  b["threads"] = std::to_string(ctx.threads);
  if (!ctx.gpus.empty()) {
    b["gpu"] = std::to_string(ctx.gpus.front());
    std::string all;
    for (int gpu : ctx.gpus) all += (all.empty() ? "" : ",") + std::to_string(gpu);
    b["gpus"] = all;
  }
  auto width = ctx.settings.find("width");
  auto height = ctx.settings.find("height");
  if (width != ctx.settings.end()) b["width"] = width->second;
  if (height != ctx.settings.end()) b["height"] = height->second;
  const protocol::FramePart& p = ctx.part;
  *tile = !p.whole_region();
  if (*tile) {
    b["x0"] = std::to_string(p.x0);
    b["y0"] = std::to_string(p.y0);
    b["x1"] = std::to_string(p.x1);
    b["y1"] = std::to_string(p.y1);
    b["col_start"] = std::to_string(p.x0 + 1);
    b["col_end"] = std::to_string(p.x1);
    b["row_start"] = std::to_string(p.y0 + 1);
    b["row_end"] = std::to_string(p.y1);
    if (width != ctx.settings.end() && height != ctx.settings.end()) {
      const double w = std::stod(width->second), h = std::stod(height->second);
      b["border_min_x"] = FormatDouble(p.x0 / w);
      b["border_max_x"] = FormatDouble(p.x1 / w);
      b["border_min_y"] = FormatDouble(1.0 - p.y1 / h);
      b["border_max_y"] = FormatDouble(1.0 - p.y0 / h);
    }
  }
  return v;
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
                            "success_exit_codes"}) {
      if (static_cast<const YAML::Node&>(root)[key].IsDefined()) {
        return Status::InvalidArgument(std::string(key) +
                                       ": a native plugin renders in-process; it has no " + key);
      }
    }
  }
  if (!p.native) {
    yaml::MapReader o(r.Child("output"), "output");
    std::string color = "srgb";
    o.Required("file", &p.output).Optional("color", &color);
    if (o.ok() && color != "srgb" && color != "linear") {
      o.Fail(Status::InvalidArgument("output.color: expected srgb or linear, got '" + color + "'"));
    }
    p.output_srgb = color == "srgb";
    r.Fail(o.Finish());
  }
  r.Optional("tiles", &p.tiles);
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
      p.settings.push_back(std::move(s));
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
    all[s.name] =
        s.type == SettingType::kList ? "[]" : (s.type == SettingType::kBool ? "true" : "1");
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
  TSR_RETURN_IF_ERROR(Expand(p.output, out_lookup, "output.file").status());
  if (p.output.empty() || p.output[0] == '/' || p.output.find("..") != std::string::npos) {
    return Status::InvalidArgument("output.file: must be a file name inside the output folder");
  }
  return p;
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

namespace {
// The scene file's extension, lower-case (".blend"); empty when it has none.
std::string SceneExtension(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext;
}
}  // namespace

bool IsBinaryScene(const PluginSpec& plugin, const std::string& scene_path) {
  const std::string ext = SceneExtension(scene_path);
  return !ext.empty() &&
         std::find(plugin.binary_scene_extensions.begin(), plugin.binary_scene_extensions.end(),
                   ext) != plugin.binary_scene_extensions.end();
}

StatusOr<std::string> CheckSceneName(const PluginSpec& plugin, const std::string& scene_path) {
  if (scene_path.empty()) {
    if (plugin.scene_required) {
      return Status::InvalidArgument("scene: renderer " + plugin.name + " needs a scene file");
    }
    return std::string();
  }
  std::string name = scene_path;
  if (size_t slash = name.find_last_of("/\\"); slash != std::string::npos) {
    name = name.substr(slash + 1);
  }
  if (name.empty() || name == "." || name == ".." || name[0] == '-' || HasControl(name) ||
      name.size() > 255) {
    return Status::InvalidArgument("scene: '" + scene_path + "' is not a usable file name");
  }
  const std::string lower = SceneExtension(name);
  if (!plugin.scene_extensions.empty() &&
      std::find(plugin.scene_extensions.begin(), plugin.scene_extensions.end(), lower) ==
          plugin.scene_extensions.end()) {
    return Status::InvalidArgument("scene: renderer " + plugin.name + " takes " +
                                   nlohmann::json(plugin.scene_extensions).dump() +
                                   " files, got '" + scene_path + "'");
  }
  return name;
}

StatusOr<std::vector<std::string>> BuildArgv(const PluginSpec& plugin, const RunContext& ctx) {
  bool tile = false;
  Vars vars = MakeVars(plugin, ctx, &tile);
  if (plugin.per_frame) {
    TSR_ASSIGN_OR_RETURN(vars.builtin["output"], OutputPath(plugin, ctx, ctx.frame));
  }
  if (tile && !plugin.tiles) {
    return Status::InvalidArgument("renderer " + plugin.name + " cannot render tiles");
  }
  const bool gpu = !ctx.gpus.empty();
  std::vector<std::string> argv;
  auto settings_args = [&]() -> Status {
    for (const SettingSpec& s : plugin.settings) {
      auto it = ctx.settings.find(s.name);
      if (it == ctx.settings.end() || s.args.empty()) continue;
      if (s.type == SettingType::kBool && it->second != "true") continue;
      Vars sv = vars;
      if (s.type == SettingType::kPath) {
        TSR_ASSIGN_OR_RETURN(sv.value, ExpandPathValue(vars, it->second, "settings." + s.name));
      } else {
        sv.value = it->second;
      }
      for (const std::string& w : s.args) {
        TSR_RETURN_IF_ERROR(AppendWord(sv, w, "settings." + s.name, &argv));
      }
    }
    return Status::Ok();
  };
  bool inserted = false;
  for (size_t i = 0; i < plugin.args.size(); ++i) {
    const ArgItem& a = plugin.args[i];
    const std::string f = "args[" + std::to_string(i) + "]";
    if (a.insert_settings) {
      TSR_RETURN_IF_ERROR(settings_args());
      inserted = true;
      continue;
    }
    if (a.when.empty()) {
      TSR_RETURN_IF_ERROR(AppendWord(vars, a.word, f, &argv));
      continue;
    }
    const bool on =
        (a.when == "tile" && tile) || (a.when == "whole" && !tile) || (a.when == "gpu" && gpu) ||
        (a.when == "cpu" && !gpu) ||
        (a.when.rfind("scene=", 0) == 0 && a.when.substr(6) == SceneExtension(ctx.scene));
    if (!on) continue;
    if (a.when == "tile" && !vars.builtin.count("border_min_x")) {
      for (const std::string& w : a.words) {
        if (w.find("{border_") != std::string::npos) {
          return Status::InvalidArgument("settings.width, settings.height: tiles of renderer " +
                                         plugin.name + " need the frame size");
        }
      }
    }
    for (const std::string& w : a.words) TSR_RETURN_IF_ERROR(AppendWord(vars, w, f, &argv));
  }
  if (!inserted) TSR_RETURN_IF_ERROR(settings_args());
  return argv;
}

StatusOr<std::string> OutputPath(const PluginSpec& plugin, const RunContext& ctx, int frame) {
  Lookup lookup = [&](const std::string& n) -> StatusOr<std::optional<std::string>> {
    if (n != "frame") return Status::InvalidArgument("only {frame} may appear in output.file");
    return std::optional<std::string>(std::to_string(frame));
  };
  TSR_ASSIGN_OR_RETURN(std::optional<std::string> name,
                       Expand(plugin.output, lookup, "output.file"));
  return ctx.output_dir + "/" + name.value_or("");
}

}  // namespace tessera::plugin
