#pragma once
// The renderers every Tessera binary knows without a plugin.yaml: the built-in path tracer and
// noop (a farm check). Both the job spec and the plugin catalog (which refuses a plugin taking
// one of these names) need them, so they live below both.

namespace tessera::spec {

inline constexpr const char* kRendererPathTracer = "pathtracer";
inline constexpr const char* kRendererNoop = "noop";
// Not a renderer a job file may name: what the store records for a job with steps (each step
// has its own renderer; shared/jobs/job_steps.h).
inline constexpr const char* kRendererSteps = "steps";
// The tasks of an Open Job Description step (shared/openjd/openjd.h): the step's session (its
// script, environments, embedded files and parameter space, as JSON) is the scene; the worker runs
// the actions of one task's session itself (worker/openjd_task.h).
inline constexpr const char* kRendererOpenJd = "openjd";
// The renderer of a job that names none. What each renderer can do is its PluginSpec
// (shared/plugins/plugin_catalog.h FindRenderer), never a comparison with these names.
inline constexpr const char* kDefaultRenderer = kRendererPathTracer;

}  // namespace tessera::spec
