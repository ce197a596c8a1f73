#include "plugins/builtin_plugins.h"

#include "plugins/pathtracer/plugin_entry.h"

namespace tessera::plugins {

std::span<const TsrRendererPlugin* const> BuiltinRendererPlugins() {
  static const TsrRendererPlugin* const kTables[] = {tsr_pathtracer_plugin()};
  return kTables;
}

}  // namespace tessera::plugins
