#pragma once
// The renderer plugins built into Tessera: every plugins/<name>/plugin.yaml, compiled in at build
// time (so the scheduler, the worker and the CLI agree on them without a shared folder).

#include <string_view>
#include <vector>

#include "shared/plugin_spec.h"

namespace tessera::plugin {

// Parsed once; a plugin.yaml that does not parse is a build defect (a unit test parses them all).
const std::vector<PluginSpec>& BuiltinPlugins();
// nullptr when no built-in plugin has that name.
const PluginSpec* FindBuiltinPlugin(std::string_view name);

// The raw YAML texts, by plugin folder name (for tests and `tessera plugins --json`).
struct PluginSource {
  const char* folder;
  const char* yaml;
};
const std::vector<PluginSource>& BuiltinPluginSources();

}  // namespace tessera::plugin
