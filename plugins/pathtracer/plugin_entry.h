#pragma once
// The built-in path tracer as a renderer plugin (plugins/api/renderer_api.h): the worker runs it
// through the same C table as any other C++ plugin, compiled in rather than loaded.

#include "plugins/api/renderer_api.h"

#ifdef __cplusplus
extern "C" {
#endif

// Name "pathtracer"; capabilities tiles, sample parts and checkpoints. The scene is the job's
// scene YAML (shared/scene_spec.h); its relative file paths resolve in the request's
// scene_dir. `device` picks the backend: "cpu", "cuda" (an error without a usable GPU) or
// "auto" (the pinned GPU when there is one, else the CPU).
const TsrRendererPlugin* tsr_pathtracer_plugin(void);

#ifdef __cplusplus
}
#endif
