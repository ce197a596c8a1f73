// A job file read once (shared/jobs/parsed_job_file.h): one YAML parse says what the file is and
// carries its checked spec, with the errors each kind's own parser gives.

#include "shared/jobs/parsed_job_file.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "shared/base/yaml_util.h"
#include "shared/openjd/openjd.h"
#include "shared/plugins/plugin_catalog.h"

namespace tessera::spec {
namespace {

constexpr const char* kJob = "name: shot\nrenderer: noop\nframes: 1-10\nchunk_size: 2\n";

constexpr const char* kSteps = R"(
name: shot
frames: 1-10
steps:
  - {name: sim, renderer: noop, chunk_size: 5}
  - {name: render, renderer: noop, depends_on: [{step: sim, per_frame: true}]}
  - {name: cleanup, renderer: noop, frames: "1", depends_on: [{step: render}]}
)";

constexpr const char* kTemplate = R"(
specificationVersion: jobtemplate-2023-09
name: render
parameterDefinitions:
  - {name: Frames, type: STRING, default: "1-4"}
steps:
  - name: Render
    parameterSpace:
      taskParameterDefinitions: [{name: Frame, type: INT, range: "{{Param.Frames}}"}]
    script: {actions: {onRun: {command: render, args: ["{{Task.Param.Frame}}"]}}}
)";

constexpr const char* kEnvironment = R"(
specificationVersion: environment-2023-09
environment: {name: Setup, variables: {A: b}}
)";

// Parses `text` through ParseJobFile and counts the YAML documents read on the way.
struct Counted {
  StatusOr<ParsedJobFile> parsed;
  int64_t documents = 0;
};
Counted ParseCounted(std::string_view text) {
  // The renderers a process knows are read once, at their first use; not the job's parse.
  (void)plugin::BuiltinPlugins();
  const int64_t before = yaml::DocumentsParsedOnThisThread();
  StatusOr<ParsedJobFile> parsed = ParseJobFile(text);
  return {std::move(parsed), yaml::DocumentsParsedOnThisThread() - before};
}

TEST(ParsedJobFileTest, AJobIsParsedOnceIntoItsCheckedSpec) {
  Counted c = ParseCounted(kJob);
  ASSERT_TRUE(c.parsed.ok()) << c.parsed.status().ToString();
  EXPECT_EQ(c.documents, 1);
  ASSERT_TRUE(std::holds_alternative<JobSpec>(*c.parsed));
  const JobSpec& job = std::get<JobSpec>(*c.parsed);
  EXPECT_EQ(job.name, "shot");
  EXPECT_EQ(job.chunk_size, 2);
  EXPECT_EQ(ReadJobFile(kJob).kind, JobFileKind::kJob);
}

// Each step's spec is read from the same document: three steps, still one parse. Each step's
// text (what the store keeps) reads back as the same job.
TEST(ParsedJobFileTest, AJobWithStepsIsParsedOnceStepsIncluded) {
  Counted c = ParseCounted(kSteps);
  ASSERT_TRUE(c.parsed.ok()) << c.parsed.status().ToString();
  EXPECT_EQ(c.documents, 1);
  ASSERT_TRUE(std::holds_alternative<PipelineSpec>(*c.parsed));
  const PipelineSpec& pipeline = std::get<PipelineSpec>(*c.parsed);
  ASSERT_EQ(pipeline.steps.size(), 3u);
  EXPECT_EQ(pipeline.steps[0].name, "sim");
  EXPECT_EQ(pipeline.steps[0].job.chunk_size, 5);
  EXPECT_EQ(pipeline.steps[2].job.frame_end, 1);
  for (const StepSpec& step : pipeline.steps) {
    StatusOr<JobSpec> again = ParseJobYaml(step.job_yaml);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->frame_start, step.job.frame_start);
    EXPECT_EQ(again->frame_end, step.job.frame_end);
    EXPECT_EQ(again->chunk_size, step.job.chunk_size);
    EXPECT_EQ(again->renderer, step.job.renderer);
  }
  EXPECT_EQ(ReadJobFile(kSteps).kind, JobFileKind::kSteps);
}

