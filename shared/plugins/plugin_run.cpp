// One run of a declarative (command-line) renderer: the scene file's name, the argv built from
// the plugin's templates (never given to a shell) and where each frame's image is written.
#include <algorithm>
#include <cctype>

#include "shared/plugins/plugin_file.h"
#include "shared/plugins/plugin_template.h"

namespace tessera::plugin {
using templates::AppendWord;
using templates::Expand;
using templates::ExpandPathValue;
using templates::HasControl;
using templates::Lookup;
using templates::MakeVars;
using templates::Vars;

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
