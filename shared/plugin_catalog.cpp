#include "shared/plugin_catalog.h"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

#include "shared/renderer_names.h"

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

namespace {
struct NativeRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const PluginSpec>, std::less<>> plugins;
};
NativeRegistry& Natives() {
  static NativeRegistry registry;
  return registry;
}
}  // namespace

Status RegisterNativePlugin(PluginSpec spec) {
  if (FindBuiltinPlugin(spec.name) != nullptr || spec.name == spec::kRendererPathTracer ||
      spec.name == spec::kRendererNoop) {
    return Status::AlreadyExists("plugin " + spec.name + ": a built-in renderer has that name");
  }
  spec.native = true;
  NativeRegistry& r = Natives();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::string name = spec.name;
  r.plugins[name] = std::make_shared<const PluginSpec>(std::move(spec));
  return Status::Ok();
}

std::vector<PluginSpec> RegisteredNativePlugins() {
  NativeRegistry& r = Natives();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<PluginSpec> out;
  for (const auto& [name, spec] : r.plugins) out.push_back(*spec);
  return out;
}

std::shared_ptr<const PluginSpec> FindPlugin(std::string_view name) {
  if (const PluginSpec* builtin = FindBuiltinPlugin(name)) {
    return std::shared_ptr<const PluginSpec>(std::shared_ptr<const PluginSpec>(), builtin);
  }
  NativeRegistry& r = Natives();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.plugins.find(name);
  return it == r.plugins.end() ? nullptr : it->second;
}

}  // namespace tessera::plugin
