// Job files with steps (shared/jobs/job_steps.h): each step parsed as a job of its own on the job's
// defaults, dependencies by name, ordered so each step follows those it needs; every mistake
// refused naming the step and field.

#include "shared/jobs/job_steps.h"

#include <gtest/gtest.h>

namespace tessera::spec {
namespace {

constexpr const char* kThreeSteps = R"(
name: shot
frames: 1-10
priority: 70
steps:
  - name: encode
    renderer: noop
    frames: "1"
    depends_on: [{step: render}]
  - name: sim
    renderer: noop
    chunk_size: 5
  - name: render
    renderer: noop
    max_retries: 1
    depends_on: [{step: sim, per_frame: true}]
)";

TEST(JobStepsTest, StepsTakeTheJobsKeysAndFollowTheStepsTheyNeed) {
  StatusOr<PipelineSpec> p = ParsePipelineYaml(kThreeSteps);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "shot");
  EXPECT_EQ(p->priority, 70);
  ASSERT_EQ(p->steps.size(), 3u);
  // Stored in an order where each follows what it needs, the file's order where it can.
  EXPECT_EQ(p->steps[0].name, "sim");
  EXPECT_EQ(p->steps[1].name, "render");
  EXPECT_EQ(p->steps[2].name, "encode");
  const StepSpec& sim = p->steps[0];
  EXPECT_EQ(sim.job.name, "shot");
  EXPECT_EQ(sim.job.frame_start, 1);
  EXPECT_EQ(sim.job.frame_end, 10);
  EXPECT_EQ(sim.job.chunk_size, 5);
  EXPECT_EQ(sim.job.priority, 70);
  EXPECT_TRUE(sim.depends_on.empty());
  const StepSpec& render = p->steps[1];
  EXPECT_EQ(render.job.max_retries, 1);
  ASSERT_EQ(render.depends_on.size(), 1u);
  EXPECT_EQ(render.depends_on[0].step, "sim");
  EXPECT_TRUE(render.depends_on[0].per_frame);
  const StepSpec& encode = p->steps[2];
  EXPECT_EQ(encode.job.frame_start, 1);
  EXPECT_EQ(encode.job.frame_end, 1);
  EXPECT_FALSE(encode.depends_on[0].per_frame);
  // A step's own job file parses alone (it is what the store keeps for the step).
  EXPECT_TRUE(ParseJobYaml(encode.job_yaml).ok());
  EXPECT_TRUE(HasSteps(kThreeSteps));
  EXPECT_FALSE(HasSteps("name: a\nframes: 1\nrenderer: noop\n"));
}

std::string ErrorOf(const std::string& yaml) {
  StatusOr<PipelineSpec> p = ParsePipelineYaml(yaml);
  return p.ok() ? "accepted" : p.status().message();
}

TEST(JobStepsTest, MistakesAreRefusedNamingTheStepAndField) {
  const std::string head = "name: j\nframes: 1-4\nrenderer: noop\n";
  // A cycle names its steps in order.
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, depends_on: [{step: b}]}\n"
                           "  - {name: b, depends_on: [{step: c}]}\n"
                           "  - {name: c, depends_on: [{step: a}]}\n"),
            "steps: the steps' dependencies form a cycle: a -> b -> c -> a");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a}\n  - {name: b, depends_on: [{step: rendr}]}\n"),
            "steps[1].depends_on[0].step: no step named 'rendr' (a, b)");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, depends_on: [{step: a}]}\n"),
            "steps[0].depends_on[0].step: step 'a' cannot depend on itself");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a}\n  - {name: a}\n"),
            "steps[1].name: another step is named 'a'");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {frames: 1}\n"),
            "steps[0].name: required (a name for the step)");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: 'a b'}\n"),
            "steps[0].name: 'a b' may only contain letters, digits, '.', '_' and '-' (at most "
            "128)");
  // Job ids belong in the job's own depends_on.
  EXPECT_NE(ErrorOf(head + "steps:\n  - {name: a, depends_on: [12]}\n")
                .find("steps[0].depends_on[0]: expected {step: NAME}"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, depends_on: [{step: b, when: 1}]}\n"),
            "steps[0].depends_on[0].when: unknown field (known fields: per_frame, step)");
  // Each step is checked as a job file, the error prefixed with the step.
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, frames: 9-3}\n"),
            "steps[0] (a): frames: start 9 is after end 3");
  EXPECT_EQ(ErrorOf(head + "steps:\n  - {name: a, project: p}\n"),
            "steps[0].project: is the job's, not a step's");
  EXPECT_EQ(ErrorOf(head + "steps: []\n"), "steps: expected a list of at least one step");
  std::string many = head + "steps:\n";
  for (size_t i = 0; i <= kMaxSteps; ++i) many += "  - {name: s" + std::to_string(i) + "}\n";
  EXPECT_EQ(ErrorOf(many), "steps: at most 1000 entries, got 1001");
}

