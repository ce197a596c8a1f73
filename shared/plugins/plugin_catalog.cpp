#include "shared/plugins/plugin_catalog.h"

#include <spdlog/spdlog.h>

#include <map>
#include <mutex>

#include "shared/plugins/renderer_names.h"

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

const PluginSpec& PathTracerSpec() {
  static const PluginSpec spec = [] {
    PluginSpec p;
    p.name = spec::kRendererPathTracer;
    p.description =
        "Tessera's built-in path tracer (CUDA, or the same kernel on the CPU); scene is inline "
        "YAML";
    p.native = true;
    p.scene_required = true;
    p.tiles = true;
    p.sample_parts = true;
    p.exact_parts = true;
    p.accumulation_checkpoints = true;
    p.scene_kind = SceneKind::kTesseraScene;
    p.on_every_worker = true;
    return p;
  }();
  return spec;
}

const PluginSpec& OpenJdSpec() {
  static const PluginSpec spec = [] {
    PluginSpec p;
    p.name = spec::kRendererOpenJd;
    p.description = "the tasks of an Open Job Description step (tessera submit template.yaml)";
    p.scene_required = true;
    p.scene_extensions = {".json"};
    p.per_frame = true;
    SettingSpec outputs;
    outputs.name = "outputs";
    outputs.type = SettingType::kEnum;
    outputs.values = {"none", "files"};
    outputs.default_ = "none";
    outputs.description =
        "OpenJD tasks return no images; files: what they write into a job bundle's output "
        "folders comes back (set by the translation)";
    p.settings.push_back(std::move(outputs));
    return p;
  }();
  return spec;
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
  if (FindBuiltinPlugin(spec.name) != nullptr || spec.name == PathTracerSpec().name ||
      spec.name == OpenJdSpec().name || spec.name == spec::kRendererNoop ||
      spec.name == spec::kRendererSteps) {
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

std::shared_ptr<const PluginSpec> FindRenderer(std::string_view name) {
  const PluginSpec& path_tracer = PathTracerSpec();
  if (name == path_tracer.name) {
    return std::shared_ptr<const PluginSpec>(std::shared_ptr<const PluginSpec>(), &path_tracer);
  }
  return FindPlugin(name);
}

bool TakesTesseraScene(std::string_view renderer) {
  const std::shared_ptr<const PluginSpec> spec = FindRenderer(renderer);
  return spec != nullptr && spec->takes_tessera_scene();
}

std::shared_ptr<const PluginSpec> FindPlugin(std::string_view name) {
  if (const PluginSpec* builtin = FindBuiltinPlugin(name)) {
    return std::shared_ptr<const PluginSpec>(std::shared_ptr<const PluginSpec>(), builtin);
  }
  if (name == OpenJdSpec().name) {
    return std::shared_ptr<const PluginSpec>(std::shared_ptr<const PluginSpec>(), &OpenJdSpec());
  }
  NativeRegistry& r = Natives();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.plugins.find(name);
  return it == r.plugins.end() ? nullptr : it->second;
}

}  // namespace tessera::plugin
