// Fuzzes the job file parser (shared/job_spec.h) as the API and the CLI use it: ParseJobYaml,
// then ValidateJob and what the scheduler derives from an accepted job; a job file with steps
// (shared/job_steps.h) through ParsePipelineYaml, each step as a job; an Open Job Description
// template (shared/openjd.h) through TranslateTemplate, the job file it makes through
// ParsePipelineYaml (which must accept it) and each step's session through PlanTask (its first
// and last task). A job that parses must hold only valid UTF-8 (the store writes its lists as
// JSON text, which would throw otherwise).

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shared/job_spec.h"
#include "shared/job_steps.h"
#include "shared/openjd.h"
#include "shared/utf8.h"

namespace {

using tessera::utf8::IsValid;

void MustBeValid(const std::string& text) {
  if (!IsValid(text)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (tessera::openjd::IsJobTemplate(text)) {
    tessera::StatusOr<tessera::openjd::Translation> translation =
        tessera::openjd::TranslateTemplate(text, {});
    if (!translation.ok()) return 0;
    MustBeValid(translation->job_yaml);
    tessera::StatusOr<tessera::spec::PipelineSpec> pipeline =
        tessera::spec::ParsePipelineYaml(translation->job_yaml);
    if (!pipeline.ok()) std::abort();  // a translation the job parser refuses is a defect
    for (const tessera::spec::StepSpec& step : pipeline->steps) {
      const std::string& session = translation->step_scenes.at(step.name);
      for (int64_t index : {int64_t{0}, int64_t{step.job.frame_end} - 1}) {
        (void)tessera::openjd::PlanTask(session, index, "/work/task");
      }
    }
    return 0;
  }
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
