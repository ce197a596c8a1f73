#pragma once
// Jobs with steps: a job file that chains several renderers (simulate, render, encode) as one job.
//
//   name: shot
//   frames: 1-100            # every key but `steps` is a default each step may override
//   output: {directory: shots/sh010}   # each step writes into <directory>/<step name>
//                            # (unless it has an `output` of its own)
//   steps:
//     - name: sim            # required; letters, digits, '.', '_' and '-'; unique in the job
//       renderer: command
//       settings: {program: /usr/bin/simulate, argv: ["{frame_start}", "{frame_end}"]}
//       chunk_size: 10
//     - name: render
//       scene: scene.yaml
//       depends_on:
//         - {step: sim, per_frame: true}   # frame N waits for the task holding frame N of sim
//     - name: cleanup
//       renderer: command
//       settings: {program: /usr/local/bin/cleanup}
//       depends_on: [{step: render}]       # the whole step first
//     - name: encode                       # an H.264 preview movie of render's PNG frames:
//       renderer: encode                   # waits for the whole step, runs one task over its
//       settings: {frames_from: render}    # frames (plugins/encode/plugin.yaml)
//
// Each step is checked by the job file parser (shared/jobs/job_file.h) as if it were a job file of
// its own: the job's keys with the step's on top (a step key replaces the job's value whole).
// `depends_on` of a step lists steps of the same job, never job ids; the job's own `depends_on`
// and `frame_depends_on` (ids of other jobs) hold every step. Limits: at most kMaxSteps steps,
// kMaxStepDependencies dependencies per step, and spec::kMaxTasksPerJob tasks over all steps
// (counted by the scheduler once frames are split). Cycles and unknown step names are refused
// naming the steps.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "shared/base/status.h"
#include "shared/jobs/job_file.h"

namespace tessera::spec {

inline constexpr size_t kMaxSteps = 1000;
inline constexpr size_t kMaxStepDependencies = 100;

struct StepDependency {
  std::string step;        // a step of the same job
  bool per_frame = false;  // frame N waits for frame N of that step (else: the whole step)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepDependency, step, per_frame)

struct StepSpec {
  std::string name;
  JobSpec job;           // the step as a job (its name is the job's)
  std::string job_yaml;  // the step as a job file (the job's keys and its own), as stored
  std::vector<StepDependency> depends_on;
  // The step gives its own `output`: its frames go where that says. Without one they go into a
  // folder named after the step inside the job's.
  bool own_output = false;
};

struct PipelineSpec {
  std::string name;
  std::string project = "default";
  std::string user;
  int priority = 50;
  OutputSpec output;  // the job's folder; each step's is a folder named after it inside
  // In an order where every step comes after the steps it depends on (stable: the file's order
  // where the dependencies allow).
  std::vector<StepSpec> steps;

  int step_index(const std::string& name) const;
};

// Whether a job file has `steps:` (parse errors are ParsePipelineYaml's to report). A look of its
// own, parsing the text: the CLI and the scheduler ask shared/jobs/parsed_job_file.h instead.
bool HasSteps(std::string_view yaml_text);

// Parses and checks a job file with steps. Errors name the step and field
// ("steps[1] (render): frames: start 12 is after end 3", "steps[2].depends_on[0].step: no step
// named 'rendr' (sim, render, encode)", "steps: the steps' dependencies form a cycle: a -> b ->
// a").
StatusOr<PipelineSpec> ParsePipelineYaml(std::string_view yaml_text);

// The same for a document already parsed (a job file read once, shared/jobs/parsed_job_file.h;
// an OpenJD template's translation). Each step's spec is read from the document too: a step's
// text (StepSpec::job_yaml) is written for the store, never parsed again.
StatusOr<PipelineSpec> ParsePipelineNode(const YAML::Node& root);

// A job without steps whose renderer only runs as a step (one taking another step's frames, like
// encode) is refused, naming the renderer.
Status CheckRunsAlone(const JobSpec& job);

// The order steps can run in: every step after those it depends on. An error names a cycle.
// `steps` refer to each other by name; unknown names are an error too.
StatusOr<std::vector<size_t>> StepOrder(const std::vector<StepSpec>& steps);

}  // namespace tessera::spec
