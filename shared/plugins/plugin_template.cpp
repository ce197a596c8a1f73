// Placeholder templates: expanding one word against a run's variables (see plugin_template.h).
#include "shared/plugins/plugin_template.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tessera::plugin::templates {

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
    if (s->type == SettingType::kEnv || s->type == SettingType::kGlobs) {
      return Status::InvalidArgument("{" + name + "}: an " + SettingTypeName(s->type) +
                                     " setting is not an argument");
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

}  // namespace tessera::plugin::templates
