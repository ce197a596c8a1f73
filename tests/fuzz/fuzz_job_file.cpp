// Fuzzes the job file parser (shared/jobs/job_file.h) as the API and the CLI use it: ParseJobYaml,
// then ValidateJob and what the scheduler derives from an accepted job; the one parse of a job
// file (shared/jobs/parsed_job_file.h), which must agree with those text parsers; a job file with
// steps (shared/jobs/job_steps.h) through ParsePipelineYaml, each step as a job; an Open Job
// Description template (shared/openjd/openjd.h) through CheckTemplate and TranslateTemplate
// (defaults, a bundle's folders; an environment template around a job), the job file it makes
// through ParsePipelineYaml (which must accept it) and each step's session through PlanTask (its
// first and last task). A job that parses must hold only valid UTF-8 (the store writes its lists
// as JSON text, which would throw otherwise).

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "shared/base/utf8.h"
#include "shared/jobs/job_file.h"
#include "shared/jobs/job_steps.h"
#include "shared/jobs/parsed_job_file.h"
#include "shared/openjd/openjd.h"

namespace {

using tessera::utf8::IsValid;

void MustBeValid(const std::string& text) {
  if (!IsValid(text)) std::abort();
}

// The one parse the CLI and the scheduler use (shared/jobs/parsed_job_file.h) must agree with
// the text parsers of a job file: the same file accepted, the same error word for word.
void MustAgreeWithTheTextParsers(std::string_view text) {
  namespace spec = tessera::spec;
  const tessera::StatusOr<spec::ParsedJobFile> parsed = spec::ParseJobFile(text);
  tessera::Status expected;
  size_t steps = 0;
  if (spec::HasSteps(text)) {
    tessera::StatusOr<spec::PipelineSpec> pipeline = spec::ParsePipelineYaml(text);
    expected = pipeline.status();
    if (pipeline.ok()) steps = pipeline->steps.size();
  } else {
    tessera::StatusOr<spec::JobSpec> job = spec::ParseJobYaml(text);
    expected = job.ok() ? spec::CheckRunsAlone(*job) : job.status();
  }
  if (parsed.ok() != expected.ok()) std::abort();
  if (!parsed.ok() && parsed.status().message() != expected.message()) std::abort();
  if (parsed.ok() && steps > 0 && std::get<spec::PipelineSpec>(*parsed).steps.size() != steps) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tessera::openjd::DocumentKind kind = tessera::openjd::KindOf(text);
  if (kind == tessera::openjd::DocumentKind::kEnvironmentTemplate) {
    // Checked alone, then wrapped around a one-step job with every value its parameters need
    // taken from their defaults.
    if (!tessera::openjd::CheckTemplate(text).ok()) return 0;
    tessera::openjd::JobInputs inputs;
    inputs.environments = {std::string(text)};
    inputs.template_dir = "/bundle";
    inputs.working_dir = "/home/ana";
    (void)tessera::openjd::TranslateTemplate(
        "specificationVersion: jobtemplate-2023-09\nname: j\nsteps:\n  - name: s\n"
        "    script: {actions: {onRun: {command: run}}}\n",
        inputs);
    return 0;
  }
  if (kind == tessera::openjd::DocumentKind::kJobTemplate) {
    // Checked without values, then made with the defaults (relative PATHs joined) and, for
    // the path mapping code, its own text as rules.
    const bool checked = tessera::openjd::CheckTemplate(text).ok();
    tessera::openjd::JobInputs inputs;
    inputs.template_dir = "/bundle";
    inputs.working_dir = "/home/ana";
    inputs.output_dirs = {"/bundle/out"};
    inputs.input_roots = {"/bundle"};
    tessera::StatusOr<tessera::openjd::Translation> translation =
        tessera::openjd::TranslateTemplate(text, inputs);
    if (!translation.ok()) return 0;
    // What makes a job checks a template at least as strictly as a check of it alone.
    if (!checked) std::abort();
    MustBeValid(translation->job_yaml);
    tessera::StatusOr<tessera::spec::PipelineSpec> pipeline =
        tessera::spec::ParsePipelineYaml(translation->job_yaml);
    if (!pipeline.ok()) std::abort();  // a translation the job parser refuses is a defect
    for (const tessera::spec::StepSpec& step : pipeline->steps) {
      const std::string& session = translation->step_scenes.at(step.name);
      for (int64_t index : {int64_t{0}, int64_t{step.job.frame_end} - 1}) {
        (void)tessera::openjd::PlanTask(session, index, "/work/task",
                                        {{"WINDOWS", "C:\\", "/mnt/c", false}});
      }
    }
    return 0;
  }
  MustAgreeWithTheTextParsers(text);
  if (tessera::spec::HasSteps(text)) {
    tessera::StatusOr<tessera::spec::PipelineSpec> pipeline =
        tessera::spec::ParsePipelineYaml(text);
    if (!pipeline.ok()) return 0;
    for (const tessera::spec::StepSpec& step : pipeline->steps) {
      MustBeValid(step.name);
      MustBeValid(step.job_yaml);
      for (const auto& dep : step.depends_on) MustBeValid(dep.step);
      (void)tessera::spec::ValidateJob(step.job);
    }
    return 0;
  }
  tessera::StatusOr<tessera::spec::JobSpec> job = tessera::spec::ParseJobYaml(text);
  if (!job.ok()) return 0;
  MustBeValid(job->name);
  MustBeValid(job->renderer);
  MustBeValid(job->project);
  MustBeValid(job->user);
  MustBeValid(job->scene_path);
  MustBeValid(job->scene_yaml);
  for (const auto* list : {&job->limits, &job->pools, &job->tags, &job->asset_files}) {
    for (const std::string& s : *list) MustBeValid(s);
  }
  for (const auto& [key, value] : job->settings) {
    MustBeValid(key);
    MustBeValid(value);
  }
  for (const std::string& f : job->output.formats) MustBeValid(f);
  MustBeValid(job->output.directory);
  MustBeValid(job->output.pattern);
  (void)tessera::spec::ValidateJob(*job);
  (void)tessera::spec::EffectivePattern(*job);
  (void)tessera::spec::ResolvedSettings(*job);
  (void)tessera::spec::SceneFileName(*job);
  int start = 0, end = 0;
  (void)tessera::spec::ParseFrameRange(std::string(text.substr(0, 64)), &start, &end);
  return 0;
}
