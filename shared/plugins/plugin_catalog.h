#pragma once
// The renderer plugins built into Tessera: every plugins/<name>/plugin.yaml, compiled in at build
// time (so the scheduler, the worker and the CLI agree on them without a shared folder).

#include <memory>
#include <string_view>
#include <vector>

#include "shared/plugins/plugin_file.h"

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
// A plugin by name: built in (OpenJdSpec among them), else registered native; nullptr when
// neither.
std::shared_ptr<const PluginSpec> FindPlugin(std::string_view name);

// The built-in path tracer as a renderer spec (name "pathtracer"): compiled into every worker, it
// takes a Tessera scene (shared/scenes/scene_file.h YAML, uploaded with the files it names) and no
// settings, splits frames into tiles and sample parts whose results are exact accumulations, and
// its checkpoints are accumulations too. Not among BuiltinPlugins(): those are plugin.yaml files
// (`tessera plugins` lists them), and a job gives the path tracer no `settings:`.
const PluginSpec& PathTracerSpec();
// The tasks of an Open Job Description step (spec::kRendererOpenJd; shared/openjd/openjd.h): the
// scene is the step's session JSON (<step>.openjd.json), one task per frame (the parameter space's
// index + 1), whole frames only, no images back (`outputs` is none). Found by FindPlugin; offered
// by workers whose worker.command_programs allow some program (worker/openjd_task.h).
const PluginSpec& OpenJdSpec();
// The renderer a job names: the path tracer, else FindPlugin(name); nullptr for noop and for
// names the farm does not know. Where the farm asks what a renderer can do.
std::shared_ptr<const PluginSpec> FindRenderer(std::string_view name);
// Whether the named renderer takes a Tessera scene (false for noop and for unknown names).
bool TakesTesseraScene(std::string_view renderer);

// The raw YAML texts, by plugin folder name (for tests and `tessera plugins --json`).
struct PluginSource {
  const char* folder;
  const char* yaml;
};
const std::vector<PluginSource>& BuiltinPluginSources();

}  // namespace tessera::plugin
