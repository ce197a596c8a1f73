#pragma once
// Open Job Description (OpenJD) job templates, specification 2023-09
// (https://github.com/OpenJobDescription/openjd-specifications, wiki/2023-09-Template-Schemas):
// the submit side translates a template plus parameter values into a Tessera job file with
// steps; the worker side turns one task of a step into the files to write and commands to run.
//
//   specificationVersion: jobtemplate-2023-09
//   name: "render {{Param.Shot}}"           # Param.* / RawParam.* only; '-' for other characters
//   parameterDefinitions:                    # STRING, INT, FLOAT, PATH; default, allowedValues,
//     - {name: Frames, type: STRING, default: "1-100"}   # min/maxValue, min/maxLength
//   jobEnvironments: [{name: Setup, variables: {SHOT: "{{Param.Shot}}"}}]
//   steps:
//     - name: Render
//       parameterSpace:
//         taskParameterDefinitions:
//           - {name: Frame, type: INT, range: "{{Param.Frames}}"}
//           - {name: Cam, type: STRING, range: [left, right]}
//         combination: "Frame * Cam"         # default: the product in definition order
//       hostRequirements:
//         amounts: [{name: amount.worker.vcpu, min: 4}]
//         attributes: [{name: attr.worker.os.family, anyOf: [linux]}]
//       script:
//         actions: {onRun: {command: render, args: ["{{Task.Param.Frame}}", "{{Task.File.Run}}"]}}
//         embeddedFiles: [{name: Run, type: TEXT, data: "...", runnable: true}]
//     - name: Encode
//       dependencies: [{dependsOn: Render}]
//       script: {actions: {onRun: {command: encode}}}
//
// becomes a Tessera job file (shared/jobs/job_steps.h) with one step per OpenJD step:
//
//   name: render-sh010
//   steps:
//     - {name: Render, renderer: openjd, scene: Render.openjd.json, frames: 1-200, chunk_size: 1,
//        resources: {cpu_cores: 4}}
//     - {name: Encode, renderer: openjd, scene: Encode.openjd.json, frames: 1-1, chunk_size: 1,
//        depends_on: [{step: Render}]}
//
// Task index i of a step's parameter space (mixed-radix over the combination: the last factor of
// a product varies fastest; the members of an association `(A, B)` move together) runs as frame
// i + 1. Each step's scene is its session JSON (below): everything PlanTask needs, with the job
// parameters already substituted.
//
// Host requirements: amount.worker.vcpu / memory (MiB) / gpu / gpu.memory (MiB) become
// resources cpu_cores / ram_mb / gpus / gpu_memory_mb (the ceiling of `min`). Tessera reserves
// exactly that much for a task, so a `max` is accepted when the reservation fits under it and
// refused otherwise; any other amount is refused. attr.worker.os.family must allow linux (every
// Tessera worker runs Linux); attr.worker.cpu.arch and attr.custom.* values become required tags
// (allOf, or anyOf with one value: Tessera tags are all required).
//
// Refused by name, never ignored: extensions (TASK_CHUNKING, REDACTED_ENV_VARS, FEATURE_BUNDLE_1,
// EXPR) and what they add (let, BOOL/LIST/RANGE_EXPR/CHUNK[INT] types, endOfLine, bash/python
// script sugar, expressions in format strings), unknown keys, other specification versions.
// Limits: the spec's (50 job parameters, 16 task parameters, 1024 range-list entries, names of
// 64/128 characters...) and Tessera's: spec::kMaxSteps steps, spec::kMaxFramesPerJob tasks per
// step, spec::kMaxTasksPerJob tasks in all, a template of at most spec::kMaxJobYamlBytes.
//
// Session JSON (a step's scene; PlanTask refuses any other version or unknown key):
//   {"version": 1, "job": <OpenJD job name>, "step": <OpenJD step name>,
//    "parameter_space": {"parameters": [{"name", "type": INT, "ranges": [[first, step, count]...]}
//                                       | {"name", "type": FLOAT|STRING|PATH, "values": [...]}],
//                        "combination": {"param": i} | {"product": [...]} | {"zip": [...]} | null},
//    "environments": [{"name", "scope": job|step, "variables": [[NAME, fmt]...], "files": [file],
//                      "on_enter": action|null, "on_exit": action|null}],
//    "script": {"files": [file], "on_run": action}}
//   file:   {"name", "filename", "runnable", "data": fmt}
//   action: {"command": fmt, "args": [fmt...], "timeout_s", "cancel_mode", "notify_period_s"}
//   fmt:    "text" | ["text", {"ref": "Task.Param.Frame"}, ...]   (what the worker fills in:
//           Task.*, Session.*, Env.File.*; never re-parsed, so a parameter value holding "{{"
//           stays text)
// INT ranges are kept as arithmetic runs (1-100000 is one entry), so a large space stays small.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/base/status.h"
#include "shared/jobs/parsed_job_file.h"

