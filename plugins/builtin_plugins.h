#pragma once
// The renderer plugins compiled into Tessera's programs, as their tables of the plugin ABI
// (plugins/api/renderer_api.h). A host uses a built-in table exactly as one it got from a plugin
// library (worker/native_plugin.h), so the worker reaches the built-in path tracer only through
// the ABI and never includes a plugin's own headers; library tessera_builtin_plugins links each
// built-in plugin's code.

#include <span>

#include "plugins/api/renderer_api.h"

namespace tessera::plugins {

// Every built-in plugin's table, in the order a host offers them (today the path tracer).
std::span<const TsrRendererPlugin* const> BuiltinRendererPlugins();

}  // namespace tessera::plugins
