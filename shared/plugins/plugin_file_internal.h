#pragma once
// What plugin_file.cpp (reading plugin.yaml) and plugin_settings.cpp (settings and their values)
// share; not for other code.

#include <yaml-cpp/yaml.h>

#include "shared/base/status.h"
#include "shared/plugins/plugin_file.h"

namespace tessera::plugin::internal {

// plugin.yaml's `settings:` map into p->settings, each declaration checked (its default too).
Status ReadSettingSpecs(const YAML::Node& settings, PluginSpec* p);

}  // namespace tessera::plugin::internal
