#pragma once
// The built-in path tracer as a renderer plugin (plugins/api/renderer_api.h): the worker runs it
// through the same C table as any other C++ plugin, compiled in rather than loaded.

#include "plugins/api/renderer_api.h"

#ifdef __cplusplus
extern "C" {
#endif

// Name "pathtracer"; capabilities tiles, sample parts and checkpoints. The scene is the job's
// scene YAML (shared/scenes/scene_file.h); its relative file paths resolve in the request's
// scene_dir. `device` picks the backend: "cpu", "cuda" (an error without a usable GPU) or
// "auto" (the pinned GPUs when there are, else the CPU); a frame is split over all the task's
// GPUs (ABI 2.2), and a task with no GPU renders on the CPU whatever `device` says. When the
// request's settings hold TSR_SETTING_INPUT_ROOTS (the worker always sends it), every file the
// scene names must resolve inside scene_dir (relative paths) or one of those folders (absolute
// ones), or the render fails naming the key and the path.
const TsrRendererPlugin* tsr_pathtracer_plugin(void);

#ifdef __cplusplus
}
#endif
