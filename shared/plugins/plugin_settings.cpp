// A plugin's settings: their declarations in plugin.yaml (`settings:`), and the values a job
// gives them, checked against those declarations (types, ranges, allowed values; no option
// injection, no control characters) and resolved with the plugin's defaults.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "shared/base/utf8.h"
#include "shared/base/yaml_util.h"
#include "shared/plugins/plugin_file.h"
#include "shared/plugins/plugin_file_internal.h"
#include "shared/plugins/plugin_template.h"

namespace tessera::plugin {
using templates::FormatDouble;
using templates::HasControl;
using templates::IsNumber;

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

// One declaration of `settings:` (NAME: {type, description, min, max, values, default, required,
// fixed, args}).
StatusOr<SettingSpec> ReadSettingSpec(const std::string& name, const YAML::Node& node) {
  SettingSpec s;
  s.name = name;
  const std::string f = "settings." + s.name;
  yaml::MapReader sr(node, f);
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
  return s;
}

}  // namespace

namespace internal {

Status ReadSettingSpecs(const YAML::Node& settings, PluginSpec* p) {
  if (!settings.IsDefined() || settings.IsNull()) return Status::Ok();
  if (!settings.IsMap()) {
    return Status::InvalidArgument("settings: expected a map of setting names");
  }
  TSR_RETURN_IF_ERROR(yaml::CheckListSize(settings, "settings", kMaxSettings));
  for (const auto& kv : settings) {
    const std::string name = kv.first.Scalar();
    if (name.empty() || p->FindSetting(name)) {
      return Status::InvalidArgument("settings." + name + ": empty or repeated setting name");
    }
    TSR_ASSIGN_OR_RETURN(SettingSpec s, ReadSettingSpec(name, kv.second));
    p->settings.push_back(std::move(s));
  }
  return Status::Ok();
}

}  // namespace internal

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
