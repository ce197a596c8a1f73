#include "shared/plugin_catalog.h"

#include <spdlog/spdlog.h>

namespace tessera::plugin {

const std::vector<PluginSpec>& BuiltinPlugins() {
  static const std::vector<PluginSpec> plugins = [] {
    std::vector<PluginSpec> out;
    for (const PluginSource& source : BuiltinPluginSources()) {
      StatusOr<PluginSpec> spec =
          ParsePluginYaml(source.yaml, std::string("plugins/") + source.folder + "/plugin.yaml");
      if (!spec.ok()) {
        spdlog::error("built-in plugin {}: {}", source.folder, spec.status().message());
        TSR_CHECK(spec.ok());
      }
      out.push_back(std::move(spec).value());
    }
    return out;
  }();
  return plugins;
}

const PluginSpec* FindBuiltinPlugin(std::string_view name) {
  for (const PluginSpec& p : BuiltinPlugins()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace tessera::plugin
