#pragma once
// The renderer plugins built into Tessera: every plugins/<name>/plugin.yaml, compiled in at build
// time (so the scheduler, the worker and the CLI agree on them without a shared folder).

#include <memory>
#include <string_view>
#include <vector>

#include "shared/plugin_spec.h"

namespace tessera::plugin {

// Parsed once; a plugin.yaml that does not parse is a build defect (a unit test parses them all).
const std::vector<PluginSpec>& BuiltinPlugins();
// nullptr when no built-in plugin has that name.
const PluginSpec* FindBuiltinPlugin(std::string_view name);

// C++ plugins (plugins/api/renderer_api.h) loaded by workers from outside the build: the
// scheduler learns their declarations from the workers that offer them, so jobs naming them are
// validated like any other. Thread-safe; a later registration of the same name replaces the
// earlier one. Refused for the name of a built-in renderer.
Status RegisterNativePlugin(PluginSpec spec);
std::vector<PluginSpec> RegisteredNativePlugins();
// A plugin by name: built in, else registered native; nullptr when neither.
std::shared_ptr<const PluginSpec> FindPlugin(std::string_view name);

// The raw YAML texts, by plugin folder name (for tests and `tessera plugins --json`).
struct PluginSource {
  const char* folder;
  const char* yaml;
};
const std::vector<PluginSource>& BuiltinPluginSources();

}  // namespace tessera::plugin