// An encode step (a plugin taking another step's frames): one task over that step's frames,
// after the whole step; refused when it names no other step, one without PNG frames or images,
// a per-frame dependency, or when it stands alone.
TEST(JobStepsTest, AnEncodeStepIsOneTaskOverAnotherStepsFramesAfterIt) {
  StatusOr<PipelineSpec> p = ParsePipelineYaml(R"(
name: shot
frames: 1-10
steps:
  - {name: movie, renderer: encode, frames: '1', settings: {frames_from: render}}
  - {name: render, renderer: pathtracer, frames: 5-2504, scene: {width: 8, height: 8}}
)");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->steps.size(), 2u);
  const StepSpec& movie = p->steps[1];  // after the step it takes frames from
  EXPECT_EQ(movie.name, "movie");
  EXPECT_EQ(movie.job.frame_start, 5);
  EXPECT_EQ(movie.job.frame_end, 2504);
  EXPECT_EQ(movie.job.chunk_size, 2500);  // over kMaxChunkSize: one task all the same
  EXPECT_TRUE(ValidateJob(movie.job).ok());
  ASSERT_EQ(movie.depends_on.size(), 1u);
  EXPECT_EQ(movie.depends_on[0].step, "render");
  EXPECT_FALSE(movie.depends_on[0].per_frame);

  auto error = [](const std::string& steps) {
    StatusOr<PipelineSpec> p = ParsePipelineYaml("name: shot\nframes: 1-3\nsteps:\n" + steps);
    return p.ok() ? std::string("ok") : p.status().message();
  };
  const std::string render = "  - {name: render, scene: {width: 8, height: 8}}\n";
  EXPECT_EQ(error(render + "  - {name: m, renderer: encode, settings: {frames_from: x}}\n"),
            "steps[1] (m): settings.frames_from: 'x' is not another step of this job (render, m)");
  EXPECT_EQ(error("  - {name: sim, renderer: command, settings: {program: sim}}\n"
                  "  - {name: m, renderer: encode, settings: {frames_from: sim}}\n"),
            "steps[1] (m): settings.frames_from: step 'sim' returns no frames");
  EXPECT_EQ(error("  - {name: render, scene: {width: 8, height: 8}, output: {formats: [exr]}}\n"
                  "  - {name: m, renderer: encode, settings: {frames_from: render}}\n"),
            "steps[1] (m): settings.frames_from: step 'render' writes no PNG frames "
            "(output.formats of that step: add png)");
  EXPECT_EQ(error("  - {name: render, frames: 1-10001, scene: {width: 8, height: 8}}\n"
                  "  - {name: m, renderer: encode, settings: {frames_from: render}}\n"),
            "steps[1] (m): settings.frames_from: step 'render' has 10001 frames; at most 10000 "
            "are taken");
  EXPECT_EQ(
      error(render + "  - {name: m, renderer: encode, settings: {frames_from: render}, depends_on: "
                     "[{step: render, per_frame: true}]}\n"),
      "steps[1] (m).depends_on[0].per_frame: a step taking another step's frames runs "
      "once over all of them, after whole steps");
  StatusOr<JobSpec> alone =
      ParseJobYaml("name: m\nframes: 1-3\nrenderer: encode\nsettings: {frames_from: r}\n");
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(CheckRunsAlone(*alone).message(),
            "renderer: encode takes the frames of another step, so it runs only as a step of a "
            "job with steps (settings.frames_from names that step)");
  StatusOr<JobSpec> plain = ParseJobYaml("name: m\nframes: 1-3\nrenderer: noop\n");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(CheckRunsAlone(*plain).ok());
}

}  // namespace
}  // namespace tessera::spec
