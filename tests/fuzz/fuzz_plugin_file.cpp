// Fuzzes plugin.yaml parsing (shared/plugins/plugin_file.h): ParsePluginYaml and, for an accepted
// plugin, the settings, scene name, argv and output path a worker derives from it; the same text
// as a C++ plugin's declaration (NativePluginSpec, which a worker sends the scheduler); and the
// settings' list values.

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/plugins/plugin_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  namespace plugin = tessera::plugin;
  if (tessera::StatusOr<plugin::PluginSpec> spec = plugin::ParsePluginYaml(text, "fuzz.yaml");
      spec.ok()) {
    tessera::StatusOr<plugin::Settings> settings = plugin::ResolveSettings(*spec, {});
    (void)plugin::CheckSceneName(*spec, "shot.pov");
    plugin::RunContext ctx;
    ctx.task_dir = "/tmp/fuzz-task";
    ctx.output_dir = "/tmp/fuzz-task/out";
    ctx.scene = "/tmp/fuzz-task/shot.pov";
    ctx.frame = ctx.frame_start = ctx.frame_end = 1;
    ctx.threads = 2;
    if (settings.ok()) ctx.settings = *settings;
    (void)plugin::BuildArgv(*spec, ctx);
    (void)plugin::OutputPath(*spec, ctx, 1);
  }
  (void)plugin::NativePluginSpec("fuzz", "a fuzzed plugin", true, true, text);
  (void)plugin::ListValue(std::string(text));
  return 0;
}