// A template is told apart by the same parse, and the translator reads that document: one parse
// from the text to a job with steps (whose spec is read from the translation's document).
TEST(ParsedJobFileTest, ATemplateIsParsedOnceAndTranslatedFromTheDocument) {
  (void)plugin::BuiltinPlugins();  // read once per process, at first use: not the job's parse
  const int64_t before = yaml::DocumentsParsedOnThisThread();
  StatusOr<ParsedJobFile> parsed = ParseJobFile(kTemplate);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(std::holds_alternative<OpenJdTemplate>(*parsed));
  StatusOr<openjd::Translation> translation =
      openjd::TranslateTemplate(std::get<OpenJdTemplate>(*parsed), openjd::JobInputs());
  ASSERT_TRUE(translation.ok()) << translation.status().ToString();
  StatusOr<ParsedJobFile> job =
      CheckJobFile(JobFileOf(translation->job, translation->job_yaml.size()));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(yaml::DocumentsParsedOnThisThread() - before, 1);
  ASSERT_TRUE(std::holds_alternative<PipelineSpec>(*job));
  const PipelineSpec& pipeline = std::get<PipelineSpec>(*job);
  ASSERT_EQ(pipeline.steps.size(), 1u);
  EXPECT_EQ(pipeline.steps[0].job.renderer, kRendererOpenJd);
  EXPECT_EQ(pipeline.steps[0].job.frame_end, 4);
  // The text stored for it reads as the same job.
  StatusOr<PipelineSpec> stored = ParsePipelineYaml(translation->job_yaml);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString() << "\n" << translation->job_yaml;
  EXPECT_EQ(stored->name, pipeline.name);
  EXPECT_EQ(stored->steps[0].job.frame_end, 4);
}

// What each kind's own parser says, word for word: the shared parse changes no message.
TEST(ParsedJobFileTest, ErrorsAreThoseOfEachKindsOwnParser) {
  const auto message = [](std::string_view text) {
    StatusOr<ParsedJobFile> parsed = ParseJobFile(text);
    return parsed.ok() ? std::string("ok") : parsed.status().message();
  };
  for (const char* job : {"name: a\nframes: [1\n", "- a\n- b\n", "name: a\nframes: 9-1\n",
                          "name: a\nframes: 1\nbogus: 1\n", "", "\xff"}) {
    EXPECT_EQ(message(job), ParseJobYaml(job).status().message()) << job;
  }
  const std::string bad_steps = std::string(kSteps) + "  - {name: sim, renderer: noop}\n";
  EXPECT_EQ(message(bad_steps), ParsePipelineYaml(bad_steps).status().message());
  EXPECT_EQ(message("name: a\nframes: 1\nsteps: []\n"),
            "steps: expected a list of at least one step");
  // A step-only renderer alone: CheckRunsAlone's refusal.
  const std::string alone = "name: m\nframes: 1-3\nrenderer: encode\nsettings: {frames_from: r}\n";
  ASSERT_TRUE(ParseJobYaml(alone).ok());
  EXPECT_EQ(message(alone), CheckRunsAlone(*ParseJobYaml(alone)).message());
  // An environment template is nothing to submit: a job file's error.
  EXPECT_EQ(ReadJobFile(kEnvironment).kind, JobFileKind::kOpenJdEnvironment);
  EXPECT_EQ(message(kEnvironment), ParseJobYaml(kEnvironment).status().message());
}

// Over a job file's size: a job gets the job parser's refusal; a template is still told apart,
// and the OpenJD reader refuses it with its own.
TEST(ParsedJobFileTest, OversizedFilesAreRefusedByTheirOwnReader) {
  const std::string padding = "# " + std::string(kMaxJobYamlBytes, 'x') + "\n";
  const std::string job = std::string(kJob) + padding;
  EXPECT_EQ(ParseJobFile(job).status().message(), ParseJobYaml(job).status().message());
  const std::string tpl = std::string(kTemplate) + padding;
  const JobFileDocument document = ReadJobFile(tpl);
  ASSERT_EQ(document.kind, JobFileKind::kOpenJdJobTemplate);
  StatusOr<ParsedJobFile> parsed = CheckJobFile(document);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(openjd::TranslateTemplate(std::get<OpenJdTemplate>(*parsed), openjd::JobInputs())
                .status()
                .message(),
            openjd::TranslateTemplate(tpl, openjd::JobInputs()).status().message());
}

TEST(ParsedJobFileTest, TheTopRendererIsReadWithoutChecking) {
  EXPECT_EQ(ReadJobFile("name: a\nrenderer: my_plugin\n").TopRenderer(), "my_plugin");
  EXPECT_EQ(ReadJobFile("name: a\n").TopRenderer(), "");
  EXPECT_EQ(ReadJobFile("renderer: [a]\n").TopRenderer(), "");
  EXPECT_EQ(ReadJobFile("renderer: [\n").TopRenderer(), "");
  EXPECT_EQ(ReadJobFile("- renderer\n").TopRenderer(), "");
}

}  // namespace
}  // namespace tessera::spec