namespace tessera::openjd {

inline constexpr const char* kSpecificationVersion = "jobtemplate-2023-09";
inline constexpr const char* kEnvironmentSpecificationVersion = "environment-2023-09";
inline constexpr int kSessionVersion = 2;
// Where the worker's scene file for a step is named (the CLI sends step_scenes under this).
inline constexpr const char* kSceneSuffix = ".openjd.json";
// The spec's limit on the job parameters of one template.
inline constexpr size_t kMaxJobParameters = 50;

enum class DocumentKind { kNone, kJobTemplate, kEnvironmentTemplate };
// What the YAML/JSON text is, by its top-level specificationVersion ("jobtemplate-...",
// "environment-..."). Never throws. It parses the text: a job file on its way in is asked once,
// by spec::ReadJobFile (shared/jobs/parsed_job_file.h), whose document the overloads below read.
DocumentKind KindOf(std::string_view text);
inline bool IsJobTemplate(std::string_view text) {
  return KindOf(text) == DocumentKind::kJobTemplate;
}

// A path mapping rule (How-Jobs-Are-Run, "Path Mapping"): a PATH parameter's value that starts
// with source_path (in the submitter's format, POSIX or WINDOWS) continues at destination_path on
// the worker. Rules apply longest source first; the first that matches wins.
struct PathMappingRule {
  std::string source_path_format = "POSIX";  // POSIX or WINDOWS
  std::string source_path;
  std::string destination_path;  // absolute on the worker...
  // ...or, for the folders Tessera itself brings to the session (a bundle's uploaded files),
  // relative to the session's working directory.
  bool in_session = false;
};
// Rules as the specification writes them: {"version": "pathmapping-1.0", "path_mapping_rules":
// [{source_path_format, source_path, destination_path}, ...]} (JSON or YAML), or just the list.
// At most kMaxPathMappingRules; errors name `field`.
inline constexpr size_t kMaxPathMappingRules = 100;
StatusOr<std::vector<PathMappingRule>> ParsePathMappingRules(std::string_view text,
                                                             const std::string& field);
StatusOr<std::vector<PathMappingRule>> PathMappingRulesFromJson(const nlohmann::json& json,
                                                                const std::string& field);
nlohmann::json PathMappingRulesToJson(const std::vector<PathMappingRule>& rules);
// `path` with the first matching rule applied (rules sorted longest source first), or `path`
// unchanged. A rule `in_session` must have been made absolute first.
std::string MapPath(const std::vector<PathMappingRule>& rules, const std::string& path);
// Longest source first (stable: of two equal lengths, the earlier rule stays first).
void SortRules(std::vector<PathMappingRule>* rules);

// Tessera's own settings of a job made from a template (an OpenJD template has none of them).
struct JobSettings {
  std::optional<int> priority;     // 0..100
  std::optional<int> max_retries;  // 0..100
  std::string project;
  std::vector<std::string> pools;
  // The farm's bound on an environment's onEnter that gives no timeout of its own (0: none):
  // a setup that never ends fails its task, naming the environment, instead of holding a
  // worker forever (scheduler config openjd.environment_timeout_s).
  int environment_timeout_s = 0;
};

// Everything besides the template that makes a job from it.
struct JobInputs {
  std::map<std::string, std::string> parameters;  // values as text (-p Name=Value)
  // Environment template texts, outermost first: the farm's, then the submitter's (--env).
  std::vector<std::string> environments;
  // The submitting machine's folder of the template (relative PATH defaults are joined with it)
  // and current folder (relative PATH values are joined with it); absolute, or "" when unknown
  // (then a relative default or value is refused).
  std::string template_dir, working_dir;
  std::vector<PathMappingRule> path_mapping;  // the job's own rules
  JobSettings settings;
  // A job bundle's attached files (shared storage not needed): folders of the submitting
  // machine whose files travel as the job's assets, placed in every session under
  // kAttachedFolder/<i>/ (PATH values under input_roots[i] are mapped there), and folders whose
  // files a task writes come back with the job (each under an input root, or a root of its own).
  std::vector<std::string> input_roots;
  std::vector<std::string> output_dirs;
};
// Where a session holds the attached folders: <working dir>/openjd/data/<i>/; an asset of a
// bundle is named "openjd/data/<i>/<path inside input_roots[i]>".
inline constexpr const char* kAttachedFolder = "openjd/data";

struct Translation {
  std::string job_yaml;  // a Tessera job file with `steps:`
  YAML::Node job;        // the same job file as a document (spec::ParsePipelineNode reads it)
  std::map<std::string, std::string> step_scenes;  // Tessera step name -> its session JSON
  // OpenJD step name -> Tessera step name, in template order.
  std::vector<std::pair<std::string, std::string>> step_names;
  int64_t task_count = 0;  // over all steps
  std::string job_name;    // the OpenJD job name, resolved
  // Every job parameter's value (PATH values joined, INTs in base 10), and the PATH ones with
  // their kind: what a bundle submission uploads (IN, INOUT) and brings back (OUT, INOUT).
  std::map<std::string, std::string> parameters;
  struct Path {
    std::string value, object_type, data_flow;
  };
  std::map<std::string, Path> path_parameters;
  std::vector<std::string> environments;  // names, in entering order (templates' first)
};

// Makes a job of a template. Errors name the field path ("steps[1].parameterSpace.
// taskParameterDefinitions[0].range: ...") or the parameter ("parameter Frames: ..."), and an
// environment template by its place ("environments[0].environment.variables.X: ...").
StatusOr<Translation> TranslateTemplate(std::string_view template_text, const JobInputs& inputs);
// The same for a template spec::ReadJobFile parsed: the document is not parsed again.
StatusOr<Translation> TranslateTemplate(const spec::OpenJdTemplate& document,
                                        const JobInputs& inputs);

// Checks a job template or an environment template on its own, without parameter values
// (`openjd check`): everything the document says, except what depends on a value not given.
Status CheckTemplate(std::string_view text);
Status CheckTemplate(const spec::OpenJdTemplate& document);

// ---- worker side: one task of a step -------------------------------------------------------

// A file to write before the actions run (mode 0755 when runnable, else 0644). `path` is
// absolute, under <working_dir>/openjd/.
struct EmbeddedFile {
  std::string path;
  std::string data;
  bool runnable = false;
};

struct Action {
  std::string command;
  std::vector<std::string> args;
  int timeout_s = 0;                      // 0: none (onExit defaults to 300, as the spec says)
  std::string cancel_mode = "TERMINATE";  // or NOTIFY_THEN_TERMINATE (SIGTERM, wait, SIGKILL)
  int notify_period_s = 0;                // NOTIFY_THEN_TERMINATE: the wait (spec defaults)
};

// An environment's variables are set for its own on_enter/on_exit and everything run inside it.
struct EnvironmentPlan {
  std::string name;
  std::optional<Action> on_enter, on_exit;
  std::vector<std::pair<std::string, std::string>> variables;
  std::vector<EmbeddedFile> files;
};

struct TaskPlan {
  std::string job, step;  // the OpenJD names
  // Environment templates', then the job's, then the step's environments, in entering order
  // (exit in reverse).
  std::vector<EnvironmentPlan> environments;
  // The step script's embedded files, and the path mapping rules file.
  std::vector<EmbeddedFile> files;
  Action on_run;
  std::vector<std::pair<std::string, std::string>> task_parameters;  // name -> value text
  std::vector<PathMappingRule> path_mapping;  // applied to PATH values (absolute, sorted)
  // Folders of the session whose files go back with the job (a bundle's outputs): `dir` relative
  // to the working directory; a file dir/x returns as name/x.
  struct Output {
    std::string dir, name;
  };
  std::vector<Output> outputs;
};

// `session_json`: a step scene from TranslateTemplate; `task_index`: 0-based index into the
// step's parameter space; `working_dir`: the task's folder (absolute;
// {{Session.WorkingDirectory}}); `worker_rules`: the worker's own path mapping rules (after the
// job's). Every format string comes back resolved. Files go under <working_dir>/openjd/env-<k>/
// (k = 1 for the first environment) and <working_dir>/openjd/task/, each named by its
// `filename` or else its `name`.
StatusOr<TaskPlan> PlanTask(std::string_view session_json, int64_t task_index,
                            const std::string& working_dir,
                            const std::vector<PathMappingRule>& worker_rules = {});

}  // namespace tessera::openjd
